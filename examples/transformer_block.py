"""A GPT-style transformer block trained in bf16 with AdamW: eager, Inductor and
torch.compile(backend="cute"), the same data and initial weights, losses and step times side by side.

    python examples/transformer_block.py [--steps 200 --batch 8 --seq 1024 --d-model 2048] [--mlp swiglu]
        [--compile-optimizer]     # AdamW's step compiled with each backend too
    torchrun --nproc-per-node 2 examples/transformer_block.py      # DDP, one process per GPU

The block: RMSNorm (torch's nn.RMSNorm), causal self-attention through
F.scaled_dot_product_attention, a residual, RMSNorm, an MLP (Linear with bias, GELU(tanh),
Linear; or with --mlp swiglu, LLaMA's: silu(x W_gate) * (x W_up) then W_down, no biases, a
hidden width of 8/3 d rounded up to 64) and a residual; the loss is the MSE to a fixed random
target. With backend="cute" the
forward's linear + bias + GELU is one cute::gemm that also writes the pre-activation for
backward, each RMSNorm is the row kernel forward and backward (cute::layer_norm, with its
weight gradient), and the pointwise work around the residuals and the loss is fused into
cute::pointwise kernels; bias gradients are cute::column_sum. Attention stays ATen (flash
attention); plain matmuls (the backward's included) run as cute::gemm where
backend/gemm_routes.json measured it faster on this card, else cuBLAS.

Without a GPU it trains a small block on CPU in float32 with the backend's graph rewrite
checked by the reference evaluator (cute_torch/backend/reference.py), so the script still shows
what is fused and that the losses agree. The losses must agree with eager's within bf16
tolerance; the script exits non-zero otherwise.

Under torchrun (WORLD_SIZE set) the model is wrapped in DistributedDataParallel (NCCL on GPUs,
gloo on CPU); every rank trains on its own shard of the batch, rank 0 prints.
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int, mlp: str = "gelu"):
        super().__init__()
        if mlp not in ("gelu", "swiglu"):
            raise ValueError(f"Block: mlp is 'gelu' or 'swiglu', got {mlp!r}")
        self.heads, self.swiglu = heads, mlp == "swiglu"
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        if self.swiglu:
            hidden = -(-8 * d // 3 // 64) * 64
            self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
            self.down = nn.Linear(hidden, d, bias=False)
        else:
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def mlp(self, h):
        if self.swiglu:
            return self.down(F.silu(self.gate(h)) * self.up(h))
        return self.fc2(F.gelu(self.fc1(h), approximate="tanh"))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def train(model, steps: int, x, target, compile_backend=None, loss_fn=F.mse_loss,
          compile_optimizer: bool = False, compile_mode=None) -> tuple[list, float]:
    """(losses, median step time in ms after the first 3 steps) of `steps` AdamW steps on
    loss_fn(model(x), target) in fp32, compiled with `compile_backend` and `compile_mode` unless
    the backend is None; with `compile_optimizer` AdamW's step is compiled with the same backend;
    under torch.distributed the model is wrapped in DistributedDataParallel first."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if torch.distributed.is_initialized():
        device_ids = [x.device.index] if x.is_cuda else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    def step(x, target):
        return loss_fn(model(x).float(), target.float())
    fn = step if compile_backend is None else torch.compile(step, backend=compile_backend, mode=compile_mode)
    opt_step = torch.compile(opt.step, backend=compile_backend) if compile_backend and compile_optimizer else opt.step
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = fn(x, target)
        loss.backward()
        opt_step()
        losses.append(loss.item())   # synchronizes: the step's time is complete
        times.append((time.perf_counter() - start) * 1e3)
    later = sorted(times[3:]) or times
    return losses, later[len(later) // 2]


def main() -> None:
    import cute_torch
    from cute_torch.backend.reference import reference_backend

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu")
    parser.add_argument("--compile-optimizer", action="store_true", help="compile AdamW's step with each backend too")
    args = parser.parse_args()
    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0))
    if distributed:
        torch.distributed.init_process_group("nccl" if cute_torch.gpu_available() else "gloo")
        if cute_torch.gpu_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.manual_seed(0)
    if cute_torch.gpu_available():
        device, dtype = "cuda", torch.bfloat16
        backends = [("eager", None), ("inductor", "inductor"), ("cute", "cute")]
        tolerance = 5e-2                      # bf16: losses agree to a few percent over the run
    else:
        args.steps, args.batch, args.seq, args.d_model, args.heads = 10, 2, 32, 64, 4
        device, dtype = "cpu", torch.float32
        seen: list = []
        backends = [("eager", None), ("cute (reference)", reference_backend(seen=seen))]
        tolerance = 1e-4
        print("no GPU: a small block on CPU; the cute graphs run through the reference evaluator")
    model = Block(args.d_model, args.heads, args.mlp).to(device, dtype)   # the same weights on every rank (seed 0)
    generator = torch.Generator().manual_seed(1 + rank)          # each rank its own shard of data
    x = torch.randn(args.batch, args.seq, args.d_model, generator=generator).to(device, dtype)
    target = torch.randn(x.shape, generator=generator).to(device, dtype)
    results = {}
    for name, backend in backends:
        torch._dynamo.reset()
        results[name] = train(copy.deepcopy(model), args.steps, x, target, backend,
                              compile_optimizer=args.compile_optimizer)
    eager = results["eager"][0]
    if distributed:
        torch.distributed.destroy_process_group()
    if rank != 0:
        return
    print(f"{'backend':18} {'step ms':>9} {'vs eager':>9} {'first loss':>11} {'last loss':>10} {'max rel diff':>13}")
    worst = 0.0
    for name, (losses, ms) in results.items():
        diff = max(abs(a - b) / abs(a) for a, b in zip(eager, losses))
        worst = max(worst, diff)
        print(f"{name:18} {ms:9.2f} {results['eager'][1] / ms:9.2f} {losses[0]:11.5f} {losses[-1]:10.5f} {diff:13.2e}")
    if device == "cpu":
        for kind, gm, result in seen:
            rows = sum(str(n.target).startswith(("cute.layer_norm", "cute.softmax", "cute.cross_entropy"))
                       for n in gm.graph.nodes)
            print(f"{kind}: {len(result['fused'])} pointwise kernels, {rows} row kernels (norms), matmuls with an "
                  f"epilogue: {result.get('gemms') or 'none (fp32 on CPU)'}")
    if worst > tolerance:
        raise SystemExit(f"losses differ from eager's by {worst:.2e} (more than {tolerance:.0e})")


if __name__ == "__main__":
    main()
