"""Compile the MLIR vector add (tests/mlir/vector_add.mlir) and, with a GPU, run it.

The foundation's end-to-end path: MLIR text -> cute pipeline -> PTX -> CUBIN, plus a JIT-compiled
host function that launches the kernel on the current torch stream.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cute_torch  # noqa: E402

SOURCE = os.path.join(os.path.dirname(__file__), "..", "tests", "mlir", "vector_add.mlir")


def main() -> None:
    with open(SOURCE) as f:
        module = cute_torch.compile_mlir(f.read(), source_name=SOURCE, name="vector_add")
    (kernel,) = module.kernels
    timings = module.metadata["timings_ms"]
    print(f"compiled for {module.metadata['arch']} with {module.metadata['cubin_backend']} "
          f"in {timings['total']:.1f} ms: kernel {kernel['name']} uses {kernel['registers']} registers, "
          f"{len(module.__cubin__)} bytes of CUBIN")
    if not cute_torch.gpu_available():
        print("no GPU here: compiled only")
        return
    import torch

    n = 10_000_000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    module.vector_add(a, b, c, n)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b), "vector add gave wrong results"
    print(f"ran on {torch.cuda.get_device_name()}: {n} elements correct")


if __name__ == "__main__":
    main()
