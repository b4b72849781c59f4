"""The transformer block's four forward GEMMs (examples/transformer_block.py at M = 8192 tokens,
d = 2048) with the epilogues the backend gives them, ours in three variants against cuBLAS
(`F.linear` with bias, and `torch.mm`), with our plain GEMM of the same shape beside each.

    python benchmarks/block_gemms.py [--repeats 20]

GPU ms: median CUPTI device time of all kernels of a call (timing.kernel_ms)."""

import argparse

import torch
from timing import kernel_ms

from cute_torch.kernels.gemm_sm90 import gemm
from cute_torch.kernels.gemm_tuning import CANDIDATES

F = torch.nn.functional
M, D = 8192, 2048
# name, N, K, epilogue, whether the pre-activation is a second output (autograd keeps it)
GEMMS = (("qkv + bias", 3 * D, D, "acc + x0", False),
         ("proj + bias + residual", D, D, "acc + x0 + x1", False),
         ("fc1 + bias + gelu_tanh", 4 * D, D, "gelu_tanh(acc + x0)", True),
         ("fc2 + bias + residual", D, 4 * D, "acc + x0 + x1", False))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    variants = CANDIDATES[:3]   # 256 cooperative, 128 cooperative, 128 ping-pong
    print(f"{torch.cuda.get_device_name()}, bf16, M = {M}; GPU ms, median of {args.repeats}")
    print("| GEMM | N | K | cuBLAS linear | cuBLAS mm | "
          + " | ".join(f"ours {v.tile_n} {v.schedule} (plain)" for v in variants) + " |")
    for name, n, k, expr, two in GEMMS:
        x = torch.randn(M, k, device="cuda", generator=g).bfloat16()
        w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).bfloat16()
        bias = torch.randn(n, device="cuda", generator=g).bfloat16()
        residual = torch.randn(M, n, device="cuda", generator=g).bfloat16()
        c, pre = (torch.empty(M, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        inputs = (bias, residual) if "x1" in expr else (bias,)
        outs, epilogues = ((pre, c), ("acc + x0", expr)) if two else (c, expr)
        row = [kernel_ms(lambda: F.linear(x, w, bias), args.repeats),
               kernel_ms(lambda: torch.mm(x, w.t()), args.repeats)]
        cells = []
        for v in variants:
            fused = kernel_ms(lambda: gemm(x, w.t(), outs, epilogues, inputs, tile_n=v.tile_n, schedule=v.schedule,
                                           raster=v.raster), args.repeats)
            plain = kernel_ms(lambda: gemm(x, w.t(), c, tile_n=v.tile_n, schedule=v.schedule, raster=v.raster),
                              args.repeats)
            cells.append(f"{fused:.3f} ({plain:.3f})")
        print(f"| {name} | {n} | {k} | " + " | ".join(f"{t:.3f}" for t in row) + " | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
