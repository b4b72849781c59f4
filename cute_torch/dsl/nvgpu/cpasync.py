"""`cute.nvgpu.cpasync`: the Tensor Memory Accelerator (TMA, sm_90), bulk tensor copies between
global and shared memory that one thread issues and an mbarrier (loads) or a bulk group
(stores) tracks.

On the host, in a @cute.jit function:

    op = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
    tma_atom, tma_tensor = cute.nvgpu.cpasync.make_tiled_tma_atom(op, a, a_smem_layout, (128, 64))

builds the TMA descriptor (a CUtensorMap, by the CUDA driver, at every call: the tensor's
address is a run-time value) and passes it to the kernel as a `__grid_constant__` parameter.
`tma_tensor` is the coordinate tensor of `a` (cute.make_identity_tensor of its shape): tiled
and sliced like `a`, it tells the copy which box to fetch. In the kernel:

    cute.copy(tma_atom, tma_tile, smem_stage, tma_bar_ptr=full_barrier)

The descriptor's box is the shared-memory tile (`smem_layout`, one stage): the DSL checks the
tile is the box laid out innermost-dimension-first (the order TMA writes), reads the swizzle
mode off its swizzle (Sw<1|2|3,4,3> = 32/64/128-byte), and takes the dimension of stride 1 as
the innermost. Out-of-bounds elements of a box read as zero and are not written by a store.

A tile wider than one swizzle row along the contiguous dimension (an MN-major operand 256
elements wide, a K tile of 128 with 128-byte swizzling) is several boxes side by side: one
descriptor, and a copy issues one TMA instruction per box (size_in_bytes counts them all).

Multicast (sm_90 clusters): `make_tiled_tma_atom(CopyBulkTensorTileG2SMulticastOp(), ...,
num_multicast=n)` splits the tile along its outermost non-contiguous mode into n slices;
`tma_partition(atom, rank_in_group, make_layout(n), s, g)` points a CTA at its slice, and
`cute.copy(atom, g, s, tma_bar_ptr=, mcast_mask=)` writes that slice into the shared memory of
every CTA in the mask (completing each one's mbarrier at the same offset). `size_in_bytes` is
what lands in one CTA: the whole tile.

Differences from CuTe DSL: no im2col; a tensor mode must be a single extent:stride (no nested
modes).
"""

from __future__ import annotations

import enum

from .. import ir
from ..diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from ..identity import IdentityTensor, make_identity_tensor
from ..int_tuple import is_tuple, leaves
from ..layout import ComposedLayout, Layout, Swizzle, coalesce, logical_divide, make_layout, size, slice_and_offset
from ..numeric import (BFloat16, Float8E4M3FN, Float8E5M2, Float16, Float32, Float64, Int8, Int16, Int32, Int64,
                       Integer, Numeric, Uint8, as_numeric, convert)
from ..pointer import byte_width, shared_pointer
from ..tensor import Tensor, domain_offset
from ..tiled_copy import CopyBulkG2SOp, CopyG2SOp, LoadCacheMode  # noqa: F401 - cp.async lives in this namespace in CuTe DSL

# CUtensorMapDataType (cuda.h) by element type (fp8 moves as UINT8: TMA copies bytes).
_TMA_DTYPE = {Uint8: 0, Int8: 0, Float8E4M3FN: 0, Float8E5M2: 0, Int32: 3, Int64: 5, Float16: 6, Float32: 7,
              Float64: 8, BFloat16: 9}
# CUtensorMapSwizzle by Swizzle bits (Sw<b,4,3>: 16 << b bytes).
_TMA_SWIZZLE = {0: 0, 1: 1, 2: 2, 3: 3}
ENCODE_SYMBOL = "cute_rt_encode_tma"


class CopyBulkTensorTileG2SOp:
    """A TMA load: a box of global memory into shared memory, completing on an mbarrier."""

    direction = "G2S"

    def __init__(self, cta_group=None):
        self.cta_group = cta_group


class CopyBulkTensorTileG2SMulticastOp:
    """A TMA load whose box lands in the shared memory (and completes the mbarrier) of every
    CTA of the cluster in `mcast_mask`: each of `num_multicast` CTAs loads one slice of the tile
    for all of them (tma_partition picks the slice)."""

    direction = "G2S"

    def __init__(self, cta_group=None):
        self.cta_group = cta_group


