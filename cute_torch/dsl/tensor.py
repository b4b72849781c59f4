"""DSL tensors and their host-side descriptions.

A DSL `Tensor` is a pointer plus a layout (layout.py: coordinates to offsets through nested
shape and stride tuples whose leaves are Python ints or DSL integers); `t[i, j]` loads and
`t[i, j] = v` stores through it. `TensorArg` is the host-side description of a torch tensor
(or any DLPack producer) passed to a @cute.jit function: what is compile-time (by default
everything: shape, strides, dtype, 16-byte alignment) and what is a run-time value
(`mark_layout_dynamic`, `mark_compact_shape_dynamic`).
"""

from __future__ import annotations

import copy
import math
from typing import NamedTuple, Sequence

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, WRONG_CONTEXT, DSLError, user_location
from ..launch import loaded_torch
from .numeric import (BY_TORCH_NAME, Boolean, Int32, Int64, Numeric, as_numeric, assume, convert, known_divisor)

from .layout import (ComposedLayout, Layout, divisibility, is_tuple, leaves, make_layout, rebuild, size,
                     slice_and_offset, spell)
from .layout_ops import add_offsets
from .pointer import Pointer, byte_width, storage_type  # noqa: F401 - storage_type re-exported

def _widen(coord):
    if is_tuple(coord):
        return tuple(_widen(c) for c in coord)
    return convert(coord, Int64) if isinstance(coord, Numeric) else coord


# -- DSL tensors ----------------------------------------------------------------------------------

