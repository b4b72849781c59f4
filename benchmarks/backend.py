"""torch.compile(backend="cute") against eager and Inductor, same run, medians.

    python benchmarks/backend.py [--repeats 30]

Two workloads:
- pointwise-heavy inference: gelu(x*y + b) * sigmoid(x) + tanh(y)*0.5 - relu(b - x) on
  16M elements (x, y: [4096, 4096], b: [4096]); the ideal reads x and y and writes the result
  (3 x numel x element size bytes), measured against torch's copy (read + write) in the same run.
- the training step of an MLP block (Linear+bias, GELU, Linear, residual, a pointwise-heavy
  loss; forward, backward and an AdamW step, the optimizer eager in every variant),
  tokens x d = 8192 x 1024.

Each row is the median of `repeats` CUDA-event timings after warm-up (and after compiling). The
pointwise workload is timed two ways: one call on an idle GPU (what a lone call costs, host
time included) and 10 calls queued back to back (per call; the GPU time, host time hidden).
"""

import argparse
import copy
import functools
import os
import sys

import torch
import torch.nn.functional as F
from timing import median_ms

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from mlp_block import Block, pointwise_loss  # noqa: E402

import cute_torch.backend  # noqa: F401  (registers "cute"; the entry point would too)


def pointwise_heavy(x, y, b):
    h = F.gelu(x * y + b)
    return h * torch.sigmoid(x) + torch.tanh(y) * 0.5 - torch.relu(b - x)


# What the cute backend emits for pointwise_heavy (tests/test_backend_graphs.py checks the spelling).
EXPR = "(((gelu(((x0 * x1) + x2)) * sigmoid(x0)) + (tanh(x1) * 0.5)) - relu((x2 - x0)))"
VARIANTS = [("eager", None), ("inductor", "inductor"), ("cute", "cute"),
            ("cute + inductor", ("cute", {"fallback": "inductor"}))]


def compiled(fn, variant):
    if variant is None:
        return fn
    if isinstance(variant, tuple):
        return torch.compile(fn, backend=variant[0], options=variant[1])
    return torch.compile(fn, backend=variant)


def table(title: str, rows: list, ideal_ms: float | None = None) -> None:
    eager = dict(rows)["eager"]
    inductor = dict(rows)["inductor"]
    extra = f" {'of ideal':>9}" if ideal_ms else ""
    print(f"\n{title}\n{'variant':18} {'ms':>8} {'vs eager':>9} {'vs inductor':>12}{extra}")
    for name, ms in rows:
        ideal = f" {ideal_ms / ms:9.2f}" if ideal_ms else ""
        print(f"{name:18} {ms:8.3f} {eager / ms:9.2f} {inductor / ms:12.2f}" + ideal)


def bench_pointwise(repeats: int) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        x, y = (torch.randn(4096, 4096, device="cuda").to(dtype) for _ in range(2))
        b = torch.randn(4096, device="cuda").to(dtype)
        want = pointwise_heavy(x.double(), y.double(), b.double())
        calls = []
        for name, variant in VARIANTS:
            torch._dynamo.reset()
            fn = compiled(pointwise_heavy, variant)
            got = fn(x, y, b)
            # What is timed is right. bf16: eager rounds every intermediate (values up to ~16,
            # half an ulp 0.03); the fused variants compute in fp32 and round once.
            tol = (dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else
                   dict(rtol=2e-2, atol=8e-2) if name == "eager" else dict(rtol=1e-2, atol=1e-2))
            torch.testing.assert_close(got.double(), want, **tol)
            calls.append((name, functools.partial(fn, x, y, b)))
        # The same kernel without torch.compile's wrappers.
        calls.append(("cute op, direct", lambda: torch.ops.cute.pointwise.default(EXPR, [x, y, b], None)))
        single = [(name, median_ms(call, repeats)) for name, call in calls]
        queued = [(name, median_ms(call, repeats, calls=10)) for name, call in calls]
        out = torch.empty_like(x)
        copy_ms = median_ms(lambda: out.copy_(x), repeats, calls=10)
        ideal = copy_ms * 1.5
        print(f"\ncopy {copy_ms:.3f} ms; the ideal for this function: {ideal:.3f} ms (3 x size at copy speed)")
        table(f"pointwise-heavy inference, {str(dtype).replace('torch.', '')}, [4096, 4096]: one call on an idle GPU "
              "(host time before the launch included)", single)
        table("the same, 10 calls queued back to back (per call: the GPU time)", queued, ideal)


def bench_training(repeats: int) -> None:
    torch.manual_seed(0)
    base = Block(1024).cuda()
    x, target = torch.randn(8192, 1024, device="cuda"), torch.randn(8192, 1024, device="cuda")
    rows = []
    for name, variant in VARIANTS:
        torch._dynamo.reset()
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss_fn = compiled(lambda x, t: pointwise_loss(model(x), t), variant)

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(x, target).backward()
            opt.step()
        rows.append((name, median_ms(step, repeats)))
    table("training step (fwd + bwd + AdamW), MLP block 8192 x 1024 -> 4096, fp32", rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.repeats}")
    bench_pointwise(args.repeats)
    bench_training(args.repeats)


if __name__ == "__main__":
    main()
