"""The expression language of `cute::pointwise`: parsing, validation and printing.

An expression is a Python-syntax formula over the inputs `x0 .. xN`:

    relu(x0 * x1 + x2) * 2          where(x0 > 0, x0, 0.01 * x0)          bfloat16(gelu(x0))

- literals: ints, floats, `True`/`False`;
- operators: `+ - * /`, unary `-`, `**` with a constant exponent, `< <= > >= == !=`;
- functions: see FUNCTIONS (activations, math, `where`, `maximum`/`minimum`) and CASTS.

Parsing uses Python's own parser (`ast`), so positions in errors are exact. The tree is a
small immutable structure (Node) that the typing, kernel and derivative modules walk.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

# name -> number of arguments
FUNCTIONS = {
    "neg": 1, "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sigmoid": 1, "relu": 1,
    "gelu": 1, "gelu_tanh": 1, "silu": 1, "cosh": 1, "sinh": 1, "expm1": 1, "log1p": 1, "sign": 1, "where": 3,
    "maximum": 2, "minimum": 2,
}
# cast name -> torch dtype name
CASTS = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}
_COMPARE = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
# How Node.__str__ spells operators, and their precedence (higher binds tighter).
_INFIX = {"add": ("+", 1), "sub": ("-", 1), "mul": ("*", 2), "div": ("/", 2), "lt": ("<", 0), "le": ("<=", 0),
          "gt": (">", 0), "ge": (">=", 0), "eq": ("==", 0), "ne": ("!=", 0)}


class ExpressionError(ValueError):
    """A malformed expression; the message shows where."""


@dataclass(frozen=True)
class Node:
    """op is "input" (value: index), "const" (value: number), "pow" (value: exponent), a cast
    name, or an operator/function name; args are child nodes."""
    op: str
    args: tuple = ()
    value: object = None

    def __str__(self) -> str:
        return _spell(self, 0)


def _spell(node: Node, parent_precedence: int) -> str:
    if node.op == "input":
        return f"x{node.value}"
    if node.op == "const":
        text = repr(node.value)
        return f"({text})" if text.startswith("-") else text
    if node.op == "pow":
        return f"{_spell(node.args[0], 4)} ** {node.value!r}"
    if node.op == "neg":
        return f"-{_spell(node.args[0], 3)}"
    if node.op in _INFIX:
        symbol, precedence = _INFIX[node.op]
        # Left-associative: the right operand needs parentheses at equal precedence.
        text = f"{_spell(node.args[0], precedence)} {symbol} {_spell(node.args[1], precedence + 1)}"
        return f"({text})" if precedence < parent_precedence else text
    return f"{node.op}({', '.join(_spell(a, 0) for a in node.args)})"


def inputs(node: Node) -> int:
    """1 + the highest input index used (0 without inputs)."""
    if node.op == "input":
        return node.value + 1
    return max((inputs(a) for a in node.args), default=0)


def _error(expr: str, node, message: str) -> ExpressionError:
    col = getattr(node, "col_offset", 0) if node is not None else 0
    return ExpressionError(f"{message} at position {col}:\n  {expr}\n  {' ' * col}^")


@functools.lru_cache(maxsize=1024)
def parse(expr: str, num_inputs: int | None = None) -> Node:
    """The tree of `expr`; ExpressionError (with the position) if it is not in the language or
    names an input beyond `num_inputs`."""
    if not isinstance(expr, str) or not expr.strip():
        raise ExpressionError("the expression is empty")
    if "\n" in expr:
        raise ExpressionError(f"the expression must be one line, got {expr!r}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        col = max((e.offset or 1) - 1, 0)
        raise ExpressionError(f"invalid syntax ({e.msg}) at position {col}:\n  {expr.strip()}\n  {' ' * col}^") \
            from None
    return _convert(tree.body, expr.strip(), num_inputs)


def _convert(node: ast.AST, expr: str, num_inputs: int | None) -> Node:
    def walk(n: ast.AST) -> Node:
        if isinstance(n, ast.Constant) and type(n.value) in (bool, int, float):
            return Node("const", value=n.value)
        if isinstance(n, ast.Name):
            name = n.id
            if name[:1] == "x" and name[1:].isdigit():
                index = int(name[1:])
                if num_inputs is not None and index >= num_inputs:
                    raise _error(expr, n, f"'{name}' names input {index}, but there are {num_inputs} inputs")
                return Node("input", value=index)
            raise _error(expr, n, f"unknown name '{name}' (inputs are x0 .. xN)")
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            operand = walk(n.operand)
            if isinstance(n.op, ast.UAdd):
                return operand
            if operand.op == "const":
                return Node("const", value=-operand.value)
            return Node("neg", (operand,))
        if isinstance(n, ast.BinOp) and type(n.op) in _BINARY:
            return Node(_BINARY[type(n.op)], (walk(n.left), walk(n.right)))
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow):
            exponent = walk(n.right)
            if exponent.op != "const" or isinstance(exponent.value, bool):
                raise _error(expr, n.right, "the exponent of ** must be a number")
            return Node("pow", (walk(n.left),), exponent.value)
        if isinstance(n, ast.Compare):
            if len(n.ops) != 1:
                raise _error(expr, n, "chained comparisons are not supported; combine two with where()")
            if type(n.ops[0]) not in _COMPARE:
                raise _error(expr, n, f"unsupported comparison '{type(n.ops[0]).__name__}'")
            return Node(_COMPARE[type(n.ops[0])], (walk(n.left), walk(n.comparators[0])))
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name):
                raise _error(expr, n, "only calls of named functions are supported, e.g. relu(x0)")
            name = n.func.id
            if n.keywords:
                raise _error(expr, n.keywords[0], f"{name}() takes no keyword arguments")
            if name in CASTS:
                arity = 1
            elif name in FUNCTIONS:
                arity = FUNCTIONS[name]
            else:
                raise _error(expr, n, f"unknown function '{name}'; known: "
                             f"{', '.join(sorted(FUNCTIONS) + sorted(CASTS))}")
            if len(n.args) != arity:
                raise _error(expr, n, f"{name}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(n.args)}")
            return Node(name, tuple(walk(a) for a in n.args))
        raise _error(expr, n, f"'{type(n).__name__}' is not part of the expression language")

    return walk(node)