class Tensor:
    """A pointer and a layout: element c lives at ptr[swizzle(offset + layout(c))].

    `offset` (elements, int or run-time) is where slicing and tiling got to; for plain layouts
    it could move the pointer, but keeping it separate lets a swizzle see the whole offset, as
    in CuTe's composed layouts. `alignment` is the pointer's (bytes) and `divisibility` what
    `offset` is known to be a multiple of (0: it is 0), which is what lets load/store use
    16-byte vectors. `wide` tensors (2**31 elements or more) use 64-bit offsets.
    """

    def __init__(self, ptr: ir.Value, dtype: type[Numeric], layout, memspace: str = "gmem",
                 alignment: int = 1, wide: bool = False, offset=0, divisibility: int = 0):
        self.ptr, self.dtype = ptr, dtype
        self.memspace, self.alignment, self.wide = memspace, alignment, wide
        if isinstance(layout, ComposedLayout):
            self.swizzle, offset, layout = layout.inner, add_offsets(offset, layout.offset), layout.outer
        else:
            self.swizzle = None
        self._layout: Layout = layout
        self.offset, self.divisibility = offset, divisibility

    @property
    def layout(self):
        """The layout, with its swizzle and offset when it has a swizzle (a ComposedLayout)."""
        if self.swizzle is not None:
            return ComposedLayout(self.swizzle, self.offset, self._layout)
        return self._layout

    @property
    def shape(self):
        return self._layout.shape

    @property
    def stride(self):
        return self._layout.stride

    @property
    def element_type(self) -> type[Numeric]:
        return self.dtype

    @property
    def iterator(self) -> Pointer:
        """The address of the tensor's first element, a cute.Pointer (make_tensor(ptr, layout)
        builds other tensors on it; barriers and copies take pointers)."""
        if isinstance(self.offset, int) and self.offset == 0:
            return Pointer(self.ptr, self.dtype, self.memspace, self.alignment, self.wide)
        if self.swizzle is not None:
            raise DSLError(ARGUMENT_MISMATCH, "the iterator of a swizzled tensor that was sliced or tiled is not a "
                           "plain address", user_location(), "take the iterator before slicing")
        folded = self._folded()
        return Pointer(folded.ptr, self.dtype, self.memspace, folded.alignment, self.wide)

    def __str__(self) -> str:
        return f"tensor<{self.memspace} {self.dtype.__name__} o {self.layout}>"

    __repr__ = __str__

    @property
    def type(self) -> str:
        """What the tensor is at compile time, as kernels print it: memory space, element type,
        pointer alignment and layout (`?` for run-time leaves)."""
        return f"tensor<{self.memspace} {self.dtype.__name__} align {self.alignment} o {self.layout}>"

    def offset_at(self, layout, coord):
        """layout(coord) as an offset into this tensor: in 64 bits for a wide tensor (one of 2**31
        elements or more, or a packed coordinate tensor), whose offsets overflow 32 bits."""
        return layout(_widen(coord) if self.wide else coord)

    def with_layout(self, layout, offset=0, offset_divisibility: int = 0) -> "Tensor":
        """The same memory under another layout, `offset` more elements in. A ComposedLayout
        (what the algebra returns for a swizzled tensor) carries the whole offset itself."""
        t = copy.copy(self)
        base = self.offset
        if isinstance(layout, ComposedLayout):
            t.swizzle, base, layout = layout.inner, layout.offset, layout.outer
        t._layout = layout
        t.offset = add_offsets(base, offset)
        t.divisibility = math.gcd(self.divisibility, offset_divisibility)
        return t

    def _offset_value(self, extra) -> Numeric:
        """The element index of offset + extra as a DSL integer of the tensor's index width. A
        swizzle acts on the byte address, as in CuTe DSL (Sw<3,4,3> is the 128-byte swizzle for
        every element type): bytes = index * element size, swizzled, divided back."""
        index_t = Int64 if self.wide else Int32
        total = add_offsets(self.offset, extra)
        if self.swizzle is not None:
            shift = _element_shift(self.dtype, self.swizzle)
            if isinstance(total, int):
                total = self.swizzle(total << shift) >> shift
            else:
                total = self.swizzle(convert(total, index_t) << shift) >> shift
        if not isinstance(total, Numeric):
            return index_t(total)
        if type(total).is_float:
            raise DSLError(UNSUPPORTED_TYPE, f"tensor indices must be integers, got {type(total).__name__}",
                           user_location())
        if type(total).width < index_t.width or not type(total).signed:
            total = convert(total, index_t)
        return total

    def _address(self, coord) -> ir.Value:
        b = ir.require("device", "reading or writing tensor elements")
        if self.memspace == "gmem" and b.kind != "device":
            raise DSLError(WRONG_CONTEXT, "tensor elements can only be accessed in device code", user_location())
        offset = self._offset_value(self.offset_at(self._layout, coord))   # multiplied in 64 bits if wide
        ptr_t = self.ptr.type
        return b.op(f"llvm.getelementptr {self.ptr.name}[{offset.ir.name}] : ({ptr_t}, {offset.ir.type}) -> {ptr_t}, "
                    f"{storage_type(self.dtype)}", ptr_t)

    def __getitem__(self, coord):
        if _has_hole(coord):
            return self._slice(coord)
        address = self._address(coord)
        b = ir.current()
        raw = b.op(f"llvm.load {address.name} : {address.type} -> {storage_type(self.dtype)}",
                   storage_type(self.dtype))
        if self.dtype is Boolean:
            return Boolean.wrap_op(f"arith.trunci {raw.name} : i8 to i1")
        return self.dtype._wrap(raw)

    def __setitem__(self, coord, value) -> None:
        if _has_hole(coord):
            self._slice(coord).store(value)
            return
        address = self._address(coord)
        b = ir.current()
        v = convert(as_numeric(value, self.dtype), self.dtype)
        raw = v.ir
        if self.dtype is Boolean:
            raw = b.op(f"arith.extui {raw.name} : i1 to i8", "i8")
        b.emit(f"llvm.store {raw.name}, {address.name} : {raw.type}, {address.type}")

    def _slice(self, coord) -> "Tensor":
        """The sub-tensor of the modes where `coord` is None; the fixed part moves the offset."""
        kept, offset = slice_and_offset(_widen(coord) if self.wide else coord, self._layout)
        return self.with_layout(kept, offset, divisibility(coord, self._layout.shape, self._layout.stride))

    # -- TensorSSA: whole tensors to and from registers ------------------------------------------
    def load(self):
        """All elements into a register value (a TensorSSA), vectorized up to 16 bytes."""
        from .tensor_ssa import TensorSSA
        b = ir.require("device", "Tensor.load")
        layout, offset = self._memory_operands("load")
        vector = f"vector<{size(self._layout)}x{storage_type(self.dtype)}>"
        value = b.op(f"cute.load {self.ptr.name}[{offset.ir.name}] {self._memory_attrs(layout)} : "
                     f"{self.ptr.type}, {offset.ir.type} -> {vector}", vector)
        return TensorSSA(value, self.dtype, self.shape)

    def store(self, value) -> None:
        """Writes a TensorSSA (same number of elements, converted to this tensor's type) or a
        scalar (to every element)."""
        from .tensor_ssa import TensorSSA
        b = ir.require("device", "Tensor.store")
        n = size(self._layout)
        if not isinstance(value, TensorSSA):
            value = TensorSSA.full(n, value, self.dtype, self.shape)
        if value.count != n:
            raise DSLError(ARGUMENT_MISMATCH, f"storing {value.count} values into a tensor of {n} elements "
                           f"({self._layout})", user_location())
        if value.dtype is not self.dtype:
            value = value.to(self.dtype)
        layout, offset = self._memory_operands("store")
        b.emit(f"cute.store {value.ir.name}, {self.ptr.name}[{offset.ir.name}] {self._memory_attrs(layout)} : "
               f"{value.ir.type}, {self.ptr.type}, {offset.ir.type}")

    def fill(self, value) -> None:
        self.store(value)

    def _memory_operands(self, what: str):
        if not self._layout.is_static:
            raise DSLError(UNSUPPORTED_TYPE, f"Tensor.{what} needs a static layout, got {self._layout}",
                           user_location(),
                           "tile or partition the tensor first (local_tile, local_partition, zipped_divide)")
        index_t = Int64 if self.wide else Int32
        offset = self.offset if isinstance(self.offset, Numeric) else index_t(self.offset)
        return self._layout, convert(offset, index_t)

    def _memory_attrs(self, layout: Layout) -> str:
        div = self.divisibility if self.divisibility else 1 << 20
        attrs = [f'layout = "{layout}"', f"align = {self.alignment} : i64", f"divisibility = {div} : i64"]
        if self.swizzle is not None:
            sw = self.swizzle
            attrs.append(f"swizzle = array<i64: {sw.bits}, {sw.base}, {sw.shift}>")
        return "{" + ", ".join(attrs) + "}"

    # Kernel parameters: the pointer, then the dynamic leaves of shape and stride.
    def flatten(self) -> list[ir.Value]:
        t = self._folded()
        dynamic = [x for x in leaves(t.shape) + leaves(t.stride) if isinstance(x, Numeric)]
        return [t.ptr] + [x.ir for x in dynamic]

    def param_count(self) -> int:
        return 1 + sum(isinstance(x, Numeric) for x in leaves(self.shape) + leaves(self.stride))

    def _folded(self) -> "Tensor":
        """The pointer moved by the offset (kernel parameters carry no offset)."""
        if isinstance(self.offset, int) and self.offset == 0:
            return self
        if self.swizzle is not None:
            raise DSLError(ARGUMENT_MISMATCH, "a swizzled tensor cannot be passed to a kernel", user_location())
        b = ir.current()
        offset = self._offset_value(0)
        ptr_t = self.ptr.type
        ptr = b.op(f"llvm.getelementptr {self.ptr.name}[{offset.ir.name}] : ({ptr_t}, {offset.ir.type}) -> {ptr_t}, "
                   f"{storage_type(self.dtype)}", ptr_t)
        return Tensor(ptr, self.dtype, self._layout, self.memspace, _alignment_after(self), self.wide)

    def signature(self) -> tuple:
        t = self
        dyn_types = tuple((type(x).__name__, known_divisor(x)) for x in leaves(t.shape) + leaves(t.stride)
                          if isinstance(x, Numeric))
        return ("tensor", t.dtype.__name__, t.memspace, spell(t.shape), spell(t.stride), dyn_types,
                _alignment_after(t), t.wide)

    def rebuild(self, values: list[ir.Value]) -> "Tensor":
        """This tensor's structure over new SSA values (a kernel's block arguments)."""
        values = list(values)
        ptr = values.pop(0)
        new_leaves = []
        for x in leaves(self.shape) + leaves(self.stride):   # what cute.assume promised stays
            new_leaves.append(assume(type(x)._wrap(values.pop(0)), known_divisor(x)) if isinstance(x, Numeric) else x)
        n = len(leaves(self.shape))
        layout = Layout(rebuild(self.shape, new_leaves[:n]), rebuild(self.stride, new_leaves[n:]))
        return Tensor(ptr, self.dtype, layout, self.memspace, _alignment_after(self), self.wide)


