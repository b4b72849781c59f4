"""Types of a pointwise expression, decided by torch itself: the expression is evaluated on
one-element CPU probes (meta ones where a CPU kernel is missing: _evaluate_types), so
broadcasting and type promotion are exactly torch's,
including its rules for Python scalars and 0-dim tensors. The same evaluator run on real
tensors is the eager reference (`reference`).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import _disable_current_modes

from .expr import CASTS, ExpressionError, Node, parse

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
                    torch.int8, torch.uint8, torch.bool)


def _clamping(binary, clamp):
    """torch.maximum/minimum, which take tensors only; a Python number clamps instead."""
    def fn(a, b):
        if not isinstance(b, torch.Tensor):
            return clamp(a, b)
        if not isinstance(a, torch.Tensor):
            return clamp(b, a)
        return binary(a, b)
    return fn


_maximum = _clamping(torch.maximum, torch.clamp_min)
_minimum = _clamping(torch.minimum, torch.clamp_max)


# What each operation means, in torch (the definition the kernel must match).
TORCH_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "neg": lambda a: -a, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"), "silu": F.silu,
    "cosh": torch.cosh, "sinh": torch.sinh, "expm1": torch.expm1, "log1p": torch.log1p, "sign": torch.sign,
    # A constant condition (`where(abs(0.1) >= 0.5, ...)`, lerp's decomposition with a constant
    # weight) as a 0-dim tensor: it picks per element like any other and promotes nothing.
    "where": lambda c, a, b: torch.where(c if isinstance(c, torch.Tensor) else torch.tensor(bool(c)), a, b),
    "maximum": _maximum, "minimum": _minimum,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
}
# The same on Python numbers, to fold constant subexpressions.
_SCALAR_OPS = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda a: 1 / math.sqrt(a), "tanh": math.tanh,
    "erf": math.erf,
    "sigmoid": lambda a: 1 / (1 + math.exp(-a)), "relu": lambda a: max(a, 0),
    "gelu": lambda a: 0.5 * a * (1 + math.erf(a / math.sqrt(2))),
    "gelu_tanh": lambda a: 0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))),
    "silu": lambda a: a / (1 + math.exp(-a)), "where": lambda c, a, b: a if c else b,
    "cosh": math.cosh, "sinh": math.sinh, "expm1": math.expm1, "log1p": math.log1p,
    "maximum": max, "minimum": min, "abs": abs, "sign": lambda a: (a > 0) - (a < 0),
}
# torch has no integer kernels for these.
_FLOAT_ONLY = {"gelu", "gelu_tanh", "silu"}
_PY_CASTS = {"bool": bool, "int32": int, "int64": int, "int8": int, "uint8": int}


def evaluate(node: Node, env: list, record: dict | None = None):
    """`node` over `env` (tensors or numbers for x0..xN) with torch's operations; `record`
    collects each node's value."""
    if node.op == "input":
        value = env[node.value]
    elif node.op == "const":
        value = node.value
    else:
        args = [evaluate(a, env, record) for a in node.args]
        constant = not any(isinstance(a, torch.Tensor) for a in args)
        # Integer probes go through the float-only ops and negative powers as floats: _types_of
        # then rejects them with a message that says why (a CPU kernel would just fail).
        if isinstance(args[0], torch.Tensor) and not args[0].dtype.is_floating_point and (
                node.op in _FLOAT_ONLY or (node.op == "pow" and node.value < 0)):
            args[0] = args[0].float()
        if node.op == "pow":
            value = args[0] ** node.value
        elif node.op in CASTS:
            dtype = getattr(torch, CASTS[node.op])
            value = _PY_CASTS.get(node.op, float)(args[0]) if constant else args[0].to(dtype)
        elif constant and node.op in _SCALAR_OPS:
            value = _SCALAR_OPS[node.op](*args)
        else:
            value = TORCH_OPS[node.op](*args)
    if record is not None:
        record[node] = value
    return value


def dtype_name(dtype: torch.dtype) -> str:
    """'bfloat16' for torch.bfloat16 (the spelling of casts, plans and messages)."""
    return str(dtype).replace("torch.", "")


def _probe(dtype: torch.dtype, zero_dim: bool, device: str) -> torch.Tensor:
    """A one-element tensor standing for an input."""
    return torch.ones(() if zero_dim else (1,), dtype=dtype, device=device)


