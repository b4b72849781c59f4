"""Shared storage the way pipelined kernels lay it out: a `@cute.struct` of `MemRange`s
(barriers, multi-stage operand buffers), aligned with `Align`, carved out of dynamic shared
memory by a `SmemAllocator`. The launch's `smem=` is then computed from what the kernel
allocated (as CuTe DSL does), so nobody counts bytes by hand.

    @cute.struct
    class Storage:
        full: cute.struct.MemRange[cute.Int64, STAGES]
        a: cute.struct.Align[cute.struct.MemRange[cute.Float16, STAGES * 128 * 64], 1024]

    storage = cute.SmemAllocator().allocate(Storage)
    bars, sA = storage.full.data_ptr(), storage.a.get_tensor(layout)
"""

from __future__ import annotations

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .numeric import Numeric
from .pointer import Pointer, byte_width

DYNAMIC_SMEM_SYMBOL = "__cute_dynamic_smem"


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def dynamic_smem_base(b: ir.FunctionBuilder, alignment: int) -> ir.Value:
    """The address of the launch's dynamic shared memory, declared `alignment`-byte aligned
    (the declaration keeps the largest alignment any user asked for)."""
    module = b.module
    alignment = max(alignment, 16)
    if alignment > module.dynamic_smem_alignment:
        line = (f"llvm.mlir.global external @{DYNAMIC_SMEM_SYMBOL}() {{addr_space = 3 : i32, alignment = "
                f"{alignment} : i64}} : !llvm.array<0 x i8>")
        module.device_globals[:] = [g for g in module.device_globals if DYNAMIC_SMEM_SYMBOL not in g] + [line]
        module.dynamic_smem_alignment = alignment
    return b.op(f"llvm.mlir.addressof @{DYNAMIC_SMEM_SYMBOL} : !llvm.ptr<3>", "!llvm.ptr<3>")


# -- the struct description -------------------------------------------------------------------------

class _Range:
    """`count` elements of `dtype`, `align` bytes aligned."""

    def __init__(self, dtype, count: int, align: int):
        if not isinstance(count, int) or count < 1:
            raise DSLError(ARGUMENT_MISMATCH, f"MemRange needs a positive compile-time element count, got {count!r}",
                           user_location())
        if align < 1 or align & (align - 1):
            raise DSLError(ARGUMENT_MISMATCH, f"Align takes a power of two, got {align}", user_location())
        self.dtype, self.count, self.align = dtype, count, align

    @property
    def size(self) -> int:
        return self.count * byte_width(self.dtype)


class MemRange:
    """`MemRange[dtype, count]`: a field of `count` elements."""

    def __class_getitem__(cls, item):
        dtype, count = item
        return _Range(dtype, count, byte_width(dtype))


class Align:
    """`Align[field, bytes]`: the field at an address that is a multiple of `bytes`."""

    def __class_getitem__(cls, item):
        field, align = item
        if isinstance(field, _Range):
            return _Range(field.dtype, field.count, max(field.align, align))
        if isinstance(field, type) and hasattr(field, "__cute_struct__"):
            return _Nested(field, align)
        raise DSLError(ARGUMENT_MISMATCH, f"Align takes a MemRange or a @cute.struct, got {field!r}", user_location())


class _Nested:
    def __init__(self, struct: type, align: int):
        self.struct, self.align = struct, max(align, struct.__cute_struct__.align)

    @property
    def size(self) -> int:
        return self.struct.__cute_struct__.size


class _Layout:
    """Fields, their byte offsets, the struct's size and alignment."""

    def __init__(self, cls):
        self.fields: list[tuple[str, object, int]] = []
        offset, align = 0, 1
        for name, spec in cls.__dict__.get("__annotations__", {}).items():
            if isinstance(spec, type) and hasattr(spec, "__cute_struct__"):
                spec = _Nested(spec, 1)
            elif isinstance(spec, type) and issubclass(spec, Numeric):
                spec = _Range(spec, 1, byte_width(spec))
            elif not isinstance(spec, (_Range, _Nested)):
                raise DSLError(ARGUMENT_MISMATCH, f"field '{name}' of {cls.__name__} is {spec!r}; a @cute.struct "
                               "field is a MemRange, an Align, a numeric type or another @cute.struct",
                               user_location())
            offset = _round_up(offset, spec.align)
            self.fields.append((name, spec, offset))
            offset += spec.size
            align = max(align, spec.align)
        self.align = align
        self.size = _round_up(offset, align)