def _element_shift(dtype, swizzle) -> int:
    """log2 of the element size, checking the swizzle moves whole elements (its base, a byte
    bit, at least that)."""
    shift = byte_width(dtype).bit_length() - 1
    if swizzle.bits and swizzle.base < shift:
        raise DSLError(ARGUMENT_MISMATCH, f"{swizzle} acts on byte addresses and would split {dtype.__name__} "
                       f"elements ({1 << shift} bytes)", user_location(),
                       f"use a swizzle base of at least {shift} (CuTe DSL's 128-byte swizzle is Sw<3,4,3>)")
    return shift


def _alignment_after(t: Tensor) -> int:
    """The pointer's alignment once the offset is folded into it."""
    if isinstance(t.offset, int) and t.offset == 0:
        return t.alignment
    step = (t.divisibility or (1 << 20)) * byte_width(t.dtype)
    return math.gcd(t.alignment, step & -step)


def _has_hole(coord) -> bool:
    if coord is None:
        return True
    return isinstance(coord, tuple) and any(_has_hole(c) for c in coord)


def domain_offset(coord, tensor: Tensor) -> Tensor:
    """The tensor whose origin is `coord` of `tensor`: the same layout, the offset moved by
    layout(coord) (CuTe's domain_offset)."""
    offset = tensor.offset_at(tensor._layout, coord)
    return tensor.with_layout(tensor._layout, offset, divisibility(coord, tensor.shape, tensor.stride))


