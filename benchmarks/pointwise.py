"""cute::pointwise against torch eager and torch.compile, and the host cost of a call.

    python benchmarks/pointwise.py [--numel 67108864 --repeats 50]

Bandwidth: `relu(x0 * x1 + x2) * 2` (torch: `(x * y + z).relu() * 2`) reads three tensors and
writes one: 4 x numel x element size bytes. Each row is the median of `repeats` CUDA-event
timings after warm-up; "vs copy" divides by torch's copy bandwidth (out.copy_(x), 2 x size)
measured in the same run. Host time: wall time of 5000 back-to-back calls on 1024 elements
(the GPU is not the limit there), divided by the calls, against torch.add on the same tensors;
cute_torch.ops.pointwise takes the short entry (csrc/torch/PythonEntry.cpp), torch.ops.* the
generic binding.
"""

import argparse
import statistics
import time

import torch
from timing import median_ms

import cute_torch.ops as cops

EXPR = "relu(x0 * x1 + x2) * 2"


def host_us(fn, calls: int = 5000) -> float:
    """Median over 5 rounds of the per-call wall time of `calls` calls."""
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def eager(x, y, z):
    return (x * y + z).relu() * 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--numel", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, {args.numel} elements, median of {args.repeats}")
    print(f"{'kernel':28} {'dtype':9} {'ms':>8} {'TB/s':>7} {'vs copy':>8} {'vs compile':>10}")
    compiled = torch.compile(eager)
    op = torch.ops.cute.pointwise
    for dtype in (torch.float32, torch.bfloat16):
        x, y, z = (torch.randn(args.numel, device="cuda").to(dtype) for _ in range(3))
        out = torch.empty_like(x)
        size = x.numel() * x.element_size()
        copy_ms = median_ms(lambda: out.copy_(x), args.repeats)
        rows = [("torch copy (ceiling)", copy_ms, 2 * size),
                ("cute::pointwise", median_ms(lambda: op(EXPR, [x, y, z], None), args.repeats), 4 * size),
                ("torch eager", median_ms(lambda: eager(x, y, z), args.repeats), 4 * size),
                ("torch.compile", median_ms(lambda: compiled(x, y, z), args.repeats), 4 * size)]
        copy_tbs = 2 * size / copy_ms / 1e9
        compile_tbs = rows[3][2] / rows[3][1] / 1e9
        for name, ms, nbytes in rows:
            tbs = nbytes / ms / 1e9
            print(f"{name:28} {str(dtype).replace('torch.', ''):9} {ms:8.3f} {tbs:7.2f} {tbs / copy_tbs:8.2f} "
                  f"{tbs / compile_tbs:10.2f}")
        # What was timed is right, every element (fp32 against an fp64 reference).
        got = op(EXPR, [x, y, z], None)
        want = eager(x.double(), y.double(), z.double()).to(dtype)
        tol = dict(rtol=2e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(got, want, **tol)
        x = y = z = out = None                          # the next dtype's tensors need the memory

    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    rows = [("torch.add", lambda: torch.add(a, b)),
            ("cute_torch.ops.pointwise", lambda: cops.pointwise("x0 + x1", a, b)),
            ("torch.ops.cute.pointwise.default", lambda: op.default("x0 + x1", [a, b], None)),
            ("torch.ops.cute.pointwise", lambda: op("x0 + x1", [a, b], None))]
    base = None
    print(f"\nhost time per call, 1024 elements\n{'call':34} {'us':>7} {'vs torch.add':>13}")
    for name, fn in rows:
        us = host_us(fn)
        base = base or us
        print(f"{name:34} {us:7.2f} {us / base:13.2f}")


if __name__ == "__main__":
    main()