class CopyBulkTensorTileS2GOp:
    """A TMA store: a shared-memory tile out to a box of global memory (a bulk group)."""

    direction = "S2G"


class TmaAtom:
    """A TMA descriptor and what the copies need to know about it: the element type, the
    tensor modes in the descriptor's dimension order, the box and its bytes."""

    __kernel_leaf__ = True

    def __init__(self, op, desc: ir.Value, dtype, order: tuple, box: tuple, smem_layout, pieces: tuple = ((0, 0),),
                 multicast: tuple = (1, 0, 0)):
        self.op, self.desc, self.dtype, self.order, self.box = op, desc, dtype, order, box
        self.smem_layout, self.pieces = smem_layout, pieces
        self.num_multicast, self.split_mode, self.slice_extent = multicast

    @property
    def size_in_bytes(self) -> int:
        """Bytes that land in one CTA's shared memory per tile (the transaction count its
        mbarrier expects): every box of the tile; with multicast, every CTA's slice."""
        n = len(self.pieces) * self.num_multicast
        for b in self.box:
            n *= b
        return n * byte_width(self.dtype)

    def __str__(self) -> str:
        return f"tma_atom<{self.op.direction} {self.dtype.__name__} box {self.box} dims {self.order}>"

    __repr__ = __str__

    # A kernel parameter: the 128-byte descriptor, by value, __grid_constant__.
    def signature(self) -> tuple:
        return ("tma", type(self.op).__name__, self.dtype.__name__, self.order, self.box, str(self.smem_layout),
                self.pieces, (self.num_multicast, self.split_mode, self.slice_extent))

    def flatten(self) -> list[ir.Value]:
        return [self.desc]

    def param_count(self) -> int:
        return 1

    def param_attrs(self) -> list[str]:
        return ["grid_constant"]  # the kernel lists it in cute.grid_constant (csrc/compiler/lib/GridConstant.cpp)

    def rebuild(self, values: list[ir.Value]) -> "TmaAtom":
        return TmaAtom(self.op, values[0], self.dtype, self.order, self.box, self.smem_layout, self.pieces,
                       (self.num_multicast, self.split_mode, self.slice_extent))