def make_tensor(iterator, layout) -> Tensor:
    """A tensor of `layout` over the memory at `iterator` (a cute.Pointer; a tensor means its
    iterator)."""
    if isinstance(iterator, Tensor):
        iterator = iterator.iterator
    if not isinstance(iterator, Pointer):
        raise DSLError(ARGUMENT_MISMATCH, f"make_tensor takes a cute.Pointer (a tensor's .iterator), got "
                       f"{type(iterator).__name__}", user_location())
    base = Tensor(iterator.value, iterator.dtype, Layout(1, 0), iterator.memspace, iterator.alignment, iterator.wide)
    if isinstance(layout, ComposedLayout):  # its offset is relative to the iterator
        t = base.with_layout(layout.outer, layout.offset, layout.offset if isinstance(layout.offset, int) else 1)
        t.swizzle = layout.inner
        return t
    if not isinstance(layout, Layout):
        layout = make_layout(layout)
    return base.with_layout(layout)


def make_rmem_tensor(layout_or_shape, dtype: type[Numeric]) -> Tensor:
    """A register tensor (CuTe's fragment): stack memory the compiler keeps in registers when
    every index is static."""
    b = ir.require("device", "make_rmem_tensor")
    layout = layout_or_shape if isinstance(layout_or_shape, Layout) else make_layout(layout_or_shape)
    if not layout.is_static:
        raise DSLError(UNSUPPORTED_TYPE, f"register tensors need a static layout, got {layout}", user_location())
    count = b.entry_op(f"llvm.mlir.constant({layout.cosize()} : i32) : i32", "i32")
    ptr = b.entry_op(f"llvm.alloca {count.name} x {storage_type(dtype)} {{alignment = 16 : i64}} : (i32) -> !llvm.ptr",
                     "!llvm.ptr")
    return Tensor(ptr, dtype, layout, "rmem", 16)


def make_rmem_tensor_like(t, dtype: type[Numeric] | None = None) -> Tensor:
    """A register tensor with `t`'s shape (compact), of `t`'s element type unless `dtype`."""
    from .tensor_ssa import TensorSSA
    shape = t.shape
    elem = dtype or (t.dtype if isinstance(t, (Tensor, TensorSSA)) else None)
    return make_rmem_tensor(make_layout(shape), elem)


