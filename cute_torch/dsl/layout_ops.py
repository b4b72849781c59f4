"""The builder for layout math with run-time parts.

When a layout leaf or a coordinate is a DSL value, Python computes nothing itself: it emits a
`cute` dialect op whose static parts are in its types and attributes (`cute.crd2idx`,
`cute.size`, `cute.cosize`, `cute.get_leaf`, `cute.swizzle`, the divides), and the C++ passes
fold and lower it (dialect/lib/Transforms/LowerToArith.cpp, following the rules of
csrc/layout). When everything is static, the same questions go to the C++ library directly
(`cute_torch._C.layout`), so there is one algebra either way.

Each op works in one integer type: Int64 if any run-time leaf or coordinate is 64-bit (a
`wide` tensor), else Int32.
"""

from __future__ import annotations

from .._C import layout as _alg
from . import ir
from .diagnostics import ARGUMENT_MISMATCH, LAYOUT_ALGEBRA, UNSUPPORTED_TYPE, DSLError, user_location
from .int_tuple import (DYNAMIC, IntTuple, fits, is_static, leaves, marked, rebuild, spell,
                        static_product)
from .numeric import Boolean, Int32, Int64, Numeric, convert


def index_type(*tuples: IntTuple) -> type[Numeric]:
    """Int64 if any run-time leaf of `tuples` is 64-bit, else Int32."""
    for t in tuples:
        for leaf in leaves(t):
            if isinstance(leaf, Numeric) and type(leaf).width > 32:
                return Int64
    return Int32


def _operand(x: Numeric, t: type[Numeric]) -> Numeric:
    if type(x).is_float:
        raise DSLError(UNSUPPORTED_TYPE, f"layout coordinates and extents must be integers, got {type(x).__name__}",
                       user_location())
    if type(x) is Boolean or type(x) is not t:
        return convert(x, t)
    return x


def layout_type(shape: IntTuple, stride: IntTuple) -> str:
    return f'!cute.layout<"{spell(shape)}:{spell(stride)}">'


def layout_value(shape: IntTuple, stride: IntTuple, t: type[Numeric]) -> ir.Value:
    """The layout as an SSA value: cute.static_layout, or cute.make_layout of its run-time
    leaves (shape leaves, then stride leaves) in type `t`."""
    b = ir.require(what="a layout with run-time leaves")
    type_ = layout_type(shape, stride)
    dynamic = [_operand(x, t) for x in leaves(shape) + leaves(stride) if isinstance(x, Numeric)]
    if not dynamic:
        return b.op(f"cute.static_layout : {type_}", type_)
    names = ", ".join(x.ir.name for x in dynamic)
    types = ", ".join(t.mlir for _ in dynamic)
    return b.op(f"cute.make_layout({names}) : ({types}) -> {type_}", type_)


def _static_call(name: str, *args, shown: str | None = None):
    try:
        return getattr(_alg, name)(*args)
    except ValueError as problem:
        raise DSLError(LAYOUT_ALGEBRA, f"{shown or name}: {problem}", user_location(),
                       "check the shapes against CuTe's rules for this operation (docs/layout.md)") from None


def crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple):
    """CuTe's crd2idx: a tuple coordinate maps mode by mode, an integer coordinate into a tuple
    of modes is split colexicographically (first mode fastest), None (a hole) adds nothing.
    A Python int when everything is static, else the value of a `cute.crd2idx` op."""
    if not fits(coord, shape):
        raise DSLError(ARGUMENT_MISMATCH, f"coordinate {spell(coord)} does not fit the shape {spell(shape)}",
                       user_location(), "give one index per mode, or a single linear index")
    if all(c is None for c in leaves(coord)):
        return 0  # all holes: the origin, whatever the strides
    if _static_coord(coord) and is_static(shape) and is_static(stride):
        return _static_call("crd2idx", coord, (shape, stride))
    t = index_type(coord, shape, stride)
    if any(isinstance(s, int) and not -(1 << 31) <= s < (1 << 31) for s in leaves(stride)):
        t = Int64  # a packed coordinate tensor's strides: 32-bit math would drop its high fields
    operands = [_operand(c, t) for c in leaves(coord) if isinstance(c, Numeric)]
    layout = layout_value(shape, stride, t)
    names = ", ".join(c.ir.name for c in operands)
    types = f", ({', '.join(t.mlir for _ in operands)})" if operands else ""
    return t.wrap_op(f'cute.crd2idx {layout.name}[{names}] {{coord = "{spell(coord)}"}} : '
                     f"{layout.type}{types} -> {t.mlir}")


