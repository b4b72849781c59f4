"""`torch.ops.cute.*` and thin helpers over them. Importing this module loads the extension.

    import cute_torch.ops as cops
    y = torch.ops.cute.pointwise("relu(x0 * x1 + x2) * 2", [a, b, c])
    y = cops.pointwise("relu(x0 * x1 + x2) * 2", a, b, c)
    y = cops.gelu(x)

The expression language is documented in docs/torch.md (and cute_torch/pointwise/expr.py).
"""

from __future__ import annotations

import torch

from ..pointwise.dtypes import reference
from ..pointwise.expr import ExpressionError
from . import registration
from .linear import linear
from .registration import load

load()
from .row_ops import column_sum, cross_entropy_loss, layer_norm_fn as layer_norm, log_softmax, rms_norm, softmax  # noqa: E402
_fast = registration.fast_pointwise
_op = torch.ops.cute.pointwise.default

__all__ = ["ExpressionError", "add", "column_sum", "cross_entropy_loss", "gelu", "gemm", "gemm_multi", "layer_norm",
           "linear", "load", "log_softmax", "mul", "pointwise", "pointwise_multi", "reference", "relu", "rms_norm",
           "sigmoid", "silu", "softmax", "tanh"]


def pointwise(expr: str, *inputs: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.ops.cute.pointwise(expr, list(inputs), out_dtype): one fused kernel for `expr`.

    Outside torch.compile this takes a shorter path into the same dispatcher op
    (csrc/torch/PythonEntry.cpp); under tracing, or for tensor subclasses, the generic one."""
    if not inputs:  # the dispatcher would find no device to dispatch on
        raise ValueError("cute::pointwise needs at least one input tensor")
    if not torch.compiler.is_compiling():
        out = _fast(expr, inputs, out_dtype)
        if out is not NotImplemented:
            return out
    return _op(expr, list(inputs), out_dtype)


def pointwise_multi(exprs: list, *inputs: torch.Tensor, out_dtypes: list | None = None) -> list:
    """torch.ops.cute.pointwise.multi(exprs, list(inputs), out_dtypes): several expressions over
    the same inputs in one kernel, one output tensor each (all of the broadcast shape)."""
    return registration.call(torch.ops.cute.pointwise.multi, list(exprs), list(inputs), out_dtypes)


def gemm(a: torch.Tensor, b: torch.Tensor, epilogue: str = "acc", *inputs: torch.Tensor,
         out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.ops.cute.gemm(a, b, epilogue, list(inputs), out_dtype): epilogue(a @ b) in one
    kernel (the library's Hopper GEMM, or its Ampere one before Hopper: docs/gemm.md), `epilogue`
    over `acc` and x0..xN; float8 operands (Hopper) give bfloat16 unless `out_dtype` says."""
    return registration.call(torch.ops.cute.gemm.default, a, b, epilogue, list(inputs), out_dtype)


def gemm_multi(a: torch.Tensor, b: torch.Tensor, epilogues: list, *inputs: torch.Tensor,
               out_dtypes: list | None = None) -> list:
    """torch.ops.cute.gemm.multi: one output per epilogue, all from the same accumulators."""
    return registration.call(torch.ops.cute.gemm.multi, a, b, list(epilogues), list(inputs), out_dtypes)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return pointwise("gelu(x0)" if approximate == "none" else "gelu_tanh(x0)", x)


def silu(x: torch.Tensor) -> torch.Tensor:
    return pointwise("silu(x0)", x)


def relu(x: torch.Tensor) -> torch.Tensor:
    return pointwise("relu(x0)", x)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return pointwise("sigmoid(x0)", x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    return pointwise("tanh(x0)", x)


def add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1) -> torch.Tensor:
    return pointwise("x0 + x1" if alpha == 1 else f"x0 + {float(alpha)!r} * x1", x, y)


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return pointwise("x0 * x1", x, y)
