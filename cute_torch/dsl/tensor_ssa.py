"""TensorSSA: a tensor's elements as one register value (an MLIR vector).

`Tensor.load()` makes one and `Tensor.store()` writes one; in between, arithmetic is elementwise
with the scalar types' rules (promotion, bf16/fp8 through f32), scalars broadcast, `.to(T)`
converts and `reduce` folds. Elements are kept in their storage type (fp8 and Boolean as i8) so
memory ops move exactly the bytes in memory.
"""

from __future__ import annotations

import operator
from enum import Enum

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from .int_tuple import is_tuple, leaves
from .layout import size, spell
from .math import fmax, fmin
from .math import max as _max
from .math import min as _min
from .numeric import Boolean, Float32, Int32, Numeric, as_numeric, convert
from .pointer import storage_type as _storage


def _position(i: int) -> str:
    return Int32(i).ir.name


class ReductionOp(Enum):
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"


_COMBINE = {ReductionOp.ADD: operator.add, ReductionOp.MUL: operator.mul,
            ReductionOp.MAX: lambda a, b: _max(a, b), ReductionOp.MIN: lambda a, b: _min(a, b)}


class TensorSSA:
    """`count` elements of `dtype` in a vector value, with the shape of the tensor they came from."""

    def __init__(self, value: ir.Value, dtype: type[Numeric], shape):
        self.ir, self.dtype, self.shape = value, dtype, shape
        self.count = size(shape)

    @property
    def element_type(self) -> type[Numeric]:
        return self.dtype

    def __str__(self) -> str:
        return f"tensor_ssa<{self.dtype.__name__}, {spell(self.shape)}>"

    __repr__ = __str__

    # -- elements ---------------------------------------------------------------------------------
    def __getitem__(self, i: int) -> Numeric:
        if not isinstance(i, int):
            raise DSLError(UNSUPPORTED_TYPE, "TensorSSA elements are indexed by compile-time ints", user_location(),
                           "store it into a register tensor (make_rmem_tensor) to index at run time")
        if not 0 <= i < self.count:
            raise DSLError(ARGUMENT_MISMATCH, f"element {i} of a TensorSSA of {self.count}", user_location())
        b = ir.current()
        raw = b.op(f"llvm.extractelement {self.ir.name}[{_position(i)} : i32] : {self.ir.type}", _storage(self.dtype))
        if self.dtype is Boolean:
            return Boolean.wrap_op(f"arith.trunci {raw.name} : i8 to i1")
        return self.dtype._wrap(raw)

    def elements(self) -> list[Numeric]:
        return [self[i] for i in range(self.count)]

    @staticmethod
    def from_elements(values: list, dtype: type[Numeric], shape) -> "TensorSSA":
        b = ir.require("device", "TensorSSA")
        vector = f"vector<{len(values)}x{_storage(dtype)}>"
        result = b.op(f"llvm.mlir.undef : {vector}", vector)
        for i, v in enumerate(values):
            raw = convert(as_numeric(v, dtype), dtype).ir
            if dtype is Boolean:
                raw = b.op(f"arith.extui {raw.name} : i1 to i8", "i8")
            result = b.op(f"llvm.insertelement {raw.name}, {result.name}[{_position(i)} : i32] : {vector}", vector)
        return TensorSSA(result, dtype, shape)

    @staticmethod
    def full(count: int, value, dtype: type[Numeric], shape=None) -> "TensorSSA":
        scalar = convert(as_numeric(value, dtype), dtype)
        return TensorSSA.from_elements([scalar] * count, dtype, shape if shape is not None else count)

    # -- elementwise --------------------------------------------------------------------------------
    def _map(self, fn, *others) -> "TensorSSA":
        columns = []
        for other in others:
            if isinstance(other, TensorSSA):
                if other.count != self.count:
                    raise DSLError(ARGUMENT_MISMATCH, f"elementwise op on TensorSSAs of {self.count} and "
                                   f"{other.count} elements", user_location())
                columns.append(other.elements())
            else:
                columns.append([other] * self.count)
        results = [fn(x, *(col[i] for col in columns)) for i, x in enumerate(self.elements())]
        return TensorSSA.from_elements(results, type(results[0]), self.shape)

    def to(self, dtype: type[Numeric]) -> "TensorSSA":
        if dtype is self.dtype:
            return self
        return self._map(lambda x: convert(x, dtype))

    def reduce(self, op: ReductionOp, init_val=None, reduction_profile=0, *, init=None):
        """Folds elements with `op` (pairwise, a tree), starting from `init_val` if given.
        `reduction_profile` 0 folds every element into one value; a profile congruent to the
        shape, None for a mode kept and 1 for a mode folded (CuTe DSL's: (None, 1) on (4, 8)
        gives the 4 row results), gives a TensorSSA of the kept modes. Float32 MAX/MIN use
        max.f32/min.f32, which drop a NaN operand."""
        op = ReductionOp(op)
        start = init_val if init_val is not None else init
        combine = _COMBINE[op]
        if self.dtype is Float32 and op in (ReductionOp.MAX, ReductionOp.MIN):
            combine = fmax if op is ReductionOp.MAX else fmin
        groups = _reduction_groups(self.shape, reduction_profile)
        values = self.elements()
        results = [_fold([values[i] for i in group], combine, start) for group in groups[0]]
        if groups[1] is None:
            return results[0]
        return TensorSSA.from_elements(results, type(results[0]), groups[1])


