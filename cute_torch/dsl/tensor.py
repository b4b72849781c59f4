"""Layouts and tensors.

A `Layout` maps coordinates to offsets through (possibly nested) shape and stride tuples whose
leaves are Python ints (compile-time) or DSL integers (run-time). A DSL `Tensor` is a pointer
plus a layout; `t[i, j]` loads and `t[i, j] = v` stores through it. `TensorArg` is the host-side
description of a torch tensor (or any DLPack producer) passed to a @cute.jit function: what is
compile-time (by default everything: shape, strides, dtype, 16-byte alignment) and what is a
run-time value (`mark_layout_dynamic`, `mark_compact_shape_dynamic`).
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, WRONG_CONTEXT, DSLError, user_location
from ..launch import loaded_torch
from .numeric import (BY_TORCH_NAME, Boolean, Int32, Int64, Numeric, as_numeric, convert, promote)

IntTuple = Any  # int | Numeric | tuple[IntTuple, ...]


# -- int tuples -----------------------------------------------------------------------------------

def _is_tuple(x) -> bool:
    return isinstance(x, tuple)


def _product(x: IntTuple):
    if _is_tuple(x):
        result = 1
        for e in x:
            result = result * _product(e)
        return result
    return x


def _spell(x: IntTuple) -> str:
    if _is_tuple(x):
        return "(" + ",".join(_spell(e) for e in x) + ")"
    return "?" if isinstance(x, Numeric) else str(x)


def _leaves(x: IntTuple) -> list:
    return [leaf for e in x for leaf in _leaves(e)] if _is_tuple(x) else [x]


def _rebuild(template: IntTuple, leaves: list) -> IntTuple:
    """`template`'s structure with its leaves taken in order from `leaves`."""
    if _is_tuple(template):
        return tuple(_rebuild(e, leaves) for e in template)
    return leaves.pop(0)


def _idx_div(a, b):
    """a // b for non-negative index math: Python ints fold, DSL values emit plain divsi."""
    if isinstance(a, Numeric) or isinstance(b, Numeric):
        a, b = _same(a, b)
        return type(a).wrap_op(f"arith.divsi {a.ir.name}, {b.ir.name} : {a.ir.type}")
    return a // b


def _idx_mod(a, b):
    if isinstance(a, Numeric) or isinstance(b, Numeric):
        a, b = _same(a, b)
        return type(a).wrap_op(f"arith.remsi {a.ir.name}, {b.ir.name} : {a.ir.type}")
    return a % b


def _same(a, b):
    t = promote(type(a) if isinstance(a, Numeric) else Int32, type(b) if isinstance(b, Numeric) else Int32)
    return convert(a, t), convert(b, t)


def _add(a, b):
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


def crd2idx(coord, shape: IntTuple, stride: IntTuple):
    """CuTe's crd2idx: a tuple coordinate maps mode by mode; an integer coordinate into a tuple
    shape is split colexicographically (first mode fastest)."""
    if _is_tuple(coord):
        if not _is_tuple(shape) or len(coord) != len(shape):
            raise DSLError(ARGUMENT_MISMATCH, f"coordinate of rank {len(coord)} for a layout of shape {_spell(shape)}",
                           user_location(), "give one index per mode, or a single linear index")
        result = 0
        for c, s, d in zip(coord, shape, stride):
            result = _add(result, crd2idx(c, s, d))
        return result
    if _is_tuple(shape):
        result = 0
        for i, (s, d) in enumerate(zip(shape, stride)):
            if i == len(shape) - 1:
                result = _add(result, crd2idx(coord, s, d))
            else:
                size = _product(s)
                result = _add(result, crd2idx(_idx_mod(coord, size), s, d))
                coord = _idx_div(coord, size)
        return result
    if isinstance(coord, int) and coord == 0:
        return 0
    if isinstance(stride, int) and stride == 1:
        return coord
    return coord * stride


def compact_col_major(shape: IntTuple, current=1) -> IntTuple:
    if _is_tuple(shape):
        strides = []
        for s in shape:
            strides.append(compact_col_major(s, current))
            current = current * _product(s)
        return tuple(strides)
    return current