def make_tiled_tma_atom(op, tensor: Tensor, smem_layout, cta_tiler, num_multicast: int = 1):
    """(tma_atom, tma_tensor) for copies of `cta_tiler`-shaped tiles of `tensor` between global
    memory and shared memory laid out as `smem_layout` (one stage). Host code only."""
    b = ir.require("host", "make_tiled_tma_atom")
    if not isinstance(op, (CopyBulkTensorTileG2SOp, CopyBulkTensorTileG2SMulticastOp, CopyBulkTensorTileS2GOp)):
        raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_tma_atom takes CopyBulkTensorTileG2SOp, "
                       f"CopyBulkTensorTileG2SMulticastOp or CopyBulkTensorTileS2GOp, got {type(op).__name__}",
                       user_location())
    if not isinstance(num_multicast, int) or num_multicast < 1 or (
            num_multicast > 1 and not isinstance(op, CopyBulkTensorTileG2SMulticastOp)):
        raise DSLError(ARGUMENT_MISMATCH, f"num_multicast={num_multicast!r}: a positive int, above 1 only with "
                       "CopyBulkTensorTileG2SMulticastOp", user_location())
    if not isinstance(tensor, Tensor) or tensor.memspace != "gmem":
        raise DSLError(ARGUMENT_MISMATCH, "make_tiled_tma_atom takes a global-memory tensor (a @cute.jit argument)",
                       user_location())
    dtype = tensor.dtype
    if dtype not in _TMA_DTYPE:
        raise DSLError(UNSUPPORTED_TYPE, f"TMA has no {dtype.__name__} elements", user_location())
    shape, stride = tensor.shape, tensor.stride
    modes = list(zip(shape, stride)) if is_tuple(shape) else [(shape, stride)]
    if any(is_tuple(s) for s, _ in modes) or not 1 <= len(modes) <= 5:
        raise DSLError(ARGUMENT_MISMATCH, f"a TMA tensor has 1 to 5 flat modes, got {tensor.layout}", user_location())
    tiler = tuple(cta_tiler) if isinstance(cta_tiler, (tuple, list)) else (cta_tiler,)
    if len(tiler) > len(modes) or not all(isinstance(t, int) and t > 0 for t in tiler):
        raise DSLError(ARGUMENT_MISMATCH, f"cta_tiler {cta_tiler} must be positive ints, at most one per mode of "
                       f"{tensor.layout}", user_location())
    box_by_mode = tiler + (1,) * (len(modes) - len(tiler))
    inner = [i for i, (_, d) in enumerate(modes) if isinstance(d, int) and d == 1]
    if not inner:
        raise DSLError(ARGUMENT_MISMATCH, f"TMA needs a mode of (compile-time) stride 1, got {tensor.layout}",
                       user_location(), "pass a tensor contiguous in one dimension, without mark_layout_dynamic "
                       "of that stride")
    order = (inner[0],) + tuple(i for i in range(len(modes)) if i != inner[0])
    smem_layout, tiler, box_by_mode, multicast = _multicast_slice(smem_layout, tiler, box_by_mode, order,
                                                                  num_multicast)
    swizzle_bits, piece, pieces = _check_smem_layout(smem_layout, box_by_mode, order, tiler, dtype)
    box = (piece,) + tuple(box_by_mode[i] for i in order[1:])
    elem = byte_width(dtype)
    if any(x > 256 for x in box):
        raise DSLError(ARGUMENT_MISMATCH, f"a TMA box extent is at most 256, got {box} (innermost first)",
                       user_location(), "tile by at most 256 per mode")
    if (box[0] * elem) % 16:
        raise DSLError(ARGUMENT_MISMATCH, f"a TMA box's inner extent must be a multiple of 16 bytes, got {box[0]} "
                       f"{dtype.__name__}", user_location())
    for i in order[1:]:
        d = modes[i][1]
        if isinstance(d, int) and (d * elem) % 16:
            raise DSLError(ARGUMENT_MISMATCH, f"TMA needs the strides of {tensor.layout} to be multiples of 16 bytes; "
                           f"mode {i} is {d * elem} bytes", user_location(), "pad the leading dimension")
    if tensor.alignment < 16:
        raise DSLError(ARGUMENT_MISMATCH, f"TMA needs a 16-byte aligned tensor, this one is {tensor.alignment}-byte "
                       "aligned", user_location())
    desc = _encode(b, tensor, modes, order, box, swizzle_bits)
    return TmaAtom(op, desc, dtype, order, box, smem_layout, pieces, multicast), make_identity_tensor(shape)


def _multicast_slice(smem_layout, tiler, box_by_mode, order, n: int):
    """For n-way multicast: (the shared layout, tiler and box of one CTA's slice, and
    (n, split mode, slice extent)). The tile is split along its outermost mode that is not the
    contiguous one; every slice must be the first one moved (checked), so one descriptor serves
    them all."""
    if n == 1:
        return smem_layout, tiler, box_by_mode, (1, 0, 0)
    split = max(i for i in range(len(tiler)) if i != order[0])
    if tiler[split] % n:
        raise DSLError(ARGUMENT_MISMATCH, f"a {n}-way multicast splits the tile {tiler} along mode {split}, whose "
                       f"extent {tiler[split]} is not a multiple of {n}", user_location())
    extent = tiler[split] // n
    swizzle, outer = (smem_layout.inner, smem_layout.outer) if isinstance(smem_layout, ComposedLayout) else \
        (None, smem_layout)
    divided = logical_divide(outer, tuple(extent if i == split else t for i, t in enumerate(tiler)))
    first = None
    for r in range(n):
        coord = tuple((None, r if i == split else 0) for i in range(len(tiler)))
        kept, offset = slice_and_offset(coord, divided)
        if first is None:
            first = kept
        elif coalesce(kept) != coalesce(first):
            raise DSLError(ARGUMENT_MISMATCH, f"slice {r} of the shared tile {smem_layout} for a {n}-way multicast "
                           f"is laid out as {kept}, slice 0 as {first}", user_location())
    sliced = ComposedLayout(swizzle, 0, first) if swizzle is not None else first
    tiler = tuple(extent if i == split else t for i, t in enumerate(tiler))
    box_by_mode = tuple(extent if i == split else t for i, t in enumerate(box_by_mode))
    return sliced, tiler, box_by_mode, (n, split, extent)


