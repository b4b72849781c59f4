"""`cute.Pointer`: a typed address, CuTe DSL's iterator. A tensor is a pointer and a layout
(`t.iterator`, `cute.make_tensor(ptr, layout)`); barriers and async copies take pointers.

A pointer knows its element type, its memory space (gmem, smem, rmem) and the alignment in
bytes it is known to have; adding an element count moves it (and keeps what alignment is still
known); `recast_ptr` reads the same address as another element type.
"""

from __future__ import annotations

import math

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .numeric import Boolean, Int32, Int64, Numeric, as_numeric, convert, known_divisor

_STORAGE = {Boolean: "i8"}


def storage_type(dtype) -> str:
    """The LLVM type an element lives in memory as (Boolean is a byte)."""
    return _STORAGE.get(dtype, dtype.mlir)


def byte_width(dtype) -> int:
    """An element's size in bytes."""
    return 1 if dtype is Boolean else max(1, dtype.width // 8)


class Pointer:
    """An address of `dtype` elements in `memspace`, `alignment` bytes aligned."""

    __slots__ = ("value", "dtype", "memspace", "alignment", "wide")

    def __init__(self, value: ir.Value, dtype, memspace: str, alignment: int, wide: bool = False):
        self.value, self.dtype, self.memspace, self.alignment, self.wide = value, dtype, memspace, alignment, wide

    @property
    def element_type(self):
        return self.dtype

    @property
    def type(self) -> str:
        return f"ptr<{self.dtype.__name__} {self.memspace} align {self.alignment}>"

    def __str__(self) -> str:
        return self.type

    __repr__ = __str__

    def __add__(self, offset) -> "Pointer":
        """The address `offset` elements further (an int or a DSL integer)."""
        if isinstance(offset, int) and offset == 0:
            return self
        b = ir.require(what="pointer arithmetic")
        index_t = Int64 if self.wide else Int32
        off = convert(as_numeric(offset, index_t), index_t) if not isinstance(offset, Numeric) else offset
        if type(off).is_float:
            raise DSLError(ARGUMENT_MISMATCH, f"a pointer moves by an integer count, got {type(off).__name__}",
                           user_location())
        t = self.value.type
        value = b.op(f"llvm.getelementptr {self.value.name}[{off.ir.name}] : ({t}, {off.ir.type}) -> {t}, "
                     f"{storage_type(self.dtype)}", t)
        # What the offset is known to be a multiple of (cute.assume) keeps that much alignment.
        step = known_divisor(offset) * byte_width(self.dtype)
        alignment = math.gcd(self.alignment, step & -step) if step else self.alignment
        return Pointer(value, self.dtype, self.memspace, alignment, self.wide)

    def __radd__(self, offset) -> "Pointer":
        return self + offset

    def align(self, min_align: int) -> "Pointer":
        """The address rounded up to a multiple of `min_align` bytes (a power of two), known to be
        so aligned (CuTe DSL's Pointer.align): a row that starts anywhere reaches its first
        16-byte vector this way (the elements before it are the caller's to handle)."""
        power_of_two = isinstance(min_align, int) and not isinstance(min_align, bool) and min_align >= 1 \
            and not min_align & (min_align - 1)
        if not power_of_two:
            raise DSLError(ARGUMENT_MISMATCH, f"Pointer.align takes a power of two (bytes), got {min_align!r}",
                           user_location())
        if min_align <= self.alignment:
            return self
        b = ir.require(what="Pointer.align")
        address = self.toint()
        aligned = (address + (min_align - 1)) & -min_align
        value = b.op(f"llvm.inttoptr {aligned.ir.name} : {aligned.ir.type} to {self.value.type}", self.value.type)
        return Pointer(value, self.dtype, self.memspace, min_align, self.wide)

    def toint(self) -> Numeric:
        """The address as an integer: 32 bits in shared memory (what PTX's shared-space
        instructions take), 64 otherwise."""
        b = ir.require(what="Pointer.toint")
        t = Int32 if self.memspace == "smem" else Int64
        return t._wrap(b.op(f"llvm.ptrtoint {self.value.name} : {self.value.type} to {t.mlir}", t.mlir))


def select_pointer(cond, a, b) -> Pointer:
    """`a` where the Boolean `cond` else `b` (cute.where on pointers): one element type and
    memory space; the alignment both have."""
    if not (isinstance(a, Pointer) and isinstance(b, Pointer)) or (a.dtype, a.memspace) != (b.dtype, b.memspace):
        raise DSLError(ARGUMENT_MISMATCH, f"cute.where chooses between two pointers of one element type and memory "
                       f"space, got {a} and {b}", user_location())
    builder = ir.require(what="cute.where")
    t = a.value.type
    value = builder.op(f"llvm.select {cond.ir.name}, {a.value.name}, {b.value.name} : i1, {t}", t)
    return Pointer(value, a.dtype, a.memspace, math.gcd(a.alignment, b.alignment), a.wide or b.wide)


def recast_ptr(ptr: Pointer, dtype=None) -> Pointer:
    """The same address read as `dtype` elements (CuTe DSL's recast_ptr)."""
    if not isinstance(ptr, Pointer):
        raise DSLError(ARGUMENT_MISMATCH, f"recast_ptr takes a cute.Pointer, got {type(ptr).__name__}",
                       user_location(), "a tensor's pointer is t.iterator")
    return Pointer(ptr.value, dtype or ptr.dtype, ptr.memspace, ptr.alignment, ptr.wide)


def shared_pointer(ptr, what: str) -> Pointer:
    """`ptr` checked to be a shared-memory Pointer (barriers live there)."""
    if not isinstance(ptr, Pointer) or ptr.memspace != "smem":
        got = ptr.type if isinstance(ptr, Pointer) else type(ptr).__name__
        raise DSLError(ARGUMENT_MISMATCH, f"{what} takes a shared-memory cute.Pointer, got {got}", user_location(),
                       "allocate the barriers in shared memory (cute.arch.alloc_smem(cute.Int64, n)) and pass "
                       "bars.iterator + i")
    return ptr
