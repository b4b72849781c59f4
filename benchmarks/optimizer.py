"""AdamW's step over a transformer block's parameters: eager (foreach, torch's default on CUDA;
and fused=True), Inductor (`torch.compile(opt.step)`) and `backend="cute"` (the foreach ops
split per parameter, one kernel per parameter written in place: backend/foreach.py,
backend/in_place.py), with copy as the ceiling. The compiled variants take AdamW's defaults,
as a user would: its foreach path.

    python benchmarks/optimizer.py [--d-model 2048 4096] [--dtype bfloat16] [--repeats 20]

The parameters are those of examples/transformer_block.py's block (QKV, projection, fc1, fc2
with biases, two norm weights). Bytes counted: each parameter, its gradient and both moments
read, the parameter and both moments written (7 passes; the step counts left out). GPU ms: the
median CUPTI device time of every kernel and memcpy of a step (timing.kernel_ms); step ms: the
median wall time of a step with its synchronisation (timing.median_ms), which also counts the
host's launches. "of copy" divides the bandwidth by out.copy_(x)'s over the same bytes in the
same run. Every variant starts from the same parameters and gradients; after the timed steps
each one's parameters are compared with eager foreach's after as many steps (printed, not
enforced: the compiled steps round differently).
"""

from __future__ import annotations

import argparse

import torch
from timing import kernel_ms, median_ms

import cute_torch.backend  # noqa: F401 - registers "cute"


def block_shapes(d: int) -> list:
    return [(3 * d, d), (3 * d,), (d, d), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,)]


# (name, AdamW's keywords, the backend its step is compiled with or None)
VARIANTS = (("eager foreach", {"foreach": True}, None), ("eager fused", {"fused": True}, None),
            ("Inductor", {}, "inductor"), ("cute", {}, "cute"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--d-model", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"{torch.cuda.get_device_name()}; AdamW step, {args.dtype} parameters and state, GPU ms and step ms "
          f"(medians of {args.repeats}), bytes = 7 passes over every parameter")
    print("| d_model | params (M) | MB | variant | GPU ms | step ms | GB/s | of copy | max diff vs eager foreach |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for d in args.d_model:
        g = torch.Generator(device="cuda").manual_seed(d)
        start = [torch.randn(*s, device="cuda", generator=g).to(dtype) for s in block_shapes(d)]
        grads = [torch.randn(p.shape, device="cuda", generator=g).to(dtype) for p in start]
        numel = sum(p.numel() for p in start)
        nbytes = 7 * numel * start[0].element_size()
        x = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        out = torch.empty_like(x)
        copy_gbs = 2 * x.numel() / kernel_ms(lambda: out.copy_(x), args.repeats, copies=True) / 1e6
        finals = {}
        for name, keywords, backend in VARIANTS:
            torch._dynamo.reset()
            params = [torch.nn.Parameter(p.clone()) for p in start]
            for p, grad in zip(params, grads):
                p.grad = grad
            opt = torch.optim.AdamW(params, lr=1e-3, **keywords)
            step = opt.step if backend is None else torch.compile(opt.step, backend=backend)
            gpu = kernel_ms(step, args.repeats, copies=True)     # 3 warm-up steps + repeats
            wall = median_ms(step, args.repeats)                 # 3 more + repeats
            finals[name] = [p.detach().float() for p in params]
            diff = max((a - b).abs().max().item() for a, b in zip(finals[name], finals["eager foreach"]))
            gbs = nbytes / gpu / 1e6
            print(f"| {d} | {numel / 1e6:.0f} | {nbytes / 1e6:.0f} | {name} | {gpu:.3f} | {wall:.3f} | {gbs:.0f} | "
                  f"{gbs / copy_gbs:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