def _check_smem_layout(smem_layout, box_by_mode, order, tiler, dtype) -> tuple:
    """(swizzle bits, the box's inner extent, the boxes) of a shared tile made of TMA boxes.

    One box is written innermost dimension first. A swizzled box's inner extent fits the
    swizzle's row (32/64/128 bytes), so a wider tile (an MN-major operand 256 wide, a K tile of
    128) is several boxes side by side along the inner dimension: `pieces` holds, per box, its
    first inner coordinate and where it starts in the shared tile (elements); each must be the
    box laid out on its own, starting on a whole swizzle period."""
    swizzle, outer = None, smem_layout
    if isinstance(smem_layout, ComposedLayout):
        swizzle, outer = smem_layout.inner, smem_layout.outer
    if not isinstance(outer, Layout) or not outer.is_static:
        raise DSLError(ARGUMENT_MISMATCH, f"a TMA shared-memory layout is static, got {smem_layout}", user_location())
    elem, inner = byte_width(dtype), order[0]
    bits, span = 0, None
    if swizzle is not None:
        if not isinstance(swizzle, Swizzle) or swizzle.base != 4 or swizzle.shift != 3 or swizzle.bits not in (1, 2, 3):
            raise DSLError(ARGUMENT_MISMATCH, f"TMA swizzles are Sw<1|2|3,4,3> (32/64/128 bytes), got {swizzle}",
                           user_location())
        bits, span = swizzle.bits, 16 << swizzle.bits
    extent = box_by_mode[inner]
    piece = min(extent, span // elem) if span else min(extent, 256)
    if extent % piece:
        raise DSLError(ARGUMENT_MISMATCH, f"the tile's inner extent {extent} is not a multiple of the {piece} "
                       f"elements one TMA box holds", user_location())
    strides, step = [0] * len(box_by_mode), 1
    for i in order:
        strides[i] = step
        step *= piece if i == inner else box_by_mode[i]
    piece_tiler = tuple(piece if i == inner else t for i, t in enumerate(tiler))
    want = Layout(piece_tiler, tuple(strides[: len(tiler)]))
    if size(outer) != size(Layout(tuple(tiler), tuple(strides[: len(tiler)]))):
        raise DSLError(ARGUMENT_MISMATCH, f"the shared-memory tile {smem_layout} does not have the {tiler} tile's "
                       "size", user_location())
    divided = logical_divide(outer, piece_tiler)          # mode i -> (box extent, boxes along it)
    period = 8 * span if span else 128
    pieces = []
    for p in range(extent // piece):
        coord = tuple((None, p if i == inner else 0) for i in range(len(tiler)))
        kept, offset = slice_and_offset(coord, divided)
        if coalesce(kept) != coalesce(want) or (offset * elem) % period:
            raise DSLError(ARGUMENT_MISMATCH, f"the shared-memory tile {smem_layout} is not made of TMA boxes {want}"
                           f" (box {p} is {kept} at element {offset}; each box is written innermost dimension first "
                           f"and starts on a {period}-byte boundary)", user_location(),
                           "build the shared layout with the tensor's contiguous mode innermost, and tile the swizzle "
                           "atom along the other modes first (tile_to_shape's order)")
        pieces.append((p * piece, offset))
    return bits, piece, tuple(pieces)


def _encode(b: ir.FunctionBuilder, tensor: Tensor, modes, order, box, swizzle_bits) -> ir.Value:
    """Host code: fill the dims/strides/box arrays, call the runtime's encoder into a 64-byte
    aligned 128-byte buffer, and hand that buffer to the launch."""
    module = b.module
    module.host_declarations.add(f"llvm.func @{ENCODE_SYMBOL}(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, "
                                 f"!llvm.ptr, i32) -> i32")
    one = b.entry_op("llvm.mlir.constant(1 : i64) : i64", "i64")
    desc = b.entry_op(f"llvm.alloca {one.name} x !llvm.array<16 x i64> {{alignment = 64 : i64}} : (i64) -> !llvm.ptr",
                      "!llvm.ptr")
    elem = byte_width(tensor.dtype)
    dims = _array(b, "i64", [convert(_num(modes[i][0], Int64), Int64) for i in order])
    strides = _array(b, "i64", [convert(_num(modes[i][1], Int64), Int64) * elem for i in order[1:]] or [Int64(0)])
    boxes = _array(b, "i32", [Int32(x) for x in box])
    base = tensor._folded().ptr
    if base.type != "!llvm.ptr":
        base = b.op(f"llvm.addrspacecast {base.name} : {base.type} to !llvm.ptr", "!llvm.ptr")
    args = [desc.name, Int32(_TMA_DTYPE[tensor.dtype]).ir.name, Int32(len(order)).ir.name, base.name,
            dims.name, strides.name, boxes.name, Int32(_TMA_SWIZZLE[swizzle_bits]).ir.name]
    b.op(f"llvm.call @{ENCODE_SYMBOL}({', '.join(args)}) : (!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, "
         f"!llvm.ptr, i32) -> i32", "i32")
    return desc


def _num(x, t) -> Numeric:
    return x if isinstance(x, Numeric) else t(x)


def _array(b: ir.FunctionBuilder, elem: str, values: list) -> ir.Value:
    count = b.entry_op(f"llvm.mlir.constant({len(values)} : i64) : i64", "i64")
    ptr = b.entry_op(f"llvm.alloca {count.name} x {elem} {{alignment = 8 : i64}} : (i64) -> !llvm.ptr", "!llvm.ptr")
    for i, v in enumerate(values):
        slot = b.op(f"llvm.getelementptr {ptr.name}[{i}] : (!llvm.ptr) -> !llvm.ptr, {elem}", "!llvm.ptr")
        b.emit(f"llvm.store {v.ir.name}, {slot.name} : {elem}, !llvm.ptr")
    return ptr


# -- device side ------------------------------------------------------------------------------------

def tma_partition(atom: TmaAtom, cta_coord, cta_layout, smem_tensor: Tensor, gmem_tensor):
    """(smem, gmem) views for `atom`'s copies by the CTA at `cta_coord` of the `cta_layout` CTAs
    that share its tiles (CuTe DSL's tma_partition; the tensors have the tile's modes first,
    grouped or not). Without multicast both are returned as they are; with it, both start at
    this CTA's slice of the tile, which its copies then multicast to the others."""
    n = size(cta_layout if isinstance(cta_layout, Layout) else make_layout(cta_layout))
    if n != atom.num_multicast:
        raise DSLError(ARGUMENT_MISMATCH, f"tma_partition over {n} CTAs, but the atom was made with "
                       f"num_multicast={atom.num_multicast}", user_location())
    if n == 1:
        return smem_tensor, gmem_tensor
    return tuple(_at_slice(t, atom, cta_coord) for t in (smem_tensor, gmem_tensor))


def _at_slice(t: Tensor, atom: TmaAtom, cta_coord) -> Tensor:
    tile = tuple(cta_coord * atom.slice_extent if i == atom.split_mode else 0 for i in range(len(atom.box)))
    shape = t.shape if is_tuple(t.shape) else (t.shape,)
    # Grouped: the tile's modes are mode 0, followed by the rest (stages, ...); told from a tile
    # mode that is itself nested (an MN-major operand's ((64, 4), 64)) by its size, the whole
    # tile. A shared tile may lack the box's trailing batch mode of 1: the coordinate covers
    # the tensor's own modes.
    if is_tuple(shape[0]) and size(shape[0]) * byte_width(atom.dtype) == atom.size_in_bytes:
        coord = (tile[:len(shape[0])],) + (0,) * (len(shape) - 1)
    else:
        coord = tile[:len(shape)] + (0,) * (len(shape) - len(tile))
    return domain_offset(coord if is_tuple(t.shape) else coord[0], t)


def prefetch_descriptor(atom: TmaAtom) -> None:
    """Brings the descriptor into the cache ahead of the first copy (one thread suffices)."""
    b = ir.require("device", "prefetch_descriptor")
    b.emit(f"nvvm.prefetch.tensormap {atom.desc.name} : !llvm.ptr")


def _box_coordinates(atom: TmaAtom, tile) -> list[ir.Value]:
    """The global coordinates of a tile's first element, in the descriptor's dimension order."""
    if not isinstance(tile, IdentityTensor):
        raise DSLError(ARGUMENT_MISMATCH, "a TMA copy's global side is a tile of the tma_tensor that "
                       f"make_tiled_tma_atom returned (coordinates), got {tile}", user_location())
    origin = tile.origin()
    coords = leaves(origin) if is_tuple(origin) else [origin]
    return [convert(_num(coords[i], Int32), Int32).ir for i in atom.order]


def _smem_address(tile: Tensor, what: str) -> ir.Value:
    if not isinstance(tile, Tensor) or tile.memspace != "smem":
        raise DSLError(ARGUMENT_MISMATCH, f"{what} takes a shared-memory tile, got {tile}", user_location())
    if isinstance(tile.offset, int) and tile.offset == 0:
        return tile.ptr
    return _offset_pointer(tile)


def _offset_pointer(tile: Tensor) -> ir.Value:
    """The tile's unswizzled start (a stage offset is a multiple of the swizzle's period)."""
    b = ir.current()
    offset = convert(_num(tile.offset, Int32), Int32)
    return b.op(f"llvm.getelementptr {tile.ptr.name}[{offset.ir.name}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, "
                f"{tile.dtype.mlir}", "!llvm.ptr<3>")


class CacheEvictionPriority(enum.Enum):
    """CuTe DSL's L2 eviction priorities for a TMA load's `cache_policy=`: the 64-bit cache
    policies CUTLASS's SM90 TMA copies pass with `.L2::cache_hint` (EVICT_FIRST for data read
    once, such as a GEMM's residual, so that it does not push the operands' tiles out of L2)."""
    EVICT_NORMAL = 0x1000000000000000
    EVICT_FIRST = 0x12F0000000000000
    EVICT_LAST = 0x14F0000000000000


def _cache_hint(cache_policy) -> str:
    """The load's `l2_cache_hint` operand text: a policy as a signed i64 (a run-time value too)."""
    if cache_policy is None:
        return ""
    value = cache_policy.value if isinstance(cache_policy, CacheEvictionPriority) else cache_policy
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64:
        policy = Int64(value - (1 << 64) if value >= 1 << 63 else value)
    elif isinstance(value, Integer):
        policy = convert(value, Int64)
    else:
        raise DSLError(ARGUMENT_MISMATCH, "cache_policy= takes a cute.nvgpu.CacheEvictionPriority or a 64-bit "
                       f"cache policy (an integer), got {cache_policy!r}", user_location())
    return f" l2_cache_hint = {policy.ir.name}"


def tma_copy(atom: TmaAtom, src, dst, tma_bar_ptr=None, mcast_mask=None, cache_policy=None) -> None:
    """cute.copy with a TMA atom: G2S needs `tma_bar_ptr` (the mbarrier that counts the bytes)
    and takes `cache_policy=` (a CacheEvictionPriority, or a 64-bit policy value) as an L2 hint;
    issue it from one thread."""
    b = ir.require("device", "a TMA copy")
    if cache_policy is not None and atom.op.direction != "G2S":
        raise DSLError(ARGUMENT_MISMATCH, "cache_policy= goes with a TMA load", user_location())
    multicast = isinstance(atom.op, CopyBulkTensorTileG2SMulticastOp)
    if (mcast_mask is not None) != multicast:
        raise DSLError(ARGUMENT_MISMATCH, "mcast_mask= goes with a CopyBulkTensorTileG2SMulticastOp atom, and such "
                       "an atom needs it (the CTAs of the cluster that receive the box)", user_location())
    if atom.op.direction == "G2S":
        if tma_bar_ptr is None:
            raise DSLError(ARGUMENT_MISMATCH, "a TMA load needs tma_bar_ptr= (the mbarrier it completes)",
                           user_location())
        bar = shared_pointer(tma_bar_ptr, "a TMA load's tma_bar_ptr").value
        origin, base = _box_coordinates(atom, src), _smem_address(dst, "a TMA load")
        mask = ""
        if multicast:
            m = convert(as_numeric(mcast_mask, Int16), Int16) if not isinstance(mcast_mask, int) else \
                Int16(mcast_mask - (1 << 16) if mcast_mask >= 1 << 15 else mcast_mask)
            mask = f" multicast_mask = {m.ir.name}"
        hint = _cache_hint(cache_policy)
        for coords, smem in _boxes(atom, origin, base, dst):
            b.emit(f"nvvm.cp.async.bulk.tensor.shared.cluster.global {smem.name}, {atom.desc.name}, {bar.name}, "
                   f"box[{', '.join(c.name for c in coords)}]{mask}{hint} : !llvm.ptr<3>, !llvm.ptr")
    else:
        origin, base = _box_coordinates(atom, dst), _smem_address(src, "a TMA store")
        for coords, smem in _boxes(atom, origin, base, src):
            types = ", ".join(["!llvm.ptr", "!llvm.ptr<3>"] + ["i32"] * len(coords))
            b.emit(f"nvvm.cp.async.bulk.tensor.global.shared.cta {atom.desc.name}, {smem.name}, "
                   f"box[{', '.join(c.name for c in coords)}] : {types}")


def tma_prefetch(atom: TmaAtom, src) -> None:
    """cute.prefetch with a TMA load atom: the boxes of tile `src` (a tile of the atom's
    coordinate tensor) into L2, no shared memory and no barrier (a hint: out-of-bounds parts
    are skipped). Issue it from one thread, early enough for the data to be used from L2."""
    b = ir.require("device", "a TMA prefetch")
    if atom.op.direction != "G2S" or isinstance(atom.op, CopyBulkTensorTileG2SMulticastOp):
        raise DSLError(ARGUMENT_MISMATCH, f"prefetch takes a TMA load atom (CopyBulkTensorTileG2SOp), got {atom}",
                       user_location())
    for coords, _ in _box_origins(atom, _box_coordinates(atom, src)):
        places = ", ".join(f"${i + 1}" for i in range(len(coords)))
        types = ", ".join(["!llvm.ptr"] + ["i32"] * len(coords))
        b.emit(f'llvm.inline_asm has_side_effects "cp.async.bulk.prefetch.tensor.{len(coords)}d.L2.global.tile '
               f'[$0, {{{places}}}];", "l{",r" * len(coords)}" {atom.desc.name}, '
               f'{", ".join(c.name for c in coords)} : ({types}) -> ()')


def _box_origins(atom: TmaAtom, origin: list):
    """(global coordinates, shared-memory offset) of each box of a tile whose first element is
    at `origin`, in order."""
    for delta, offset in atom.pieces:
        coords = list(origin)
        if delta:
            coords[0] = (Int32._wrap(coords[0]) + delta).ir
        yield coords, offset


def _boxes(atom: TmaAtom, origin: list, base: ir.Value, tile: Tensor):
    """(coordinates, shared address) of each box of the tile, in order."""
    b = ir.current()
    for coords, offset in _box_origins(atom, origin):
        smem = base
        if offset:
            off = Int32(offset)
            smem = b.op(f"llvm.getelementptr {base.name}[{off.ir.name}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, "
                        f"{tile.dtype.mlir}", "!llvm.ptr<3>")
        yield coords, smem


def commit_group() -> None:
    """Closes the group of TMA stores issued since the last commit (CuTe DSL's
    cute.arch.cp_async_bulk_commit_group)."""
    ir.require("device", "cp_async_bulk_commit_group").emit("nvvm.cp.async.bulk.commit.group")


def wait_group(group: int = 0, read: bool = False) -> None:
    """Waits until at most `group` committed store groups are in flight; with `read`, only
    until they have read their shared memory (it may be reused then)."""
    b = ir.require("device", "cp_async_bulk_wait_group")
    if not isinstance(group, int) or group < 0:
        raise DSLError(ARGUMENT_MISMATCH, f"the group count is a compile-time int >= 0, got {group}", user_location())
    b.emit(f"nvvm.cp.async.bulk.wait_group {group}" + (" {read}" if read else ""))
