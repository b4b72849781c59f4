"""Coordinate (identity) tensors: `cute.make_identity_tensor(shape)`, whose element at c is the
coordinate c itself, so that tiling and partitioning it the same way as a data tensor tells
each thread which coordinates of the whole tensor its elements have (for predicating tail
tiles: `cute.elem_less(coord, shape)`).

CuTe gives such a tensor basis strides (E<0>, E<1>, ...). Here a coordinate is packed into one
integer, its compact column-major index, so the tensor is an ordinary layout (compact over the
shape) that every divide, slice and partition handles as it handles data; reading an element
unpacks the index back into the coordinate (idx2crd: C++ when static, `cute.crd2idx` ops when
run-time).
"""

from __future__ import annotations

from .diagnostics import UNSUPPORTED_TYPE, DSLError, user_location
from .int_tuple import is_tuple, leaves, rebuild, spell
from .layout import idx2crd, make_layout
from .layout_ops import add_offsets
from .numeric import Boolean, Int32, Numeric, convert
from .tensor import Tensor, _has_hole


class IdentityTensor(Tensor):
    """A tensor of coordinates of `domain` (the shape it was made for)."""

    def __init__(self, domain):
        super().__init__(None, Int32, make_layout(domain), "coord", 1)
        self.domain = domain

    def __getitem__(self, coord):
        if _has_hole(coord):
            return self._slice(coord)
        return idx2crd(add_offsets(self.offset, self._layout(coord)), self.domain)

    def __setitem__(self, coord, value) -> None:
        raise DSLError(UNSUPPORTED_TYPE, "an identity tensor holds coordinates; it cannot be written", user_location())

    def load(self):
        raise DSLError(UNSUPPORTED_TYPE, "an identity tensor has no memory to load; read coordinates with t[i]",
                       user_location())

    def store(self, value) -> None:
        self[0] = value  # the same error as writing an element

    @property
    def iterator(self):
        raise DSLError(UNSUPPORTED_TYPE, "an identity tensor has no address", user_location())

    def __str__(self) -> str:
        return f"identity_tensor<{self.layout}>"

    def origin(self):
        """The coordinate of this (tile's) first element."""
        return idx2crd(add_offsets(self.offset, 0), self.domain)

    # A kernel parameter (a TMA tensor): the run-time extents of its domain; it must be whole.
    def signature(self) -> tuple:
        return ("identity", spell(self.domain), tuple(type(x).__name__ for x in self._dynamic()))

    def _dynamic(self) -> list:
        return [x for x in leaves(self.domain) if isinstance(x, Numeric)]

    def flatten(self):
        if not (isinstance(self.offset, int) and self.offset == 0):
            raise DSLError(UNSUPPORTED_TYPE, "a tiled or sliced identity tensor cannot be a kernel argument",
                           user_location(), "pass the whole coordinate tensor and tile it in the kernel")
        return [x.ir for x in self._dynamic()]

    def param_count(self) -> int:
        return len(self._dynamic())

    def rebuild(self, values) -> "IdentityTensor":
        values = list(values)
        flat = [type(x)._wrap(values.pop(0)) if isinstance(x, Numeric) else x for x in leaves(self.domain)]
        return IdentityTensor(rebuild(self.domain, flat))


def make_identity_tensor(shape) -> IdentityTensor:
    """The tensor whose element at coordinate c is c (CuTe's make_identity_tensor)."""
    return IdentityTensor(tuple(shape) if isinstance(shape, (tuple, list)) else shape)


def elem_less(a, b):
    """Whether every component of coordinate `a` is below the same component of `b` (CuTe's
    elem_less): the predicate of an element inside the bounds `b`."""
    if is_tuple(a):
        result = True
        for x, y in zip(a, b):
            less = elem_less(x, y)
            if isinstance(result, bool) and isinstance(less, bool):
                result = result and less
            else:
                result = convert(result, Boolean) & convert(less, Boolean)
        return result
    less = a < b
    return less if isinstance(less, (bool, Numeric)) else bool(less)
