"""Symbolic derivatives of pointwise expressions: the backward of `cute::pointwise` is
another `cute::pointwise`, over the forward inputs and the incoming gradient.

`gradient(expr, n, i)` is `g * d(expr)/d(x_i)` with `g` spelled `x{n}`; the formulas follow
torch's derivatives.yaml (relu passes the gradient where the input is > 0, maximum splits ties,
abs has derivative 0 at 0), so results agree with torch autograd.
"""

from __future__ import annotations

import functools
import math

from .expr import CASTS, Node, parse

_FLOAT_CASTS = {"float32", "float16", "bfloat16", "float64"}
_NON_DIFFERENTIABLE = {"lt", "le", "gt", "ge", "eq", "ne", "sign"}


def _c(value) -> Node:
    return Node("const", value=value)


def _call(op: str, *args: Node) -> Node:
    return Node(op, args)


def _mul(a: Node | None, b: Node | None) -> Node | None:
    if a is None or b is None:
        return None
    if a.op == "const" and a.value == 1:
        return b
    if b.op == "const" and b.value == 1:
        return a
    return _call("mul", a, b)


def _add(a: Node | None, b: Node | None) -> Node | None:
    if a is None:
        return b
    if b is None:
        return a
    return _call("add", a, b)


def _neg(a: Node | None) -> Node | None:
    return None if a is None else _call("neg", a)


def _zero_if_none(a: Node | None) -> Node:
    return _c(0.0) if a is None else a


def _local(op: str, x: Node, node: Node) -> Node:
    """d(op(x))/dx for unary ops, as an expression (`node` is op(x) itself)."""
    if op == "exp":
        return node
    if op == "log":
        return _call("div", _c(1.0), x)
    if op == "sqrt":
        return _call("div", _c(0.5), node)
    if op == "rsqrt":
        return _call("mul", _c(-0.5), _call("div", node, x))
    if op == "erf":
        return _call("mul", _c(2 / math.sqrt(math.pi)), _call("exp", _call("neg", _call("mul", x, x))))
    if op == "tanh":
        return _call("sub", _c(1.0), _call("mul", node, node))
    if op in ("cosh", "sinh"):
        return _call("sinh" if op == "cosh" else "cosh", x)
    if op == "expm1":
        return _call("add", node, _c(1.0))
    if op == "log1p":
        return _call("div", _c(1.0), _call("add", _c(1.0), x))
    if op == "sigmoid":
        return _call("mul", node, _call("sub", _c(1.0), node))
    if op == "abs":
        return _call("where", _call("gt", x, _c(0)), _c(1.0), _call("where", _call("lt", x, _c(0)), _c(-1.0), _c(0.0)))
    if op == "relu":
        return _call("where", _call("gt", x, _c(0)), _c(1.0), _c(0.0))
    if op == "gelu":  # Phi(x) + x * phi(x)
        cdf = _call("mul", _c(0.5), _call("add", _c(1.0), _call("erf", _call("mul", x, _c(math.sqrt(0.5))))))
        pdf = _call("mul", _c(1 / math.sqrt(2 * math.pi)), _call("exp", _call("mul", _c(-0.5), _call("mul", x, x))))
        return _call("add", cdf, _call("mul", x, pdf))
    if op == "gelu_tanh":  # with s = sigmoid(2u) = (1 + tanh(u)) / 2: s + 2 x s (1 - s) u'
        k = math.sqrt(2 / math.pi)
        inner = _call("mul", _c(2 * k), _call("add", x, _call("mul", _c(0.044715), Node("pow", (x,), 3))))
        s = _call("sigmoid", inner)
        dinner = _call("mul", _c(k), _call("add", _c(1.0), _call("mul", _c(3 * 0.044715), _call("mul", x, x))))
        return _call("add", s, _call("mul", _call("mul", _c(2.0), _call("mul", x, _call("mul", s, _call(
            "sub", _c(1.0), s)))), dinner))
    if op == "silu":
        s = _call("sigmoid", x)
        return _call("mul", s, _call("add", _c(1.0), _call("mul", x, _call("sub", _c(1.0), s))))
    raise AssertionError(op)


def derivative(node: Node, i: int) -> Node | None:
    """d(node)/d(x_i) as an expression, None where it is zero."""
    op = node.op
    if op == "input":
        return _c(1.0) if node.value == i else None
    if op == "const" or op in _NON_DIFFERENTIABLE:
        return None
    if op in CASTS:
        return derivative(node.args[0], i) if op in _FLOAT_CASTS else None
    if op == "where":
        da, db = derivative(node.args[1], i), derivative(node.args[2], i)
        if da is None and db is None:
            return None
        return _call("where", node.args[0], _zero_if_none(da), _zero_if_none(db))
    if op == "add":
        return _add(derivative(node.args[0], i), derivative(node.args[1], i))
    if op == "sub":
        return _add(derivative(node.args[0], i), _neg(derivative(node.args[1], i)))
    if op == "mul":
        a, b = node.args
        return _add(_mul(derivative(a, i), b), _mul(a, derivative(b, i)))
    if op == "div":
        a, b = node.args
        da, db = derivative(a, i), derivative(b, i)
        first = None if da is None else _call("div", da, b)
        second = None if db is None else _call("div", _mul(a, db), _call("mul", b, b))
        return _add(first, _neg(second))
    if op == "neg":
        return _neg(derivative(node.args[0], i))
    if op in ("maximum", "minimum"):
        a, b = node.args
        da, db = derivative(a, i), derivative(b, i)
        if da is None and db is None:
            return None
        wins = "gt" if op == "maximum" else "lt"
        tie = _call("mul", _c(0.5), _add(_zero_if_none(da), _zero_if_none(db)))
        return _call("where", _call(wins, a, b), _zero_if_none(da),
                     _call("where", _call("eq", a, b), tie, _zero_if_none(db)))
    if op == "pow":
        x = node.args[0]
        return _mul(_call("mul", _c(float(node.value)), Node("pow", (x,), node.value - 1)), derivative(x, i))
    x = node.args[0]
    dx = derivative(x, i)
    return None if dx is None else _mul(_local(op, x, node), dx)


@functools.lru_cache(maxsize=1024)
def gradient(expr: str, num_inputs: int, index: int) -> str | None:
    """The expression of the gradient of input `index`, with the incoming gradient as input
    `num_inputs`; None if the gradient is zero."""
    d = derivative(parse(expr, num_inputs), index)
    if d is None:
        return None
    return str(_mul(Node("input", value=num_inputs), d))