make_fragment = make_rmem_tensor
make_fragment_like = make_rmem_tensor_like


# -- host side: tensors passed to @cute.jit -----------------------------------------------------------

_DTYPES: dict = {}


def numeric_of_torch_dtype(dtype) -> type[Numeric]:
    found = _DTYPES.get(dtype)
    if found is None:
        name = str(dtype).replace("torch.", "")
        found = BY_TORCH_NAME.get(name)
        if found is None:
            supported = ", ".join(sorted(BY_TORCH_NAME))
            raise DSLError(ARGUMENT_MISMATCH, f"tensors of dtype {dtype} are not supported", user_location(),
                           f"supported dtypes: {supported}")
        _DTYPES[dtype] = found
    return found


class TensorArg:
    """A tensor handed to a @cute.jit function, and which of its parts are compile-time."""

    def __init__(self, tensor, assumed_align: int | None = None):
        torch = loaded_torch()
        if torch is not None and not isinstance(tensor, torch.Tensor) and hasattr(tensor, "__dlpack__"):
            tensor = torch.from_dlpack(tensor)
        self.tensor = tensor
        self.dtype = numeric_of_torch_dtype(tensor.dtype)
        self.shape = tuple(tensor.shape)
        self.stride = tuple(tensor.stride())
        self.device = tensor.get_device() if tensor.is_cuda else -1
        element = byte_width(self.dtype)
        ptr = tensor.data_ptr()
        self.alignment = assumed_align or (16 if ptr % 16 == 0 else element)
        if ptr % self.alignment:
            raise DSLError(ARGUMENT_MISMATCH, f"assumed_align={self.alignment} but the data pointer is only "
                           f"{ptr & -ptr}-byte aligned", user_location())
        self.dynamic_shape: set[int] = set()
        self.dynamic_stride: set[int] = set()
        self._wide: bool | None = None

    @classmethod
    def describe(cls, dtype: type[Numeric], shape: tuple, stride: tuple, alignment: int, device: int,
                 wide: bool = False) -> "TensorArg":
        """A tensor argument without a tensor, to compile for one (e.g. from C++ descriptions);
        `wide` asks for 64-bit offsets."""
        arg = cls.__new__(cls)
        arg.tensor, arg.dtype, arg.shape, arg.stride = None, dtype, tuple(shape), tuple(stride)
        arg.device, arg.alignment, arg._wide = device, alignment, wide
        arg.dynamic_shape, arg.dynamic_stride = set(), set()
        return arg

    def data_ptr(self) -> int:
        return self.tensor.data_ptr()

    def mark_layout_dynamic(self, leading_dim: int | None = None, keep_broadcast: bool = False) -> "TensorArg":
        """Shape and strides become run-time values, except the unit stride of `leading_dim`
        (found automatically when omitted). With `keep_broadcast` (a cute_torch extension),
        modes of stride 0 (an `expand`ed view) keep their static 0: the kernel is specialized
        for the broadcast and reads each distinct element once where the code lets it."""
        if leading_dim is None:
            units = [i for i, s in enumerate(self.stride) if s == 1 and self.shape[i] != 1]
            leading_dim = units[0] if len(units) == 1 else None
        elif self.stride[leading_dim] != 1:
            raise DSLError(ARGUMENT_MISMATCH, f"leading_dim={leading_dim} has stride {self.stride[leading_dim]}, not 1",
                           user_location())
        self.dynamic_shape = set(range(len(self.shape)))
        self.dynamic_stride = {i for i in range(len(self.shape))
                               if i != leading_dim and not (keep_broadcast and self.stride[i] == 0)}
        return self

    def mark_compact_shape_dynamic(self, mode: int, stride_order: Sequence[int] | None = None,
                                   divisibility: int = 1) -> "TensorArg":
        """Mode `mode`'s extent becomes a run-time value, with the strides that depend on it."""
        if not 0 <= mode < len(self.shape):
            raise DSLError(ARGUMENT_MISMATCH, f"mode {mode} out of range for a rank-{len(self.shape)} tensor",
                           user_location())
        if self.shape[mode] % divisibility:
            raise DSLError(ARGUMENT_MISMATCH, f"extent {self.shape[mode]} of mode {mode} is not divisible by "
                           f"{divisibility}", user_location())
        order = list(stride_order) if stride_order is not None else sorted(range(len(self.shape)),
                                                                            key=lambda i: self.stride[i])
        self.dynamic_shape.add(mode)
        self.dynamic_stride |= set(order[order.index(mode) + 1:])
        return self

    @property
    def wide(self) -> bool:
        return self._wide if self._wide is not None else _needs_64bit(self.shape, self.stride)

    def key(self, kind: int) -> TensorKey:
        shape = tuple(None if i in self.dynamic_shape else s for i, s in enumerate(self.shape))
        stride = tuple(None if i in self.dynamic_stride else s for i, s in enumerate(self.stride))
        return TensorKey(kind, "T", self.dtype, shape, stride, self.alignment, self.device, self.wide)

    def dynamic_values(self) -> list[int]:
        return ([s for i, s in enumerate(self.shape) if i in self.dynamic_shape]
                + [s for i, s in enumerate(self.stride) if i in self.dynamic_stride])