def struct(cls):
    """Makes a class a shared-storage struct: its annotated fields (MemRange, Align, numeric
    types, nested structs) laid out in order, each at its alignment."""
    cls.__cute_struct__ = _Layout(cls)
    cls.size_in_bytes = classmethod(lambda c: c.__cute_struct__.size)
    cls.align_in_bytes = classmethod(lambda c: c.__cute_struct__.align)
    return cls


struct.MemRange = MemRange
struct.Align = Align


# -- views of allocated storage ---------------------------------------------------------------------

class RangeView:
    """An allocated MemRange: its pointer, or a tensor over it."""

    def __init__(self, ptr: Pointer, spec: _Range):
        self._ptr, self._spec = ptr, spec

    def data_ptr(self) -> Pointer:
        return self._ptr

    def get_tensor(self, layout):
        from .layout import cosize
        from .tensor import make_tensor
        if isinstance(cosize(layout), int) and cosize(layout) > self._spec.count:
            raise DSLError(ARGUMENT_MISMATCH, f"a layout of cosize {cosize(layout)} over a MemRange of "
                           f"{self._spec.count} elements", user_location())
        return make_tensor(self._ptr, layout)


class StructView:
    """An allocated struct: one attribute per field (a RangeView or a nested StructView)."""

    def __init__(self, cls, base: Pointer):
        for name, spec, offset in cls.__cute_struct__.fields:
            at = _byte_pointer(base, offset)
            if isinstance(spec, _Nested):
                setattr(self, name, StructView(spec.struct, at))
            else:
                setattr(self, name, RangeView(_retyped(at, spec.dtype, spec.align), spec))


def _byte_pointer(base: Pointer, offset: int) -> Pointer:
    from .numeric import Uint8
    return _retyped(base, Uint8, base.alignment) + offset if offset else base


def _retyped(ptr: Pointer, dtype, align: int) -> Pointer:
    return Pointer(ptr.value, dtype, ptr.memspace, align)


class SmemAllocator:
    """Carves a kernel's dynamic shared memory, in order. What the kernel allocates sets the
    launch's `smem=` (launch(smem=None), the default)."""

    def __init__(self):
        self._b = ir.require("device", "SmemAllocator")
        self._offset = 0

    def _take(self, size: int, align: int) -> Pointer:
        from .numeric import Uint8
        start = _round_up(self._offset, align)
        self._offset = start + size
        b = self._b
        b.dynamic_smem_bytes = max(getattr(b, "dynamic_smem_bytes", 0), self._offset)
        base = Pointer(dynamic_smem_base(b, align), Uint8, "smem", max(align, 16))
        return base + start if start else base

    def allocate(self, what, byte_alignment: int = 1):
        """A @cute.struct (a StructView of its fields) or a number of bytes (a byte Pointer)."""
        if isinstance(what, type) and hasattr(what, "__cute_struct__"):
            layout = what.__cute_struct__
            return StructView(what, self._take(layout.size, max(layout.align, byte_alignment)))
        if isinstance(what, int) and what > 0:
            return self._take(what, byte_alignment)
        raise DSLError(ARGUMENT_MISMATCH, f"allocate takes a @cute.struct or a byte count, got {what!r}",
                       user_location())

    def allocate_array(self, element_type, num_elems: int = 1) -> Pointer:
        ptr = self._take(num_elems * byte_width(element_type), byte_width(element_type))
        return _retyped(ptr, element_type, ptr.alignment)

    def allocate_tensor(self, element_type, layout, byte_alignment: int = 16):
        from .layout import cosize
        from .tensor import make_tensor
        count = cosize(layout)
        if not isinstance(count, int):
            raise DSLError(ARGUMENT_MISMATCH, "allocate_tensor needs a static layout", user_location())
        ptr = self._take(count * byte_width(element_type), max(byte_alignment, byte_width(element_type)))
        return make_tensor(_retyped(ptr, element_type, ptr.alignment), layout)


def needed_bytes(b: ir.FunctionBuilder) -> int:
    return getattr(b, "dynamic_smem_bytes", 0)

