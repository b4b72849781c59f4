"""torch.ops.cute.softmax / log_softmax / rms_norm / layer_norm / cross_entropy and their backward
ops, over the row kernels of kernels/softmax.py, kernels/norms.py and kernels/cross_entropy.py.

Each is a torch.library custom op (schema, fake kernel, autograd formula through the backward
op), so it works under torch.compile, opcheck and CUDA graphs. They run on CUDA tensors over
the last dimension; statistics (rstd, mean, lse) are Float32. These ops launch from Python
(the DSL's dispatch, about 20-40 us of host time a call); a C++ fast path like cute::gemm's is
not written yet.
"""

from __future__ import annotations

import torch
from torch.library import custom_op

from ..kernels import cross_entropy as _ce
from ..kernels import norms as _norms
from ..kernels import softmax as _softmax
from ..kernels.row_reduce import MAX_N


# RMSNorm's eps when none is given (torch.rms_norm's: float32's machine epsilon, also for
# bfloat16 and float16 inputs, which it computes in float32).
DEFAULT_RMS_EPS = torch.finfo(torch.float32).eps


def _cuda(op: str, *tensors) -> None:
    for t in tensors:
        if t is not None and not t.is_cuda:
            raise RuntimeError(f"cute::{op} runs on CUDA tensors; got one on {t.device}")


def _row_length(op: str, x: torch.Tensor) -> None:
    n = x.shape[-1] if x.dim() else 1
    if x.numel() and not 1 <= n <= MAX_N:
        raise ValueError(f"cute::{op}: rows of {n} elements; the norm kernels take 1 to {MAX_N} (longer rows "
                         "need the cluster path, not written yet)")


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty((0,))


# -- softmax -------------------------------------------------------------------------------------------

@custom_op("cute::softmax", mutates_args=())
def softmax(x: torch.Tensor, log: bool = False) -> torch.Tensor:
    """softmax (log_softmax with `log`) over the last dim."""
    _cuda("softmax", x)
    return _softmax.softmax(x, log=log)


@softmax.register_fake
def _(x, log=False):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@custom_op("cute::softmax_backward", mutates_args=())
def softmax_backward(y: torch.Tensor, dy: torch.Tensor, log: bool = False) -> torch.Tensor:
    _cuda("softmax_backward", y, dy)
    return _softmax.softmax_backward(y, dy, log=log)


@softmax_backward.register_fake
def _(y, dy, log=False):
    return torch.empty_like(dy, memory_format=torch.contiguous_format)


def _softmax_setup(ctx, inputs, output):
    ctx.log = inputs[1] if len(inputs) > 1 else False
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return softmax_backward(y, dy, ctx.log), None


softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    return softmax(x, True)


# -- RMSNorm and LayerNorm ---------------------------------------------------------------------------

@custom_op("cute::layer_norm", mutates_args=())
def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
               residual: torch.Tensor | None, eps: float, rms: bool) -> tuple[torch.Tensor, torch.Tensor,
                                                                                torch.Tensor, torch.Tensor]:
    """(y, residual_out, rstd, mean) of LayerNorm, or RMSNorm with `rms` (bias must be None),
    of x (+ residual). residual_out (x + residual, in the residual's dtype) and mean are empty
    when absent."""
    _cuda("layer_norm", x, weight, bias, residual)
    _row_length("layer_norm", x)
    if rms and bias is not None:
        raise ValueError("cute::layer_norm: RMSNorm (rms=True) takes no bias")
    y, res_out, rstd, mean = _norms.norm_forward(x, weight, bias, residual, eps=eps, rms=rms)
    return y, _empty(x) if res_out is None else res_out, rstd, _empty(rstd) if mean is None else mean


@layer_norm.register_fake
def _(x, weight, bias, residual, eps, rms):
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual has shape {tuple(residual.shape)} where x has {tuple(x.shape)}")
    rows = x.numel() // x.shape[-1] if x.dim() else 1
    stat = x.new_empty((rows,), dtype=torch.float32)
    res_out = _empty(x) if residual is None else torch.empty_like(residual, memory_format=torch.contiguous_format)
    return (torch.empty_like(x, memory_format=torch.contiguous_format), res_out, stat,
            _empty(stat) if rms else x.new_empty((rows,), dtype=torch.float32))


@custom_op("cute::layer_norm_backward", mutates_args=())
def layer_norm_backward(x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, rstd: torch.Tensor,
                        mean: torch.Tensor, weight_grad: bool, bias_grad: bool) -> tuple[torch.Tensor, torch.Tensor,
                                                                                         torch.Tensor]:
    """(dx, dweight, dbias) from the normalized x (after the residual add), the weight and the
    saved statistics (an empty `mean`: RMSNorm); gradients not asked for are empty."""
    _cuda("layer_norm_backward", x, weight, dy, rstd)
    dx, dw, db = _norms.norm_backward(x, weight, dy, rstd, mean if mean.numel() else None,
                                      weight_grad=weight_grad, bias_grad=bias_grad)
    return dx, _empty(x) if dw is None else dw, _empty(x) if db is None else db


