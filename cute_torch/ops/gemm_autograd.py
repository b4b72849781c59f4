"""Autograd of cute::gemm and cute::gemm.multi for any epilogue (torch.library.register_autograd).

With out_k = e_k(acc, x0..xN) and acc = a @ b, the backward is
    dacc  = sum_k  g_k * d e_k / d acc          (one cute::pointwise kernel per output)
    da    = dacc @ b^T,   db = a^T @ dacc       (cute::gemm, transposes read in place)
    dx_i  = sum_k  g_k * d e_k / d x_i, summed down to x_i's shape (fp32, then x_i's dtype)
with the derivative expressions from cute_torch.pointwise.grad (torch's derivatives.yaml).
`acc` is recomputed by one more GEMM only when a derivative needs it (an epilogue linear in
acc, such as a bias or a residual, needs none). cute_torch.ops.linear saves the pre-activation
in its forward instead; this is the general path. A gated GEMM's epilogues read `gate` and
`up` instead of `acc`: each has its own derivative, and dacc interleaves dgate and dup the way
the accumulator columns are (kernels/gemm_common.interleave_gated).
"""

from __future__ import annotations

import torch

from ..pointwise.grad import gradient


def _setup(ctx, inputs, output) -> None:
    a, b, epilogues, xs = inputs[:4]
    ctx.epilogues = [epilogues] if isinstance(epilogues, str) else list(epilogues)
    # The dispatcher leaves out a trailing argument equal to its default (out_dtype(s)=None), and
    # torch checks the gradients' structure against the arguments it did pass (torch 2.13).
    ctx.arity = 4 if len(inputs) < 5 or inputs[4] is None else 5
    ctx.save_for_backward(a, b, *xs)


def _sum_to(grad: torch.Tensor, shape) -> torch.Tensor:
    """A broadcast input's gradient: the sum over the dims it was broadcast along."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    dims = [d for d, s in enumerate(shape) if s == 1 and grad.shape[d] != 1]
    return grad.sum(dims, keepdim=True) if dims else grad


def _wants(flag) -> bool:
    return any(flag) if isinstance(flag, (list, tuple)) else bool(flag)


def _backward(ctx, grads):
    from cute_torch.kernels.gemm_common import accumulators_as_inputs, interleave_gated, is_gated
    a, b, *xs = ctx.saved_tensors
    n = len(xs)
    gated = is_gated(ctx.epilogues)
    names = n + 2 if gated else n + 1                  # the inputs, then acc (or gate and up)
    exprs = [accumulators_as_inputs(e, n) for e in ctx.epilogues]
    live = [(e, g) for e, g in zip(exprs, grads) if g is not None]
    wants_x = _wants(ctx.needs_input_grad[3])
    d_accs = [[gradient(e, names, j) for e, _ in live] for j in range(n, names)]   # per accumulator
    uses_acc = [d for ds in d_accs for d in ds if d] + [gradient(e, names, i) or "" for e, _ in live
                                                         for i in range(n) if wants_x]
    if any(f"x{j}" in d for d in uses_acc for j in range(n, names)):
        accs = (torch.ops.cute.gemm.multi(a, b, ["gate", "up"], [], None) if gated
                else [torch.ops.cute.gemm(a, b, "acc", [], None)])
    else:
        accs = [live[0][1]] * (names - n)               # stand-ins: no derivative reads them
    env = [*xs, *accs]
    grads_of = []                                        # d(sum_k out_k) / d acc (gate, up)
    for ds in d_accs:
        total = None
        for (expr, g), d in zip(live, ds):
            if d is not None:
                term = torch.ops.cute.pointwise(d, [*env, g], torch.float32)
                total = term if total is None else total + term
        grads_of.append(total)
    dacc = grads_of[0]
    if gated and any(d is not None for d in grads_of):
        dgate, dup = (d if d is not None else torch.zeros_like(live[0][1], dtype=torch.float32) for d in grads_of)
        dacc = interleave_gated(dgate, dup)
    da = db = None
    if dacc is not None:
        dacc = dacc.to(a.dtype)
        if ctx.needs_input_grad[0]:
            da = torch.ops.cute.gemm(dacc, b.transpose(-1, -2), "acc", [], None)
            da = _sum_to(da, a.shape) if da.dim() > a.dim() else da
        if ctx.needs_input_grad[1]:
            if b.dim() == 2 and a.dim() == 3:   # one weight for the batch: the sum over it
                db = torch.ops.cute.gemm(a.reshape(-1, a.shape[-1]).t(), dacc.reshape(-1, dacc.shape[-1]), "acc",
                                         [], None)
            else:
                db = torch.ops.cute.gemm(a.transpose(-1, -2), dacc, "acc", [], None)
    dxs = []
    for i, x in enumerate(xs):
        dx = None
        if wants_x and x.is_floating_point():
            for expr, g in live:
                d = gradient(expr, names, i)
                if d is not None:
                    term = torch.ops.cute.pointwise(d, [*env, g], torch.float32)
                    dx = term if dx is None else dx + term
            dx = _sum_to(dx, x.shape).to(x.dtype) if dx is not None else None
        dxs.append(dx)
    return (da, db, None, dxs, None)[:ctx.arity]


def _backward_single(ctx, grad):
    return _backward(ctx, [grad])


def register() -> None:
    torch.library.register_autograd("cute::gemm", _backward_single, setup_context=_setup)
    torch.library.register_autograd("cute::gemm.multi", _backward, setup_context=_setup)
