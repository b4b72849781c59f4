"""Coordinate (identity) tensors: `cute.make_identity_tensor(shape)`, whose element at c is the
coordinate c itself, so that tiling and partitioning it the same way as a data tensor tells
each thread which coordinates of the whole tensor its elements have (for predicating tail
tiles: `cute.elem_less(coord, shape)`).

CuTe gives such a tensor basis strides (E<0>, E<1>, ...). Here a coordinate is packed into one
64-bit integer, each mode in a field of its own: mode i (but the last) at bit FIELD * i, the
last mode taking the high bits that are left. So the tensor is an ordinary layout with static
strides (1, 2^FIELD, ...) that every divide, slice and partition handles as it handles data, and
reading an element unpacks the fields (idx2crd over (2^FIELD, ..., rest): shifts and masks).

The fields leave room past the domain: a tail tile of a tiled coordinate tensor reaches
coordinates beyond the shape (that is what predication compares), and they must not carry
into the next mode, as a compact packing (row + M * column) would. A field holds 0..2^FIELD-1
(FIELD = 31 bits for two modes, 20 for three, 15 for four); a compile-time extent that does not
fit is an error.
"""

from __future__ import annotations

from .diagnostics import UNSUPPORTED_TYPE, DSLError, user_location
from .int_tuple import is_tuple, leaves, rebuild, spell
from .layout import Layout, idx2crd
from .layout_ops import add_offsets
from .numeric import Boolean, Int32, Numeric, convert
from .tensor import Tensor, _has_hole


def _field_bits(rank: int) -> int:
    return min(31, 62 // max(rank, 1))


def _packing(domain) -> tuple:
    """(strides, unpacking shape) of the per-mode fields for a flat or nested domain."""
    flat = leaves(domain)
    bits = _field_bits(len(flat))
    for i, extent in enumerate(flat[:-1]):
        if isinstance(extent, int) and extent > (1 << bits) // 2:
            raise DSLError(UNSUPPORTED_TYPE, f"an identity tensor of {len(flat)} modes packs each coordinate in "
                           f"{bits} bits, too few for mode {i}'s extent {extent} and a tail tile past it",
                           user_location(), "use fewer modes (group them) or smaller extents")
    strides = [1 << (bits * i) for i in range(len(flat))]
    unpack = tuple([1 << bits] * (len(flat) - 1) + [flat[-1]])
    return rebuild(domain, strides) if is_tuple(domain) else strides[0], unpack


class IdentityTensor(Tensor):
    """A tensor of coordinates of `domain` (the shape it was made for)."""

    def __init__(self, domain):
        strides, self._unpack = _packing(domain)
        super().__init__(None, Int32, Layout(domain, strides), "coord", 1, wide=len(leaves(domain)) > 1)
        self.domain = domain

    def _fields(self, index: int) -> list[int]:
        """The per-mode fields of a static offset, the last taking the rest (never wrapped by a
        static extent: a tail tile's offsets reach past it)."""
        bits = _field_bits(len(self._unpack))
        mask = (1 << bits) - 1
        return [(index >> (bits * i)) & mask for i in range(len(self._unpack) - 1)] + [
            index >> (bits * (len(self._unpack) - 1))]

    def _coordinate(self, index):
        flat = idx2crd(index, self._unpack) if len(self._unpack) > 1 else index
        return rebuild(self.domain, list(flat) if isinstance(flat, tuple) else [flat])

    def __getitem__(self, coord):
        if _has_hole(coord):
            return self._slice(coord)
        extra = self.offset_at(self._layout, coord)
        if isinstance(extra, int) and not isinstance(self.offset, int):
            # The run-time base and the static part unpacked apart (the fields never carry into
            # each other): the code then shows that elements of a partition share a row or a
            # column, so reads indexed by it are computed and loaded once.
            base = leaves(self._coordinate(self.offset))
            return rebuild(self.domain, [b + s if s else b for b, s in zip(base, self._fields(extra))])
        return self._coordinate(add_offsets(self.offset, extra))

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
        return self._coordinate(add_offsets(self.offset, 0))

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