def _widen(coord):
    if _is_tuple(coord):
        return tuple(_widen(c) for c in coord)
    return convert(coord, Int64) if isinstance(coord, Numeric) else coord


class Layout:
    """`shape:stride`, printed in CuTe's notation, e.g. `(4,8):(1,4)`. Callable on coordinates."""

    __slots__ = ("shape", "stride")

    def __init__(self, shape: IntTuple, stride: IntTuple):
        self.shape, self.stride = shape, stride

    def __call__(self, *coord):
        return crd2idx(coord[0] if len(coord) == 1 else coord, self.shape, self.stride)

    def __str__(self) -> str:
        return f"{_spell(self.shape)}:{_spell(self.stride)}"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and str(self) == str(other) and not self.is_dynamic

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def is_dynamic(self) -> bool:
        return any(isinstance(x, Numeric) for x in _leaves(self.shape) + _leaves(self.stride))

    def size(self):
        return _product(self.shape)

    def cosize(self):
        leaves = list(zip(_leaves(self.shape), _leaves(self.stride)))
        result = 1
        for s, d in leaves:
            result = result + (s - 1) * d
        return result

    def __len__(self) -> int:
        return len(self.shape) if _is_tuple(self.shape) else 1


def make_layout(shape: IntTuple, *, stride: IntTuple | None = None) -> Layout:
    """A layout; without `stride`, compact column-major (CuTe's default)."""
    return Layout(shape, compact_col_major(shape) if stride is None else stride)


def size(x, mode: Sequence[int] | None = None):
    """The number of elements of a tensor, layout or shape (a Python int when static)."""
    if isinstance(x, Tensor):
        x = x.layout
    shape = x.shape if isinstance(x, Layout) else x
    if mode is not None:
        for m in mode:
            shape = shape[m]
    return _product(shape)


# -- DSL tensors ----------------------------------------------------------------------------------

_STORAGE = {Boolean: "i8"}


def storage_type(dtype: type[Numeric]) -> str:
    return _STORAGE.get(dtype, dtype.mlir)