def _fold(values: list, combine, start):
    while len(values) > 1:
        values = [combine(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return combine(start, values[0]) if start is not None else values[0]


def _profile_leaves(shape, profile) -> list:
    """(extent, kept) per leaf of `shape` under `profile` (None keeps, 1 folds, a tuple recurses)."""
    if profile is None or profile == 1:
        return [(extent, profile is None) for extent in leaves(shape)]
    if not (is_tuple(profile) and is_tuple(shape) and len(profile) == len(shape)):
        raise DSLError(ARGUMENT_MISMATCH, f"reduction_profile {profile} does not match the shape {spell(shape)}: "
                       "use 0, or a profile of its shape with None (keep) and 1 (fold)", user_location())
    return [leaf for s, p in zip(shape, profile) for leaf in _profile_leaves(s, p)]


def _kept_shape(shape, profile):
    if profile is None:
        return shape
    if profile == 1:
        return None
    kept = [k for k in (_kept_shape(s, p) for s, p in zip(shape, profile)) if k is not None]
    return tuple(kept) if kept else None


def _reduction_groups(shape, profile):
    """([element indices folded into each result, results in colexicographic order], the
    results' shape or None for one scalar)."""
    count = size(shape)
    if isinstance(profile, int) and profile == 0 or profile == 1:
        return [list(range(count))], None
    flat = _profile_leaves(shape, profile)
    kept_shape = _kept_shape(shape, profile)
    if kept_shape is None:
        return [list(range(count))], None
    groups: dict = {}
    for i in range(count):
        rest, out, scale = i, 0, 1
        for extent, kept in flat:
            coordinate, rest = rest % extent, rest // extent
            if kept:
                out += coordinate * scale
                scale *= extent
        groups.setdefault(out, []).append(i)
    return [groups[k] for k in sorted(groups)], kept_shape


def _binary(op):
    return lambda self, other: self._map(op, other)


def _reflected(op):
    return lambda self, other: self._map(lambda x, y: op(y, x), other)


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift), ("pow", operator.pow)]:
    setattr(TensorSSA, f"__{_name}__", _binary(_op))
    setattr(TensorSSA, f"__r{_name}__", _reflected(_op))
for _name, _op in [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)]:
    setattr(TensorSSA, f"__{_name}__", _binary(_op))
TensorSSA.__neg__ = lambda self: self._map(operator.neg)
TensorSSA.__abs__ = lambda self: self._map(abs)
TensorSSA.__hash__ = None  # __eq__ is elementwise
