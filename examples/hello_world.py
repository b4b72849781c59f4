"""The seed's first kernel: thread 0 prints from the GPU.

    python examples/hello_world.py
"""

import cute_torch as cute


@cute.kernel
def kernel():
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        cute.printf("Hello world")


@cute.jit
def host():
    kernel().launch(grid=(1, 1, 1), block=(32, 1, 1))


if __name__ == "__main__":
    if cute.gpu_available():
        host()
        import torch

        torch.cuda.synchronize()
    else:
        compiled = cute.compile(host)
        print(f"no GPU here: compiled {compiled.kernels[0]['name']} to a {len(compiled.__cubin__)}-byte CUBIN")
