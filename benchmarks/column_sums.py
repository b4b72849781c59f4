"""Column sums (kernels/column_sums.py through torch.ops.cute.column_sum): a linear's bias
gradient, the output gradient summed over the tokens, against torch.sum(x, 0) (what eager
and the backend ran before) and Inductor, with copy as the ceiling.

    python benchmarks/column_sums.py [--repeats 30]

Bytes counted: x once (the N outputs and the partial rows are left out). GPU ms: the median
CUPTI device time of all kernels of a call (timing.kernel_ms; ours is two launches). "of copy"
divides a bandwidth by out.copy_(x)'s (reading and writing x's bytes) in the same run.
"""

from __future__ import annotations

import argparse

import torch
from timing import kernel_ms

import cute_torch.ops as cops

# (M, N): the transformer block's bias gradients at 8 x 1024 tokens, d_model 2048 (qkv, proj /
# fc2, fc1), then short and long columns.
SHAPES = ((8192, 6144), (8192, 2048), (8192, 8192), (1024, 1024), (65536, 256), (512, 32768))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--no-inductor", action="store_true")
    args = parser.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    print(f"{torch.cuda.get_device_name()}; GPU ms (median of {args.repeats}), GB/s of x read")
    print("| dtype | M | N | MB | ours | torch.sum | Inductor | ours GB/s | ours of copy | torch.sum / ours |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    inductor = None if args.no_inductor else torch.compile(lambda t: t.sum(0))
    for dtype in (torch.bfloat16, torch.float32):
        for m, n in SHAPES:
            x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
            out = torch.empty_like(x)
            nbytes = x.numel() * x.element_size()
            ours = kernel_ms(lambda: cops.column_sum(x), args.repeats)
            eager = kernel_ms(lambda: x.sum(0), args.repeats)
            compiled = kernel_ms(lambda: inductor(x), args.repeats) if inductor else float("nan")
            copy_gbs = 2 * nbytes / kernel_ms(lambda: out.copy_(x), args.repeats, copies=True) / 1e6
            gbs = nbytes / ours / 1e6
            print(f"| {str(dtype)[6:]} | {m} | {n} | {nbytes / 1e6:.0f} | {ours:.4f} | {eager:.4f} | {compiled:.4f} | "
                  f"{gbs:.0f} | {gbs / copy_gbs:.2f} | {eager / ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