def _static_coord(coord: IntTuple) -> bool:
    return all(c is None or isinstance(c, int) for c in leaves(coord))


def size(shape: IntTuple):
    """The product of a shape's extents: an int when static, else a `cute.size` op."""
    if is_static(shape):
        return static_product(shape)
    zeros = rebuild(shape, [0] * len(leaves(shape)))
    t = index_type(shape)
    layout = layout_value(shape, zeros, t)
    return t.wrap_op(f"cute.size {layout.name} : {layout.type} -> {t.mlir}")


def cosize(shape: IntTuple, stride: IntTuple):
    """One past the largest offset: C++ when static, else a `cute.cosize` op."""
    if is_static(shape) and is_static(stride):
        return _static_call("cosize", (shape, stride))
    t = index_type(shape, stride)
    layout = layout_value(shape, stride, t)
    return t.wrap_op(f"cute.cosize {layout.name} : {layout.type} -> {t.mlir}")


def compact_col_major(shape: IntTuple) -> IntTuple:
    """Column-major strides: C++ when static (extent-1 modes get stride 0, as in CuTe); with
    run-time extents each stride is the size of the modes before it (a `cute.size` op)."""
    if is_static(shape):
        return _static_call("compact_col_major", shape)
    flat = leaves(shape)
    strides, before = [], []
    for extent in flat:
        strides.append(0 if isinstance(extent, int) and extent == 1 else size(tuple(before)) if before else 1)
        before.append(extent)
    return rebuild(shape, strides)


def _read_leaves(value: ir.Value, shape: IntTuple, stride: IntTuple, t: type[Numeric]) -> tuple:
    """(shape, stride) of a layout value whose leaves DYNAMIC marks: those read with
    `cute.get_leaf`, the others ints."""
    type_ = layout_type(shape, stride)
    flat = leaves(shape) + leaves(stride)
    values = [t.wrap_op(f"cute.get_leaf {value.name} {{index = {i}}} : {type_} -> {t.mlir}") if leaf == DYNAMIC
              else leaf for i, leaf in enumerate(flat)]
    n = len(leaves(shape))
    return rebuild(shape, values[:n]), rebuild(stride, values[n:])


def divide(name: str, shape: IntTuple, stride: IntTuple, tiles: list) -> tuple:
    """`name` (logical/zipped/tiled/flat_divide) of a layout with run-time leaves by a by-mode
    tiler of static layouts ((shape, stride) pairs): the result's structure comes from C++
    (csrc/layout/DynamicLayout.cpp), its run-time leaves from the op."""
    result = _static_call("divide_dynamic", name, (marked(shape), marked(stride)), tiles, shown=name)
    t = index_type(shape, stride)
    source = layout_value(shape, stride, t)
    tiler_type = layout_type(tuple(s for s, _ in tiles), tuple(d for _, d in tiles))
    b = ir.current()
    tiler = b.op(f"cute.static_layout : {tiler_type}", tiler_type)
    result_type = layout_type(*result)
    value = b.op(f"cute.{name} {source.name}, {tiler.name} {{by_mode}} : {source.type}, {tiler_type}", result_type)
    return _read_leaves(value, *result, t)


def add_offsets(a, b):
    """a + b for element offsets that slicing and tiling accumulate (0 adds nothing)."""
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


def swizzle(offset: Numeric, bits: int, base: int, shift: int) -> Numeric:
    """CuTe's Swizzle<B, M, S> of a run-time offset (a `cute.swizzle` op)."""
    t = type(offset)
    return t.wrap_op(f"cute.swizzle {offset.ir.name} {{swizzle = array<i64: {bits}, {base}, {shift}>}} : {t.mlir}")