@layer_norm_backward.register_fake
def _(x, weight, dy, rstd, mean, weight_grad, bias_grad):
    n = x.shape[-1]
    dw = x.new_empty((n,), dtype=weight.dtype) if weight_grad and weight is not None else _empty(x)
    db = x.new_empty((n,), dtype=weight.dtype if weight is not None else x.dtype) if bias_grad else _empty(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format), dw, db


def _norm_setup(ctx, inputs, output):
    x, weight, bias, residual, _, _ = inputs
    _, res_out, rstd, mean = output
    ctx.has = (weight is not None, bias is not None, residual is not None)
    ctx.dtypes = (x.dtype, None if residual is None else residual.dtype)
    # The backward normalizes what the forward normalized: x, or the sum x + residual.
    ctx.save_for_backward(res_out if residual is not None else x, weight, rstd, mean)


def _norm_grad(ctx, dy, d_res_out, _drstd, _dmean):
    """x and the residual both feed the sum s = x + residual: each gets dL/ds, the norm's
    gradient plus the gradient of residual_out (the residual stream going on)."""
    s, weight, rstd, mean = ctx.saved_tensors
    has_w, has_b, has_res = ctx.has
    ds, dw, db = layer_norm_backward(s, weight, dy, rstd, mean, has_w and ctx.needs_input_grad[1],
                                     has_b and ctx.needs_input_grad[2])
    if has_res and d_res_out is not None:
        ds = ds + d_res_out
    x_dtype, res_dtype = ctx.dtypes
    return (ds.to(x_dtype), dw if dw.numel() else None, db if db.numel() else None,
            ds.to(res_dtype) if has_res else None, None, None)


layer_norm.register_autograd(_norm_grad, setup_context=_norm_setup)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
             residual: torch.Tensor | None = None):
    """RMSNorm over the last dim: y, or (y, x + residual) with a residual."""
    y, res_out, _, _ = layer_norm(x, weight, None, residual, eps, True)
    return y if residual is None else (y, res_out)


def layer_norm_fn(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                  eps: float = 1e-5, residual: torch.Tensor | None = None):
    """LayerNorm over the last dim: y, or (y, x + residual) with a residual."""
    y, res_out, _, _ = layer_norm(x, weight, bias, residual, eps, False)
    return y if residual is None else (y, res_out)


# -- cross-entropy --------------------------------------------------------------------------------------

@custom_op("cute::cross_entropy", mutates_args=())
def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> tuple[torch.Tensor,
                                                                                                 torch.Tensor]:
    """(loss per row, lse per row), Float32; loss is 0 where target == ignore_index."""
    _cuda("cross_entropy", logits, target)
    return _ce.cross_entropy_forward(logits, target, ignore_index)


@cross_entropy.register_fake
def _(logits, target, ignore_index=-100):
    rows = logits.new_empty((logits.shape[0],), dtype=torch.float32)
    return rows, torch.empty_like(rows)


@custom_op("cute::cross_entropy_backward", mutates_args=())
def cross_entropy_backward(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, dloss: torch.Tensor,
                           ignore_index: int = -100) -> torch.Tensor:
    _cuda("cross_entropy_backward", logits, target, lse, dloss)
    return _ce.cross_entropy_backward(logits, target, lse, dloss, ignore_index)


@cross_entropy_backward.register_fake
def _(logits, target, lse, dloss, ignore_index=-100):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


def _ce_setup(ctx, inputs, output):
    logits, target = inputs[0], inputs[1]
    ctx.ignore_index = inputs[2] if len(inputs) > 2 else -100
    ctx.save_for_backward(logits, target, output[1])


def _ce_grad(ctx, dloss, _dlse):
    logits, target, lse = ctx.saved_tensors
    return cross_entropy_backward(logits, target, lse, dloss, ctx.ignore_index), None, None


cross_entropy.register_autograd(_ce_grad, setup_context=_ce_setup)


def cross_entropy_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                       reduction: str = "mean") -> torch.Tensor:
    """F.cross_entropy for (M, V) logits: reduction none, sum or mean (over rows not ignored), in
    the logits' dtype."""
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"reduction is 'none', 'sum' or 'mean', got {reduction!r}")
    loss, _ = cross_entropy(logits, target, ignore_index)
    if reduction != "none":
        loss = loss.sum() if reduction == "sum" else loss.sum() / (target != ignore_index).sum()
    return loss.to(logits.dtype)           # F.cross_entropy's dtype (computed in float32)
