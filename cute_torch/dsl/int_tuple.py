"""CuTe's integer tuples as Python sees them: nested tuples whose leaves are Python ints
(compile-time), DSL integers (run-time values) or None (CuTe's `_`, a slicing hole). Only the
structure lives here; arithmetic on run-time leaves is emitted as `cute` dialect ops
(layout_ops.py) and static arithmetic runs in the C++ library (`cute_torch._C.layout`).
"""

from __future__ import annotations

from typing import Any

from .numeric import Numeric

IntTuple = Any  # int | Numeric | None | tuple[IntTuple, ...]
DYNAMIC = "?"  # how `_C.layout` spells a run-time leaf


def is_tuple(x) -> bool:
    return isinstance(x, tuple)


def spell(x: IntTuple) -> str:
    """CuTe's notation: `(4,(2,8))`, `?` for a run-time leaf, `_` for None."""
    if is_tuple(x):
        return "(" + ",".join(spell(e) for e in x) + ")"
    if x is None:
        return "_"
    return DYNAMIC if isinstance(x, Numeric) else str(x)


def leaves(x: IntTuple) -> list:
    return [leaf for e in x for leaf in leaves(e)] if is_tuple(x) else [x]


def rebuild(template: IntTuple, values: list) -> IntTuple:
    """`template`'s structure with its leaves taken in order from `values`."""
    if is_tuple(template):
        return tuple(rebuild(e, values) for e in template)
    return values.pop(0)


def is_static(x: IntTuple) -> bool:
    return all(isinstance(leaf, int) for leaf in leaves(x))


def marked(x: IntTuple) -> IntTuple:
    """`x` with each run-time leaf replaced by DYNAMIC, as `_C.layout` takes it."""
    if is_tuple(x):
        return tuple(marked(e) for e in x)
    return DYNAMIC if isinstance(x, Numeric) else x


def static_product(x: IntTuple) -> int:
    """The product of a static tuple's leaves."""
    result = 1
    for leaf in leaves(x):
        result *= leaf
    return result


def fits(coord: IntTuple, shape: IntTuple) -> bool:
    """Whether a coordinate can index a shape the way crd2idx reads it: a tuple against a tuple
    of the same rank, mode by mode; a leaf (or a hole) against anything."""
    if not is_tuple(coord):
        return True
    return is_tuple(shape) and len(coord) == len(shape) and all(fits(c, s) for c, s in zip(coord, shape))