def _needs_64bit(shape, stride) -> bool:
    """Whether offsets can reach 2**31 elements. A cheap bound first (the hot path of every
    call computes this), the exact extent only near the limit."""
    if not shape:
        return False
    if max(shape) * max(max(stride), 1) * len(shape) < 2**31:
        return False
    extent = 1 + sum((s - 1) * abs(d) for s, d in zip(shape, stride) if s > 0)
    return extent >= 2**31 or any(s >= 2**31 for s in shape)


TENSOR = 0  # the argument kind tag (jit.TENSOR) that leads a tensor's key


class TensorKey(NamedTuple):
    """A tensor argument's specialization key. The hot path (tensor_key, once per tensor per
    call) builds it as a plain tuple of these fields, three times faster than a NamedTuple and
    equal to one in hash and comparison; code off the hot path reads it by name through
    `TensorKey._make(key)`."""
    kind: int  # jit.TENSOR (a torch tensor) or jit.TENSOR_ARG (a TensorArg)
    tag: str  # "T"
    dtype: type
    shape: tuple  # None where the extent is a run-time value
    stride: tuple  # None where the stride is a run-time value
    alignment: int  # bytes
    device: int  # -1: CPU
    wide: bool  # 64-bit offsets


def tensor_key(t) -> tuple:
    """The specialization key of a torch tensor passed directly (everything compile-time): a
    TensorKey as a plain tuple."""
    ptr = t.data_ptr()
    shape = t.shape
    stride = t.stride()
    dtype = _DTYPES.get(t.dtype) or numeric_of_torch_dtype(t.dtype)
    # Contiguous tensors span exactly numel elements: no need for the general extent.
    wide = t.numel() >= 2**31 if t.is_contiguous() else _needs_64bit(shape, stride)
    return (TENSOR, "T", dtype, shape, stride, 16 if not ptr & 15 else byte_width(dtype), t.get_device(), wide)


def from_dlpack(tensor, assumed_align: int | None = None) -> TensorArg:
    """CuTe DSL's entry for tensors: a description whose layout can be marked dynamic."""
    return TensorArg(tensor, assumed_align)


def tensor_from_key(key: TensorKey, values: list[ir.Value]) -> Tensor:
    """The DSL tensor a jit function sees for an argument with this key: compile-time parts as
    Python ints, run-time ones from `values` (pointer first)."""
    index_t = Int64 if key.wide else Int32
    values = list(values)
    ptr = values.pop(0)
    shape = tuple(index_t._wrap(values.pop(0)) if s is None else s for s in key.shape)
    stride = tuple(index_t._wrap(values.pop(0)) if s is None else s for s in key.stride)
    return Tensor(ptr, key.dtype, Layout(shape, stride), "gmem", key.alignment, key.wide)


def tensor_param_types(key: TensorKey) -> list[str]:
    index = "i64" if key.wide else "i32"
    return ["!llvm.ptr<1>"] + [index for s in key.shape + key.stride if s is None]
