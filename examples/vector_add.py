"""Vector add in the DSL: a @cute.kernel launched from a @cute.jit host function.

    python examples/vector_add.py

The first call traces and compiles (or loads from the disk cache); later calls with tensors of
the same shape, dtype and alignment go straight to the compiled code. Marking the layout
dynamic (`cute.from_dlpack(t).mark_layout_dynamic()`) makes one compile serve every size.
"""

import time

import torch

import cute_torch as cute

THREADS = 256


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    i = bid * THREADS + tid
    if i < cute.size(c):
        c[i] = a[i] + b[i]


@cute.jit
def vector_add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    blocks = (cute.size(c) + THREADS - 1) // THREADS
    add_kernel(a, b, c).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))


def main():
    if not cute.gpu_available():
        a = torch.randn(10_000_000)
        compiled = cute.compile(vector_add, a, a, torch.empty_like(a))
        print(f"no GPU here: compiled to {len(compiled.__cubin__)} CUBIN bytes; PTX has "
              f"{compiled.__ptx__.count(chr(10))} lines")
        return
    n = 10_000_000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    start = time.perf_counter()
    vector_add(a, b, c)
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    start = time.perf_counter()
    for _ in range(100):
        vector_add(a, b, c)
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - start) / 100
    # One compile for every length: the layout is a run-time value.
    for m in (1, 1000, 12345):
        x, y = torch.randn(m, device="cuda"), torch.randn(m, device="cuda")
        z = torch.full_like(x, float("nan"))
        vector_add(*(cute.from_dlpack(t).mark_layout_dynamic() for t in (x, y, z)))
        torch.testing.assert_close(z, x + y, rtol=0, atol=0)
    print(f"vector add of {n} floats correct; first call {first * 1e3:.1f} ms (trace+compile or disk cache), "
          f"then {per_call * 1e6:.1f} us per call; dynamic layouts correct for 3 sizes")


if __name__ == "__main__":
    main()
