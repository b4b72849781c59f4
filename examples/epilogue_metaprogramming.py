"""The seed's fused-epilogue example: the epilogue is a Python class passed as a compile-time
argument, so each choice compiles to its own kernel and only ReLU's has the select.

    python examples/epilogue_metaprogramming.py

`matmul_dynamic` loops over C's columns with a dynamic `for` (C's layout is run-time, so the
loop is an `scf.for`); `matmul_unrolled` uses `cute.range_constexpr` over a compile-time
width (no loop in the IR: one copy of the body per column).
"""

import torch

import cute_torch as cute

DEBUG = False
print_debug = lambda message: DEBUG and cute.printf(message)  # noqa: E731 - the seed's spelling


class Epilogue:
    def run(self, matrix):
        print_debug("identity epilogue")
        return matrix


class ReLU(Epilogue):
    def run(self, matrix):
        print_debug("ReLU epilogue")
        return cute.where(matrix > 0.0, matrix, cute.full_like(matrix, 0.0))


@cute.jit
def gemm(A, B, row, col):
    """One element of A @ B (a plain dot product: the point here is the epilogue)."""
    acc = cute.Float32(0.0)
    for k in range(A.shape[1]):
        acc += A[row, k] * B[k, col]
    return acc


@cute.kernel
def matmul_dynamic_kernel(epilogue: cute.Constexpr, A, B, C):
    row = cute.arch.block_idx()[0] * cute.arch.block_dim()[0] + cute.arch.thread_idx()[0]
    if row < C.shape[0]:
        for i in range(C.shape[1]):
            matrix = gemm(A, B, row, i)
            C[row, i] = epilogue().run(matrix)


@cute.kernel
def matmul_unrolled_kernel(epilogue: cute.Constexpr, A, B, C):
    row = cute.arch.block_idx()[0] * cute.arch.block_dim()[0] + cute.arch.thread_idx()[0]
    if row < C.shape[0]:
        for i in cute.range_constexpr(C.shape[1]):
            matrix = gemm(A, B, row, i)
            C[row, i] = epilogue().run(matrix)


@cute.jit
def matmul_dynamic(epilogue: cute.Constexpr, A, B, C):
    matmul_dynamic_kernel(epilogue, A, B, C).launch(grid=((C.shape[0] + 127) // 128, 1, 1), block=(128, 1, 1))


@cute.jit
def matmul_unrolled(epilogue: cute.Constexpr, A, B, C):
    matmul_unrolled_kernel(epilogue, A, B, C).launch(grid=((C.shape[0] + 127) // 128, 1, 1), block=(128, 1, 1))


def main():
    device = "cuda" if cute.gpu_available() else "cpu"
    M, N, K = 300, 8, 64
    A = torch.randn(M, K, device=device)
    B = torch.randn(K, N, device=device)
    for epilogue in (Epilogue, ReLU):
        C = torch.full((M, N), float("nan"), device=device)
        dynamic_C = cute.from_dlpack(C).mark_layout_dynamic()
        for name, fn, c in (("dynamic", matmul_dynamic, dynamic_C), ("unrolled", matmul_unrolled, C)):
            compiled = cute.compile(fn, epilogue, A, B, c)
            selects = compiled.__mlir__.count("arith.select")
            loops = compiled.__mlir__.count("scf.for")
            if device == "cuda":
                C.fill_(float("nan"))
                compiled(epilogue, A, B, c)
                expected = A.double() @ B.double()
                if epilogue is ReLU:
                    expected = expected.clamp_min(0)
                error = (C.double() - expected).abs().max().item()
                status = f"max error {error:.2e}"
            else:
                status = "compiled (no GPU to run on)"
            print(f"{epilogue.__name__:8} {name:8} scf.for: {loops}  arith.select: {selects}  {status}")


if __name__ == "__main__":
    main()
