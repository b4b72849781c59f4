"""torch.compile(backend="cute") on a training loop: an MLP block (Linear with bias, GELU,
Linear, residual) and a pointwise-heavy loss, 20 AdamW steps, against eager.

    python examples/mlp_block.py            # CUTE_TORCH_LOG_GRAPHS=1 shows the rewritten graphs

Without a GPU the same rewrite runs with CPU tensors admitted and each fused kernel evaluated
in torch (the kernels are still built, through ptxas), and it prints what was fused.
tests/test_backend_training.py uses Block, pointwise_loss and train; benchmarks/backend.py and training.py
use Block and pointwise_loss.
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


def pointwise_loss(y, target):
    """A smooth-L1-like term gated by a sigmoid, plus a log-cosh term."""
    diff = y - target
    gate = torch.sigmoid(target)
    smooth = torch.where(diff.abs() < 1, 0.5 * diff * diff, diff.abs() - 0.5)
    return (gate * smooth + 0.1 * torch.log(torch.cosh(diff) + 1e-6)).mean()


def train(model, steps: int, x, target, backend=None) -> list:
    """Losses of `steps` AdamW steps; compiled with `backend` unless it is None."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, target):
        return pointwise_loss(model(x), target)
    fn = step if backend is None else torch.compile(step, backend=backend)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = fn(x, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    import cute_torch
    from cute_torch.backend.reference import reference_backend

    torch.manual_seed(0)
    if cute_torch.gpu_available():
        device, backend, d = "cuda", "cute", 256
    else:
        # The same rewrite with CPU tensors admitted; the graphs run with each fused kernel
        # evaluated in torch (cute_torch/backend/reference.py), so the result is still checked.
        seen = []
        device, backend, d = "cpu", reference_backend(seen=seen), 64
        print("no GPU: the fused kernels are built (ptxas) and evaluated on CPU by the reference")
    model = Block(d).to(device)
    x, target = torch.randn(512, d, device=device), torch.randn(512, d, device=device)
    eager = train(copy.deepcopy(model), 20, x, target)
    cute = train(model, 20, x, target, backend)
    if device == "cpu":
        for kind, _, result in seen:
            for region in result["fused"]:
                print(f"{kind}: one kernel, {len(region.leaves)} inputs: {' ; '.join(region.exprs)[:110]}")
    print(f"{'step':>4} {'eager':>10} {'cute':>10}")
    for i in (0, 4, 9, 14, 19):
        print(f"{i:4d} {eager[i]:10.6f} {cute[i]:10.6f}")
    worst = max(abs(a - b) / abs(a) for a, b in zip(eager, cute))
    print(f"largest relative difference over 20 steps: {worst:.2e}")
    assert worst < 1e-4


if __name__ == "__main__":
    main()
