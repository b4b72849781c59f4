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
from .registration import load

load()

__all__ = ["ExpressionError", "add", "gelu", "load", "mul", "pointwise", "reference", "relu", "sigmoid", "silu",
           "tanh"]


def pointwise(expr: str, *inputs: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.ops.cute.pointwise(expr, list(inputs), out_dtype): one fused kernel for `expr`."""
    if not inputs:  # the dispatcher would find no device to dispatch on
        raise ValueError("cute::pointwise needs at least one input tensor")
    return torch.ops.cute.pointwise(expr, list(inputs), out_dtype)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return torch.ops.cute.pointwise("gelu(x0)" if approximate == "none" else "gelu_tanh(x0)", [x], None)


def silu(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.cute.pointwise("silu(x0)", [x], None)


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.cute.pointwise("relu(x0)", [x], None)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.cute.pointwise("sigmoid(x0)", [x], None)


def tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.cute.pointwise("tanh(x0)", [x], None)


def add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1) -> torch.Tensor:
    return torch.ops.cute.pointwise("x0 + x1" if alpha == 1 else f"x0 + {float(alpha)!r} * x1", [x, y], None)


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.ops.cute.pointwise("x0 * x1", [x, y], None)
