"""torch.ops.cute.softmax / layer_norm / cross_entropy, their backward ops, and column_sum: the
Python side.

The schemas and the CUDA kernels are C++ (csrc/torch/RowOps.cpp: the hot path, a kernel cache
keyed by the operands' description, the launch on the current stream; a miss compiles through
cute_torch/ops/row_build.py), and so are their Autograd kernels (csrc/torch/RowAutograd.cpp,
through the backward ops). Here: the fake kernels, registered by `register()` when the
extension loads, and the Python entries (softmax, log_softmax, rms_norm, layer_norm_fn,
cross_entropy_loss, column_sum). The ops run on CUDA tensors over the last dimension (column_sum
over all the others); statistics (rstd, mean, lse) are Float32.
"""

from __future__ import annotations

import torch

from ..kernels.norms import MAX_NORM_N
from . import registration

# RMSNorm's eps when none is given (torch.rms_norm's: float32's machine epsilon, also for
# bfloat16 and float16 inputs, which it computes in float32).
DEFAULT_RMS_EPS = torch.finfo(torch.float32).eps


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty((0,))


# -- fake kernels (shapes and dtypes; the checks that need no data) -------------------------------------

def _softmax_fake(x, log=False):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _softmax_backward_fake(y, dy, log=False):
    if y.shape != dy.shape:
        raise ValueError("cute::softmax_backward: y and dy differ in shape")
    return torch.empty_like(dy, memory_format=torch.contiguous_format)


def _layer_norm_fake(x, weight, bias, residual, eps, rms):
    if rms and bias is not None:
        raise ValueError("cute::layer_norm: RMSNorm (rms=True) takes no bias")
    if residual is not None and residual.shape != x.shape:
        raise ValueError("cute::layer_norm: residual has another shape than x")
    n = x.shape[-1]
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is not None and tuple(t.shape) != (n,):
            raise ValueError(f"cute::layer_norm: {name} must have shape ({n},)")
    if x.numel() and not 1 <= n <= MAX_NORM_N:
        raise ValueError(f"cute::layer_norm: rows of {n} elements; the norm kernels take 1 to {MAX_NORM_N}")
    rows = x.numel() // n if n else 0
    stat = x.new_empty((rows,), dtype=torch.float32)
    res_out = _empty(x) if residual is None else torch.empty_like(residual, memory_format=torch.contiguous_format)
    return (torch.empty_like(x, memory_format=torch.contiguous_format), res_out, stat,
            _empty(stat) if rms else x.new_empty((rows,), dtype=torch.float32))


def _layer_norm_backward_fake(x, weight, dy, rstd, mean, weight_grad, bias_grad):
    if dy.shape != x.shape:
        raise ValueError("cute::layer_norm_backward: dy has another shape than x")
    n = x.shape[-1]
    dtype = weight.dtype if weight is not None else x.dtype
    dw = x.new_empty((n,), dtype=dtype) if weight_grad and weight is not None else _empty(x)
    db = x.new_empty((n,), dtype=dtype) if bias_grad else _empty(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format), dw, db


def _check_logits(logits, target, op: str) -> None:
    if logits.dim() != 2 or target.dim() != 1 or target.shape[0] != logits.shape[0]:
        raise ValueError(f"cute::{op}: cross_entropy takes logits (M, V) and targets (M,)")
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"cute::{op}: cross_entropy targets are int64 or int32, got {target.dtype}")


def _check_smoothing(label_smoothing, op: str) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cute::{op}: label_smoothing must be in [0, 1], got {label_smoothing}")


def _cross_entropy_fake(logits, target, ignore_index=-100, label_smoothing=0.0):
    _check_logits(logits, target, "cross_entropy")
    _check_smoothing(label_smoothing, "cross_entropy")
    rows = logits.new_empty((logits.shape[0],), dtype=torch.float32)
    return rows, torch.empty_like(rows)


def _cross_entropy_backward_fake(logits, target, lse, dloss, ignore_index=-100, label_smoothing=0.0):
    _check_logits(logits, target, "cross_entropy_backward")
    _check_smoothing(label_smoothing, "cross_entropy_backward")
    return torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)


def _column_sum_fake(x):
    if x.dim() == 0 or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"cute::column_sum: x must be float32, bfloat16 or float16 of at least one dimension, got "
                         f"{x.dtype} of shape {tuple(x.shape)}")
    return x.new_empty((x.shape[-1],))


def _column_sum_setup(ctx, inputs, output):
    ctx.shape = inputs[0].shape


def _column_sum_backward(ctx, grad):
    return grad.expand(ctx.shape)


def register() -> None:
    """Fakes of the C++ row ops (called once, when the extension loads); their Autograd
    kernels are C++ (csrc/torch/RowAutograd.cpp), but column_sum's (a broadcast) is here."""
    for name, fake in (("softmax", _softmax_fake), ("softmax_backward", _softmax_backward_fake),
                       ("layer_norm", _layer_norm_fake), ("layer_norm_backward", _layer_norm_backward_fake),
                       ("cross_entropy", _cross_entropy_fake),
                       ("cross_entropy_backward", _cross_entropy_backward_fake), ("column_sum", _column_sum_fake)):
        torch.library.register_fake(f"cute::{name}")(fake)
    torch.library.register_autograd("cute::column_sum", _column_sum_backward, setup_context=_column_sum_setup)


# -- Python entries ------------------------------------------------------------------------------------

def softmax(x: torch.Tensor, log: bool = False) -> torch.Tensor:
    """softmax (log_softmax with `log`) over the last dim, any row length."""
    return registration.call(torch.ops.cute.softmax.default, x, log)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    return registration.call(torch.ops.cute.softmax.default, x, True)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
             residual: torch.Tensor | None = None):
    """RMSNorm over the last dim: y, or (y, x + residual) with a residual."""
    y, res_out, _, _ = registration.call(torch.ops.cute.layer_norm.default, x, weight, None, residual, eps, True)
    return y if residual is None else (y, res_out)


def layer_norm_fn(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                  eps: float = 1e-5, residual: torch.Tensor | None = None):
    """LayerNorm over the last dim: y, or (y, x + residual) with a residual."""
    y, res_out, _, _ = registration.call(torch.ops.cute.layer_norm.default, x, weight, bias, residual, eps, False)
    return y if residual is None else (y, res_out)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                  label_smoothing: float = 0.0):
    """(loss per row, lse per row), Float32; loss is 0 where target == ignore_index."""
    return registration.call(torch.ops.cute.cross_entropy.default, logits, target, ignore_index, label_smoothing)


def cross_entropy_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                       reduction: str = "mean", label_smoothing: float = 0.0) -> torch.Tensor:
    """F.cross_entropy for (M, V) logits: reduction none, sum or mean (over rows not ignored),
    label smoothing as torch's, in the logits' dtype."""
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"reduction is 'none', 'sum' or 'mean', got {reduction!r}")
    loss, _ = registration.call(torch.ops.cute.cross_entropy.default, logits, target, ignore_index, label_smoothing)
    if reduction != "none":
        loss = loss.sum() if reduction == "sum" else loss.sum() / (target != ignore_index).sum()
    return loss.to(logits.dtype)           # F.cross_entropy's dtype (computed in float32)


def column_sum(x: torch.Tensor) -> torch.Tensor:
    """x summed over every dim but the last (a bias's gradient), in float32, returned in x's
    dtype: deterministic, and at about copy speed where torch.sum(x, 0) is not."""
    return registration.call(torch.ops.cute.column_sum.default, x)
