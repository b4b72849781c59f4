"""A differentiable linear with a fused activation on cute::gemm (issue 17's autograd).

Forward: one GEMM whose epilogue adds the bias and applies the activation; when a gradient is
needed and there is an activation, the same GEMM also writes the pre-activation (gemm.multi)
for backward. Backward: the activation's derivative times the incoming gradient in one
cute::pointwise kernel (the formula from cute_torch.pointwise.grad, as torch's
derivatives.yaml), then dX = g @ W and dW = g^T @ X as two more cute::gemm calls (g^T is read
MN-major in place), and dbias = the column sums of g in fp32.
"""

from __future__ import annotations

import torch

from ..pointwise.grad import gradient

# Each activation as an epilogue over the pre-activation ("acc + x0", or "acc" without bias).
ACTIVATIONS = {None: "{}", "relu": "relu({})", "gelu": "gelu({})", "gelu_tanh": "gelu_tanh({})",
               "silu": "silu({})", "sigmoid": "sigmoid({})"}


def check_activation(activation) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"linear: activation is one of {sorted(a for a in ACTIVATIONS if a)} or None, got "
                         f"{activation!r}")


def _derivative(activation: str) -> str:
    """g * activation'(pre), over x0 = pre and x1 = g."""
    return gradient(ACTIVATIONS[activation].format("x0"), 1, 0)


class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        check_activation(activation)
        rows = x.reshape(-1, x.shape[-1])
        pre_expr = "acc + x0" if bias is not None else "acc"
        inputs = [bias] if bias is not None else []
        expr = ACTIVATIONS[activation].format(pre_expr)
        pre = None
        if activation is not None and any(ctx.needs_input_grad[:3]):
            pre, y = torch.ops.cute.gemm.multi(rows, weight.t(), [pre_expr, expr], inputs, None)
        else:
            y = torch.ops.cute.gemm(rows, weight.t(), expr, inputs, None)
        ctx.save_for_backward(rows if ctx.needs_input_grad[1] else None, weight, pre)   # X only for dW
        ctx.activation, ctx.x_shape = activation, x.shape
        ctx.bias_dtype = bias.dtype if bias is not None else None
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        rows, weight, pre = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        if ctx.activation is not None:
            g = torch.ops.cute.pointwise(_derivative(ctx.activation), [pre, g], g.dtype)
        dx = dw = dbias = None
        if ctx.needs_input_grad[0]:
            dx = torch.ops.cute.gemm(g, weight, "acc", [], None).view(ctx.x_shape)
        if ctx.needs_input_grad[1]:
            dw = torch.ops.cute.gemm(g.t(), rows, "acc", [], None)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            dbias = g.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
        return dx, dw, dbias, None


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           activation: str | None = None) -> torch.Tensor:
    """activation(F.linear(x, weight, bias)) in one GEMM, differentiable; `weight` (out, in)
    like F.linear's, x and weight both bfloat16 or both float16 on a GPU from sm_80 on."""
    check_activation(activation)
    return LinearFunction.apply(x, weight, bias, activation)
