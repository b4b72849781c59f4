"""The library's Hopper GEMM (kernels/gemm_sm90.py, persistent and warp-specialized) and the
tensor-core example GEMMs (examples/gemm_sm80.py, gemm_sm90.py, gemm_sm90_ws.py) against cuBLAS,
in the same run.

    python benchmarks/gemm.py [--sizes 4096 8192 --repeats 50]

C = A @ B^T with bf16 A (M, K) and B (N, K) (F.linear's layout), fp32 accumulation; FLOPs =
2 M N K. "GPU ms" is the median over `repeats` calls of the kernels' device time (CUPTI through
torch.profiler; benchmarks/timing.py), and TFLOP/s and the ratio come from it; "call ms" is the
median CUDA-event time of one call from Python, host path included (ours is the @cute.jit host
function today; the C++ op of issue 17 replaces it). cuBLAS is torch.mm into a preallocated bf16
output, its GPU time measured the same way once per size; the Hopper kernels write bf16 too, the
Ampere example writes fp32 (twice the output bytes), and every ratio is against that bf16 cuBLAS
time. "first s" is our kernel's trace + compile + first launch.
"""

import argparse
import pathlib
import runpy
import time

import torch
from timing import kernel_ms, median_ms

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _library():
    """The library takes b as (K, N) like torch.mm; b.t() of the (N, K) operand is its K-major form."""
    from cute_torch.kernels.gemm_sm90 import gemm
    return lambda a, b, c: gemm(a, b.t(), c)


def _example(name):
    return lambda: runpy.run_path(str(EXAMPLES / f"{name}.py"))["gemm"]


KERNELS = [("kernels/gemm_sm90 (persistent WS)", _library, torch.bfloat16, (9, 0)),
           ("example gemm_sm90 (TMA + wgmma)", _example("gemm_sm90"), torch.bfloat16, (9, 0)),
           ("example gemm_sm90_ws", _example("gemm_sm90_ws"), torch.bfloat16, (9, 0)),
           ("example gemm_sm80 (cp.async + ldmatrix)", _example("gemm_sm80"), torch.float32, (8, 0))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--only", default="", help="run the kernels whose label contains this")
    args = parser.parse_args()
    capability = torch.cuda.get_device_capability()
    print(f"{torch.cuda.get_device_name()}, bf16 inputs, median of {args.repeats}")
    print(f"{'kernel':40} {'M=N=K':>6} {'first s':>8} {'call ms':>8} {'GPU ms':>8} {'TFLOP/s':>8} {'cuBLAS ms':>9} "
          f"{'cuBLAS TF/s':>11} {'ratio':>6}")
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda").bfloat16()
        b = torch.randn(size, size, device="cuda").bfloat16()
        c_bf16 = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
        cublas = kernel_ms(lambda: torch.mm(a, b.t(), out=c_bf16), args.repeats)
        tflop = 2 * size ** 3 / 1e9
        for label, load, out_dtype, needs in KERNELS:
            if capability < needs or (needs == (9, 0) and capability != (9, 0)) or args.only not in label:
                continue
            gemm = load()
            c = torch.empty(size, size, device="cuda", dtype=out_dtype)
            start = time.perf_counter()
            gemm(a, b, c)
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            call = median_ms(lambda: gemm(a, b, c), args.repeats)
            ours = kernel_ms(lambda: gemm(a, b, c), args.repeats)
            print(f"{label:40} {size:6} {first:8.2f} {call:8.3f} {ours:8.3f} {tflop / ours:8.0f} {cublas:9.3f} "
                  f"{tflop / cublas:11.0f} {cublas / ours:6.2f}")


if __name__ == "__main__":
    main()
