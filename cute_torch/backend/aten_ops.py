"""Which ATen ops the backend fuses, and how each one is spelled in the pointwise expression
language (cute_torch/pointwise/expr.py).

POINTWISE maps an OpOverload to a function of its operands that returns the expression text,
or None when this particular call is not expressible (an unsupported keyword, a non-finite
constant, ...). Operands arrive already spelled: a tensor operand is its parenthesized
subexpression, a Python number its literal (see `literal`). To fuse a new pointwise op, add an
entry here; the partitioner needs nothing else.

VIEWS are the ops that only re-index their input; inside a region they are pushed onto the
region's inputs (see fusion.py), so they never end a region on their own.
"""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..pointwise.dtypes import dtype_name
from ..pointwise.expr import CASTS

aten = torch.ops.aten
prims = torch.ops.prims


class Scalar(str):
    """A literal operand (a Python number spelled as text): some ops accept only these."""


def literal(value) -> Scalar | None:
    """A Python number as expression text; None for what the language cannot spell (inf, nan,
    complex)."""
    if isinstance(value, bool):
        return Scalar("True" if value else "False")
    if isinstance(value, int):
        return Scalar(f"({value})" if value < 0 else str(value))
    if isinstance(value, float) and math.isfinite(value):
        return Scalar(f"({value!r})" if value < 0 else repr(value))
    return None


def _infix(symbol: str):
    return lambda a, b: f"({a} {symbol} {b})"


def _call(name: str):
    return lambda *args: f"{name}({', '.join(args)})"


def _with_alpha(symbol: str, reverse: bool = False):
    # alpha arrives spelled (a Scalar), or as the default 1.
    def spell(a, b, alpha=1):
        if reverse:
            a, b = b, a
        if alpha in (1, "1"):
            return f"({a} {symbol} {b})"
        return f"({a} {symbol} {alpha} * {b})" if isinstance(alpha, Scalar) else None
    return spell


def _div(a, b, rounding_mode=None):
    return f"({a} / {b})" if rounding_mode is None else None


def _pow(a, exponent):
    return f"({a} ** {exponent})" if isinstance(exponent, Scalar) else None


def _gelu(a, approximate="none"):
    return {"none": f"gelu({a})", "tanh": f"gelu_tanh({a})"}.get(approximate)


def _clamp(a, min=None, max=None):
    if min is not None:
        a = f"maximum({a}, {min})"
    if max is not None:
        a = f"minimum({a}, {max})"
    return a


def _cast(a, dtype):
    name = dtype_name(dtype)
    return f"{name}({a})" if name in CASTS else None


def _to_copy(a, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    # Only a dtype change; a layout change is not pointwise work. A `device` (AOTAutograd spells
    # .to(dtype) with one) is the operand's: fusion takes only operands on the result's device.
    if layout not in (None, torch.strided) or pin_memory:
        return None
    return a if dtype is None else _cast(a, dtype)


def _fill(fill_value, dtype, layout=None, pin_memory=None):
    # A constant tensor (full, full_like, scalar_tensor) as a literal, rounded to its dtype
    # (fusion passes the result's: TAKES_RESULT_DTYPE); the kernel reads nothing for it. As a
    # literal it promotes like a Python number; for floating fills up to 32 bits that changes
    # nothing a kernel computes (every such value is computed in Float32, and the region's
    # outputs have torch's dtypes), so wider or integer fills stay ATen. A region of fills
    # alone has no input and stays ATen too (fusion.find_regions).
    if (layout not in (None, torch.strided) or pin_memory or not isinstance(fill_value, Scalar)
            or dtype not in (torch.float32, torch.bfloat16, torch.float16)):
        return None
    with _disable_current_modes():   # a plain tensor even where fake tensors are active
        return literal(torch.tensor(float(fill_value.strip("()")), dtype=dtype).item())


def _full_like(a, fill_value, dtype, layout=None, device=None, pin_memory=None, memory_format=None):
    return _fill(fill_value, dtype, layout, pin_memory)     # `a` gives only the shape


def _full(size, fill_value, dtype, layout=None, device=None, pin_memory=None):
    return _fill(fill_value, dtype, layout, pin_memory)


def _scalar_tensor(fill_value, dtype, layout=None, device=None, pin_memory=None):
    return _fill(fill_value, dtype, layout, pin_memory)


def _identity(a, memory_format=None):
    return a


def _both(name: str, spell) -> dict:
    """The .Tensor and .Scalar overloads of a binary op."""
    packet = getattr(aten, name)
    return {getattr(packet, o): spell for o in ("Tensor", "Scalar") if hasattr(packet, o)}


POINTWISE = {
    **_both("add", _with_alpha("+")), **_both("sub", _with_alpha("-")),
    aten.rsub.Scalar: _with_alpha("-", reverse=True), aten.rsub.Tensor: _with_alpha("-", reverse=True),
    **_both("mul", _infix("*")), aten.div.Tensor: _div, aten.div.Scalar: _div,
    **_both("gt", _infix(">")), **_both("ge", _infix(">=")), **_both("lt", _infix("<")),
    **_both("le", _infix("<=")), **_both("eq", _infix("==")), **_both("ne", _infix("!=")),
    aten.neg.default: lambda a: f"(-{a})", aten.reciprocal.default: lambda a: f"(1.0 / {a})",
    aten.pow.Tensor_Scalar: _pow,
    aten.maximum.default: _call("maximum"), aten.minimum.default: _call("minimum"),
    aten.clamp_min.default: lambda a, m: f"maximum({a}, {m})",
    aten.clamp_max.default: lambda a, m: f"minimum({a}, {m})", aten.clamp.default: _clamp,
    aten.where.self: _call("where"),
    prims.fma.default: lambda a, b, c: f"(({a} * {b}) + {c})",   # the core decomposition of addcmul
    aten.gelu.default: _gelu,
    aten.sigmoid_backward.default: lambda g, y: f"({g} * ({y} * (1 - {y})))",
    aten.tanh_backward.default: lambda g, y: f"({g} * (1 - {y} * {y}))",
    aten.threshold_backward.default: lambda g, x, t: f"where({x} <= {t}, 0, {g})",
    prims.convert_element_type.default: _cast, aten._to_copy.default: _to_copy,
    aten.clone.default: _identity, aten.alias.default: _identity, aten.full_like.default: _full_like,
    aten.full.default: _full, aten.scalar_tensor.default: _scalar_tensor,
    **{getattr(aten, f).default: _call(f) for f in ("abs", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
                                                     "relu", "silu", "cosh", "sinh", "expm1", "log1p", "sign")},
}

# Ops whose spelling takes the result's dtype as the keyword `dtype` (fusion passes it).
TAKES_RESULT_DTYPE = {aten.full_like.default, aten.full.default, aten.scalar_tensor.default}

# Ops that pass their operand through unchanged (a region of only these computes nothing).
IDENTITY = {aten.clone.default, aten.alias.default}

# Re-indexing ops that can be pushed onto a region's inputs: op(f(x, y)) == f(op(x), op(y))
# whenever x and y have the shape of f's result (fusion.py checks that).
VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
         aten.permute.default, aten.transpose.int, aten.t.default, aten.unsqueeze.default,
         aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default}
