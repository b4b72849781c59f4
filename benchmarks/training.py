"""Training steps on our kernels against eager and Inductor, in one run (issue 17's acceptance).

    python benchmarks/training.py [--steps 30 --batch 8 --seq 1024 --d-model 2048] [--max-autotune]

Two models in bf16 with AdamW, the same weights and data for every backend:
- the GPT-style block of examples/transformer_block.py (RMSNorm, causal SDPA, MLP with GELU(tanh));
- the MLP block of examples/mlp_block.py (Linear + GELU + Linear + residual, pointwise-heavy loss).
Backends: eager, Inductor (`torch.compile`), Inductor max-autotune (with --max-autotune: its
autotuning takes minutes), and `backend="cute"`. A step is zero_grad + forward + backward +
optimizer step, timed on the host around `loss.item()` (which waits for the GPU); the table has
the median over the steps after the first 3 (compilation), and the ratio to eager and Inductor.
The losses of every backend must stay within bf16 tolerance of eager's (printed).
Targets (issue 17): cute >= 1.10x eager and >= 1.05x Inductor on the transformer block.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import mlp_block  # noqa: E402
import transformer_block  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--max-autotune", action="store_true")
    args = parser.parse_args()
    import cute_torch.backend  # noqa: F401 - registers "cute"

    backends = [("eager", None), ("inductor", "inductor")]
    if args.max_autotune:
        backends.append(("inductor max-autotune", "inductor"))
    backends.append(("cute", "cute"))
    torch.manual_seed(0)
    tokens = args.batch * args.seq
    cases = [
        ("transformer block", transformer_block.Block(args.d_model, args.heads), transformer_block.train,
         (args.batch, args.seq, args.d_model)),
        ("MLP block", mlp_block.Block(args.d_model),
         functools.partial(transformer_block.train, loss_fn=mlp_block.pointwise_loss), (tokens, args.d_model)),
    ]
    print(f"{torch.cuda.get_device_name()}, bf16, AdamW, {args.batch} x {args.seq} tokens, d_model {args.d_model}, "
          f"median step over steps 4..{args.steps}")
    print(f"{'model':18} {'backend':22} {'step ms':>9} {'vs eager':>9} {'vs Inductor':>12} {'max loss diff':>14}")
    for name, model, train, shape in cases:
        model = model.cuda().bfloat16()
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        target = torch.randn_like(x)
        results = {}
        for label, backend in backends:
            torch._dynamo.reset()
            with torch._inductor.config.patch(max_autotune=label.endswith("max-autotune")):
                results[label] = train(copy.deepcopy(model), args.steps, x, target, backend)
        eager_losses, eager_ms = results["eager"]
        inductor_ms = results["inductor"][1]
        for label, (losses, ms) in results.items():
            diff = max(abs(a - b) / abs(a) for a, b in zip(eager_losses, losses))
            print(f"{name:18} {label:22} {ms:9.2f} {eager_ms / ms:9.2f} {inductor_ms / ms:12.2f} {diff:14.2e}",
                  flush=True)


if __name__ == "__main__":
    main()