def _evaluate_types(tree: Node, dtypes: tuple, zero_dims: tuple) -> dict:
    """Each node's value over one-element probes of the inputs. CPU probes first: most meta
    kernels are Python, and the first one called in a process imports torch._dynamo (about 1 s:
    a process's first expression, a GEMM's first epilogue), while CPU kernels promote types as
    CUDA's do, in microseconds. Meta probes where a CPU kernel is missing for a dtype (they say
    what the CUDA kernels would); their errors are the expression's."""
    # Outside any active dispatch mode (fake tensors, opcheck's schema checks): plain tensors.
    with _disable_current_modes():
        try:
            values: dict = {}
            evaluate(tree, [_probe(d, z, "cpu") for d, z in zip(dtypes, zero_dims)], values)
            return values
        except RuntimeError:
            values = {}
            evaluate(tree, [_probe(d, z, "meta") for d, z in zip(dtypes, zero_dims)], values)
            return values


def check_dtypes(dtypes) -> None:
    for i, dtype in enumerate(dtypes):
        if dtype not in SUPPORTED_DTYPES:
            names = ", ".join(dtype_name(d) for d in SUPPORTED_DTYPES)
            raise TypeError(f"cute::pointwise: input x{i} has dtype {dtype_name(dtype)}, which is not "
                            f"supported; supported dtypes: {names}")


@functools.lru_cache(maxsize=4096)
def node_types(expr: str, dtypes: tuple, zero_dims: tuple) -> dict:
    """{node: (dtype, extra)}: each node's torch dtype, and `extra`: for comparisons the dtype
    their operands are compared in; for constant (sub)expressions (dtype None) their value."""
    check_dtypes(dtypes)
    tree = parse(expr, len(dtypes))
    try:
        values = _evaluate_types(tree, dtypes, zero_dims)
    except (RuntimeError, TypeError, ZeroDivisionError, ValueError, OverflowError) as e:
        names = ", ".join(f"x{i}: {dtype_name(d)}" for i, d in enumerate(dtypes))
        raise ExpressionError(f"cute::pointwise: '{expr}' is not defined for inputs ({names}): {e}") from None
    with _disable_current_modes():  # torch.result_type below sees the plain tensors too
        return _types_of(expr, tree, values)


def _types_of(expr: str, tree: Node, values: dict) -> dict:
    types = {}
    for node, value in values.items():
        dtype = value.dtype if isinstance(value, torch.Tensor) else None
        arg = values[node.args[0]] if node.args else None
        if node.op in _FLOAT_ONLY and isinstance(arg, torch.Tensor) and not arg.dtype.is_floating_point:
            raise ExpressionError(f"cute::pointwise: {node.op}() needs a floating-point argument, got "
                                  f"{dtype_name(arg.dtype)} in '{expr}'")
        if (node.op == "pow" and isinstance(arg, torch.Tensor) and not arg.dtype.is_floating_point
                and node.value < 0):
            raise ExpressionError(f"cute::pointwise: integers to negative powers are not allowed in '{expr}'")
        operand = value if dtype is None else None
        if node.op in ("lt", "le", "gt", "ge", "eq", "ne") and dtype is not None:
            a, b = (values[arg] for arg in node.args)
            operand = torch.result_type(a, b) if isinstance(a, torch.Tensor) else torch.result_type(b, a)
        types[node] = (dtype, operand)
    if not isinstance(values[tree], torch.Tensor):
        raise ExpressionError(f"cute::pointwise: '{expr}' does not use any input; it must depend on x0 .. xN")
    return types


def result_dtype(expr: str, dtypes: tuple, zero_dims: tuple, out_dtype: torch.dtype | None = None) -> torch.dtype:
    """The dtype of the op's result: `out_dtype` if given, else torch's result type of `expr`."""
    types = node_types(expr, tuple(dtypes), tuple(zero_dims))
    if out_dtype is not None:
        check_dtypes([out_dtype])
        return out_dtype
    return types[parse(expr, len(dtypes))][0]


def reference(expr: str, inputs: list, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """What torch eager computes for `expr` (op by op, each rounded to its dtype)."""
    value = evaluate(parse(expr, len(inputs)), list(inputs))
    return value if out_dtype is None else value.to(out_dtype)
