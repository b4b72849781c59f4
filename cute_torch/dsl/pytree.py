"""DSL values inside Python structures: flattening tuples, lists, NamedTuples, dataclasses and
layouts into their run-time leaves and a static description (the tree), and rebuilding them.

What a pipelined kernel passes around is structures: a pipeline state (index, phase, count), a
tile scheduler's work tile, a NamedTuple of tensors. A kernel launch flattens them into kernel
parameters (the tree goes into the specialization key) and a dynamic loop or `if` carries their
leaves as iter_args/results, rebuilding the structure inside and after the region.

A tree is hashable and compares equal when the structure and every static part are equal;
static parts are compared by value when hashable (by identity otherwise).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, NamedTuple

from .int_tuple import leaves as layout_leaves, rebuild
from .layout import Layout


class Tree(NamedTuple):
    kind: str  # "leaf", "static", "tuple", "dataclass", "layout"
    node: Any  # the static value's key, the container type, the dataclass type, the layout structure
    children: tuple = ()
    value: Any = None  # a static value itself (not compared: `node` holds its key)

    def __eq__(self, other) -> bool:
        return isinstance(other, Tree) and (self.kind, self.node, self.children) == (
            other.kind, other.node, other.children)

    def __ne__(self, other) -> bool:  # tuple's own __ne__ would compare `value` too
        return not self == other

    def __hash__(self) -> int:
        return hash((self.kind, self.node, self.children))


def static_key(value):
    """How a compile-time value enters a key: its type and value, containers element by element
    (so 1, 1.0 and True, or 0.0 and -0.0, never share a kernel, even inside a tuple); an
    unhashable value by identity, holding a reference so that its address cannot come back as
    another object's while the key lives."""
    kind = type(value)
    if kind is float:
        return (kind, value.hex())                 # -0.0 and 0.0 apart, every NaN alike
    if isinstance(value, (tuple, list)):           # NamedTuples too
        return (kind, tuple(static_key(v) for v in value))
    if isinstance(value, dict):
        return (kind, tuple((static_key(k), static_key(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (kind, tuple(static_key(getattr(value, f.name)) for f in dataclasses.fields(value)))
    try:
        hash(value)
        return (kind, value)
    except TypeError:
        return (kind, _Identity(value))


class _Identity:
    """An unhashable compile-time value in a key: equal only to itself, kept alive by the key."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Identity) and other.value is self.value


def flatten(value, is_leaf: Callable[[Any], bool]) -> tuple[list, Tree]:
    """(leaves in order, tree). `is_leaf` says what is a run-time leaf (e.g. a DSL scalar)."""
    leaves: list = []
    return leaves, _flatten(value, is_leaf, leaves)


def _flatten(value, is_leaf, leaves: list) -> Tree:
    if is_leaf(value):
        leaves.append(value)
        return Tree("leaf", type(value))
    if isinstance(value, (tuple, list)):
        children = tuple(_flatten(v, is_leaf, leaves) for v in value)
        if any(c.kind != "static" for c in children):
            return Tree("tuple", type(value), children)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value))
        children = tuple(_flatten(getattr(value, n), is_leaf, leaves) for n in names)
        if any(c.kind != "static" for c in children):
            return Tree("dataclass", (type(value), names), children, value)
    elif isinstance(value, Layout) and not value.is_static:
        children = tuple(_flatten(v, is_leaf, leaves) for v in layout_leaves(value.shape) + layout_leaves(value.stride))
        return Tree("layout", (_structure(value.shape), _structure(value.stride)), children, value)
    return Tree("static", static_key(value), (), value)


def _structure(t):
    return tuple(_structure(e) for e in t) if isinstance(t, tuple) else None


def unflatten(tree: Tree, leaves: list):
    """The structure `tree` describes, its leaves taken in order from `leaves`."""
    return _unflatten(tree, iter(leaves))


def _unflatten(tree: Tree, it):
    if tree.kind == "leaf":
        return next(it)
    if tree.kind == "static":
        return tree.value
    children = [_unflatten(c, it) for c in tree.children]
    if tree.kind == "tuple":
        cls = tree.node
        if hasattr(cls, "_fields"):  # a NamedTuple
            return cls(*children)
        return cls(children)
    if tree.kind == "dataclass":
        obj = copy.copy(tree.value)
        for name, child in zip(tree.node[1], children):
            object.__setattr__(obj, name, child)  # frozen dataclasses too
        return obj
    shape_structure, stride_structure = tree.node
    n = len(layout_leaves(_template(shape_structure)))
    return Layout(rebuild(_template(shape_structure), children[:n]), rebuild(_template(stride_structure), children[n:]))


def _template(structure):
    return tuple(_template(e) for e in structure) if isinstance(structure, tuple) else 0