def byte_width(dtype: type[Numeric]) -> int:
    return 1 if dtype is Boolean else max(1, dtype.width // 8)


class Tensor:
    """A pointer and a layout. `wide` tensors (2**31 elements or more) use 64-bit offsets."""

    def __init__(self, ptr: ir.Value, dtype: type[Numeric], layout: Layout, memspace: str = "gmem",
                 alignment: int = 1, wide: bool = False):
        self.ptr, self.dtype, self._layout = ptr, dtype, layout
        self.memspace, self.alignment, self.wide = memspace, alignment, wide

    @property
    def layout(self) -> Layout:
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

    def __str__(self) -> str:
        return f"tensor<{self.memspace} {self.dtype.__name__} o {self._layout}>"

    __repr__ = __str__

    def _address(self, coord) -> ir.Value:
        b = ir.require("device", "reading or writing tensor elements")
        if self.memspace == "gmem" and b.kind != "device":
            raise DSLError(WRONG_CONTEXT, "tensor elements can only be accessed in device code", user_location())
        index_t = Int64 if self.wide else Int32
        if self.wide:  # multiply in 64 bits, not just the final sum
            coord = _widen(coord)
        offset = self._layout(coord)
        if not isinstance(offset, Numeric):
            offset = index_t(offset)
        elif type(offset).is_float:
            raise DSLError(UNSUPPORTED_TYPE, f"tensor indices must be integers, got {type(offset).__name__}",
                           user_location())
        elif type(offset).width < index_t.width or not type(offset).signed:
            offset = convert(offset, index_t)
        ptr_t = self.ptr.type
        return b.op(f"llvm.getelementptr {self.ptr.name}[{offset.ir.name}] : ({ptr_t}, {offset.ir.type}) -> {ptr_t}, "
                    f"{storage_type(self.dtype)}", ptr_t)

    def __getitem__(self, coord):
        address = self._address(coord)
        b = ir.current()
        raw = b.op(f"llvm.load {address.name} : {address.type} -> {storage_type(self.dtype)}",
                   storage_type(self.dtype))
        if self.dtype is Boolean:
            return Boolean.wrap_op(f"arith.trunci {raw.name} : i8 to i1")
        return self.dtype._wrap(raw)

    def __setitem__(self, coord, value) -> None:
        address = self._address(coord)
        b = ir.current()
        v = convert(as_numeric(value, self.dtype), self.dtype)
        raw = v.ir
        if self.dtype is Boolean:
            raw = b.op(f"arith.extui {raw.name} : i1 to i8", "i8")
        b.emit(f"llvm.store {raw.name}, {address.name} : {raw.type}, {address.type}")

    # Kernel parameters: the pointer, then the dynamic leaves of shape and stride.
    def flatten(self) -> list[ir.Value]:
        dynamic = [x for x in _leaves(self.shape) + _leaves(self.stride) if isinstance(x, Numeric)]
        return [self.ptr] + [x.ir for x in dynamic]

    def signature(self) -> tuple:
        static = lambda x: _spell(x)  # noqa: E731 - '?' marks a run-time leaf
        dyn_types = tuple(type(x).__name__ for x in _leaves(self.shape) + _leaves(self.stride)
                          if isinstance(x, Numeric))
        return ("tensor", self.dtype.__name__, self.memspace, static(self.shape), static(self.stride), dyn_types,
                self.alignment, self.wide)

    def rebuild(self, values: list[ir.Value]) -> "Tensor":
        """This tensor's structure over new SSA values (a kernel's block arguments)."""
        values = list(values)
        ptr = values.pop(0)
        leaves = []
        for x in _leaves(self.shape) + _leaves(self.stride):
            leaves.append(type(x)._wrap(values.pop(0)) if isinstance(x, Numeric) else x)
        n = len(_leaves(self.shape))
        layout = Layout(_rebuild(self.shape, leaves[:n]), _rebuild(self.stride, leaves[n:]))
        return Tensor(ptr, self.dtype, layout, self.memspace, self.alignment, self.wide)


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

    def data_ptr(self) -> int:
        return self.tensor.data_ptr()

    def mark_layout_dynamic(self, leading_dim: int | None = None) -> "TensorArg":
        """Shape and strides become run-time values, except the unit stride of `leading_dim`
        (found automatically when omitted)."""
        if leading_dim is None:
            units = [i for i, s in enumerate(self.stride) if s == 1 and self.shape[i] != 1]
            leading_dim = units[0] if len(units) == 1 else None
        elif self.stride[leading_dim] != 1:
            raise DSLError(ARGUMENT_MISMATCH, f"leading_dim={leading_dim} has stride {self.stride[leading_dim]}, not 1",
                           user_location())
        self.dynamic_shape = set(range(len(self.shape)))
        self.dynamic_stride = {i for i in range(len(self.shape)) if i != leading_dim}
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
        return _needs_64bit(self.shape, self.stride)

    def key(self, kind: int) -> tuple:
        shape = tuple(None if i in self.dynamic_shape else s for i, s in enumerate(self.shape))
        stride = tuple(None if i in self.dynamic_stride else s for i, s in enumerate(self.stride))
        return (kind, "T", self.dtype, shape, stride, self.alignment, self.device, self.wide)

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


def tensor_key(t) -> tuple:
    """The specialization key of a torch tensor passed directly (everything compile-time):
    (kind, "T", dtype, shape, strides, alignment, device, wide)."""
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


def tensor_from_key(key: tuple, values: list[ir.Value]) -> Tensor:
    """The DSL tensor a jit function sees for an argument with this key: compile-time parts as
    Python ints, run-time ones from `values` (pointer first)."""
    _, dtype, shape, stride, alignment, _device, wide = key
    index_t = Int64 if wide else Int32
    values = list(values)
    ptr = values.pop(0)
    shape = tuple(index_t._wrap(values.pop(0)) if s is None else s for s in shape)
    stride = tuple(index_t._wrap(values.pop(0)) if s is None else s for s in stride)
    return Tensor(ptr, dtype, Layout(shape, stride), "gmem", alignment, wide)


def tensor_param_types(key: tuple) -> list[str]:
    _, _dtype, shape, stride, _alignment, _device, wide = key
    index = "i64" if wide else "i32"
    return ["!llvm.ptr<1>"] + [index for s in shape + stride if s is None]
