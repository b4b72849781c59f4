"""`cute.arch`: thread and block indices, barriers, warp shuffles and votes, atomics, shared
memory, clocks. Device code only."""

from __future__ import annotations

from . import ir
from ..toolkit import MAX_STATIC_SMEM
from .diagnostics import INVALID_LAUNCH, UNSUPPORTED_TYPE, DSLError, user_location
from .numeric import Boolean, Float32, Float64, Int32, Int64, Numeric, Uint32, Uint64, as_numeric, convert, where
from .layout import ComposedLayout, Layout, compact_col_major
from .smem import dynamic_smem_base
from .tensor import Tensor, byte_width, storage_type
from .tensor_ssa import _COMBINE, ReductionOp
from .math import fmax, fmin  # noqa: F401 - CuTe DSL's cute.arch names


def _sreg(name: str) -> Int32:
    b = ir.require("device", f"cute.arch ({name})")
    return Int32._wrap(b.op(f"nvvm.read.ptx.sreg.{name} : i32", "i32"))


def _xyz(prefix: str) -> tuple[Int32, Int32, Int32]:
    return tuple(_sreg(f"{prefix}.{axis}") for axis in "xyz")


def thread_idx() -> tuple[Int32, Int32, Int32]:
    return _xyz("tid")


def block_idx() -> tuple[Int32, Int32, Int32]:
    return _xyz("ctaid")


def block_dim() -> tuple[Int32, Int32, Int32]:
    return _xyz("ntid")


def grid_dim() -> tuple[Int32, Int32, Int32]:
    return _xyz("nctaid")


def lane_idx() -> Int32:
    return _sreg("laneid")


WARP_SIZE = 32


def warp_idx() -> Int32:
    """The warp's index in the block (linear thread index // 32)."""
    tx, ty, tz = thread_idx()
    bx, by, _ = block_dim()
    return (tx + (ty + tz * by) * bx) // WARP_SIZE


def sync_threads() -> None:
    ir.require("device", "sync_threads").emit("nvvm.barrier0")


def _mask(mask) -> ir.Value:
    if isinstance(mask, int):
        return Int32(mask - (1 << 32) if mask >= 1 << 31 else mask).ir
    return convert(as_numeric(mask), Int32).ir


FULL_MASK = 0xFFFFFFFF


def sync_warp(mask=FULL_MASK) -> None:
    b = ir.require("device", "sync_warp")
    b.emit(f"nvvm.bar.warp.sync {_mask(mask).name} : i32")


_SHFL_CLAMP = {"idx": 0x1F, "down": 0x1F, "bfly": 0x1F, "up": 0}


def shuffle_sync(value, offset, mask=FULL_MASK, mode: str = "idx", width: int = 32):
    """Warp shuffle of a 32-bit value (64-bit values are split): mode idx | up | down | bfly."""
    if mode not in _SHFL_CLAMP:
        raise ValueError(f"shuffle mode must be one of {sorted(_SHFL_CLAMP)}, got {mode!r}")
    b = ir.require("device", "shuffle_sync")
    value = as_numeric(value)
    t = type(value)
    clamp = _SHFL_CLAMP[mode] | ((32 - width) << 8)
    m = _mask(mask)
    c = Int32(clamp).ir
    off = convert(as_numeric(offset, Int32), Int32).ir
    if t.width == 64:
        bits = (convert(value, Int64) if not t.is_float
                else Int64._wrap(b.op(f"arith.bitcast {value.ir.name} : f64 to i64", "i64")))
        lo = convert(bits, Int32)
        hi = convert(bits >> 32, Int32)
        def shuffle(word):
            text = f"nvvm.shfl.sync {mode} {m.name}, {word.ir.name}, {off.name}, {c.name} : i32 -> i32"
            return Int32._wrap(b.op(text, "i32"))
        lo, hi = shuffle(lo), shuffle(hi)
        joined = (convert(hi, Int64) << 32) | convert(convert(lo, Uint32), Int64)
        if t.is_float:
            return Float64._wrap(b.op(f"arith.bitcast {joined.ir.name} : i64 to f64", "f64"))
        return convert(joined, t)
    if t is Float32 or t is Int32:
        v = value
    elif t.is_float:
        v = convert(value, Float32)
    else:
        v = convert(value, Int32)
    vt = type(v)
    out = vt._wrap(b.op(f"nvvm.shfl.sync {mode} {m.name}, {v.ir.name}, {off.name}, {c.name} : {vt.mlir} -> {vt.mlir}",
                        vt.mlir))
    return convert(out, t)


def shuffle_sync_bfly(value, offset, mask=FULL_MASK, width: int = 32):
    """The value of lane `lane ^ offset` (within groups of `width` lanes)."""
    return shuffle_sync(value, offset, mask, "bfly", width)


def shuffle_sync_down(value, offset, mask=FULL_MASK, width: int = 32):
    """The value of lane `lane + offset` (a lane past its group keeps its own)."""
    return shuffle_sync(value, offset, mask, "down", width)


def shuffle_sync_up(value, offset, mask=FULL_MASK, width: int = 32):
    """The value of lane `lane - offset` (a lane before its group keeps its own)."""
    return shuffle_sync(value, offset, mask, "up", width)


def warp_reduction(value, op, threads_in_group: int = 32):
    """`op` (a two-argument function or a cute.ReductionOp) folded over each group of
    `threads_in_group` consecutive lanes (a power of two up to 32) by butterfly shuffles: every
    lane of a group gets the group's result. All 32 lanes must take part."""
    if threads_in_group not in (1, 2, 4, 8, 16, 32):
        raise DSLError(INVALID_LAUNCH, f"threads_in_group must be a power of two up to 32, got {threads_in_group}",
                       user_location())
    combine = op if callable(op) and not isinstance(op, ReductionOp) else _COMBINE[ReductionOp(op)]
    offset = threads_in_group // 2
    while offset >= 1:
        value = combine(value, shuffle_sync_bfly(value, offset, width=threads_in_group))
        offset //= 2
    return value


def warp_reduction_sum(value, threads_in_group: int = 32):
    return warp_reduction(value, lambda a, b: a + b, threads_in_group)


def warp_reduction_max(value, threads_in_group: int = 32):
    return warp_reduction(value, fmax, threads_in_group)


def _vote_ballot(pred, mask) -> Int32:
    b = ir.require("device", "vote")
    p = convert(as_numeric(pred, Boolean), Boolean)
    return Int32._wrap(b.op(f"nvvm.vote.ballot.sync {_mask(mask).name}, {p.ir.name} : i32", "i32"))


def vote_ballot_sync(pred, mask=FULL_MASK) -> Int32:
    return _vote_ballot(pred, mask)


def vote_any_sync(pred, mask=FULL_MASK) -> Boolean:
    return _vote_ballot(pred, mask) != 0


def vote_all_sync(pred, mask=FULL_MASK) -> Boolean:
    ballot = _vote_ballot(pred, mask)
    return ballot == Int32._wrap(_mask(mask))


# -- atomics (relaxed, device scope, through a generic address) -----------------------------------

_ASM_TYPES = {Int32: ("s32", "r"), Uint32: ("u32", "r"), Int64: ("s64", "l"), Uint64: ("u64", "l"),
              Float32: ("f32", "f"), Float64: ("f64", "d")}


def _element_address(target, index) -> tuple[ir.Value, type[Numeric]]:
    if not isinstance(target, Tensor):
        raise DSLError(UNSUPPORTED_TYPE, "atomics take a tensor and an index", user_location())
    b = ir.require("device", "atomics")
    address = target._address(index)
    generic = b.op(f"llvm.addrspacecast {address.name} : {address.type} to !llvm.ptr", "!llvm.ptr")
    return generic, target.dtype


def _atom(op: str, target, index, *values):
    address, t = _element_address(target, index)
    if t not in _ASM_TYPES:
        raise DSLError(UNSUPPORTED_TYPE, f"atomic {op} is not supported for {t.__name__}", user_location(),
                       "use Int32, Uint32, Int64, Uint64, Float32 or Float64 tensors")
    ptx, constraint = _ASM_TYPES[t]
    if op == "cas":
        ptx = {"r": "b32", "l": "b64"}.get(constraint)
        if ptx is None:
            raise DSLError(UNSUPPORTED_TYPE, "atomic_cas works on integer tensors", user_location())
    vals = [convert(as_numeric(v, t), t) for v in values]
    operands = ", ".join(f"${i + 2}" for i in range(len(vals)))
    constraints = ",".join([f"={constraint}", "l"] + [constraint] * len(vals))
    names = ", ".join([address.name] + [v.ir.name for v in vals])
    types = ", ".join(["!llvm.ptr"] + [t.mlir for v in vals])
    b = ir.current()
    return t._wrap(b.op(f'llvm.inline_asm has_side_effects "atom.{op}.{ptx} $0, [$1], {operands};", "{constraints}" '
                        f"{names} : ({types}) -> {t.mlir}", t.mlir))


def atomic_add(target, index, value):
    """target[index] += value atomically; returns the old value."""
    return _atom("add", target, index, value)


def atomic_max(target, index, value):
    """target[index] = max(target[index], value) atomically; returns the old value. Float32
    uses the integer order of IEEE bits (exact for non-NaN values)."""
    if target.dtype is Float32:
        b = ir.require("device", "atomics")
        v = convert(as_numeric(value, Float32), Float32)
        bits = Int32._wrap(b.op(f"arith.bitcast {v.ir.name} : f32 to i32", "i32"))
        view = Tensor(target.ptr, Int32, target.layout, target.memspace, target.alignment, target.wide)
        uview = Tensor(target.ptr, Uint32, target.layout, target.memspace, target.alignment, target.wide)
        # Non-negative floats order like signed ints; negative ones reversed, like unsigned ints.
        # Both atomics run; the one that does not apply gets its identity (INT_MIN / UINT_MAX),
        # so it leaves memory unchanged.
        non_negative = v >= 0.0
        pos = _atom("max", view, index, where(non_negative, bits, Int32(-(1 << 31))))
        neg = _atom("min", uview, index, where(non_negative, Uint32(0xFFFFFFFF), convert(bits, Uint32)))
        old = where(non_negative, pos, convert(neg, Int32))
        return Float32._wrap(b.op(f"arith.bitcast {old.ir.name} : i32 to f32", "f32"))
    return _atom("max", target, index, value)


def atomic_cas(target, index, compare, value):
    """If target[index] == compare, store value; returns the old value (integers)."""
    return _atom("cas", target, index, compare, value)


# -- shared memory ------------------------------------------------------------------------------------

def _smem_tensor(b, symbol: str, dtype, shape, stride, alignment: int = 16) -> Tensor:
    base = b.op(f"llvm.mlir.addressof @{symbol} : !llvm.ptr<3>", "!llvm.ptr<3>")
    layout = shape if isinstance(shape, (Layout, ComposedLayout)) else \
        Layout(shape, compact_col_major(shape) if stride is None else stride)
    return Tensor(base, dtype, layout, "smem", alignment)


def alloc_smem(dtype, shape, *, stride=None, alignment: int = 16) -> Tensor:
    """Static shared memory: a tensor of `shape` (compact column-major unless `stride`), or of
    a layout (a swizzled ComposedLayout too)."""
    b = ir.require("device", "alloc_smem")
    layout = shape if isinstance(shape, (Layout, ComposedLayout)) else \
        Layout(shape, compact_col_major(shape) if stride is None else stride)
    count = layout.cosize()
    if not isinstance(count, int):
        raise DSLError(UNSUPPORTED_TYPE, "static shared memory needs a compile-time shape", user_location(),
                       "use cute.arch.dynamic_smem for run-time sizes")
    start = -(-getattr(b, "static_smem_bytes", 0) // alignment) * alignment
    b.static_smem_bytes = start + count * byte_width(dtype)
    if b.static_smem_bytes > MAX_STATIC_SMEM:
        raise DSLError(INVALID_LAUNCH, f"this kernel's static shared memory reaches {b.static_smem_bytes} bytes; CUDA "
                       f"allows {MAX_STATIC_SMEM} of static shared memory per kernel", user_location(),
                       "allocate large buffers from dynamic shared memory with cute.SmemAllocator (the launch sizes "
                       "it, up to the arch's limit)")
    symbol = b.module.unique_symbol("__cute_smem").lstrip("%")
    b.module.device_globals.append(
        f"llvm.mlir.global internal @{symbol}() {{addr_space = 3 : i32, alignment = {alignment} : i64}} : "
        f"!llvm.array<{count} x {storage_type(dtype)}>")
    return _smem_tensor(b, symbol, dtype, layout, None, alignment)


def make_smem_tensor(dtype, layout, alignment: int = 128) -> Tensor:
    """CuTe DSL's shared-memory allocation: a tensor of `layout` (plain or swizzled)."""
    return alloc_smem(dtype, layout, alignment=alignment)


def dynamic_smem(dtype, shape, *, stride=None, offset_bytes: int = 0) -> Tensor:
    """A tensor over the dynamic shared memory given by `launch(smem=bytes)` (or, to have the
    launch size computed, allocate with cute.SmemAllocator)."""
    b = ir.require("device", "dynamic_smem")
    base = dynamic_smem_base(b, 16)
    layout = shape if isinstance(shape, (Layout, ComposedLayout)) else \
        Layout(shape, compact_col_major(shape) if stride is None else stride)
    t = Tensor(base, dtype, layout, "smem", 16)
    if offset_bytes:
        off = Int32(offset_bytes)
        t.ptr = b.op(f"llvm.getelementptr {t.ptr.name}[{off.ir.name}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
                     "!llvm.ptr<3>")
    return t


# -- approximate math ------------------------------------------------------------------------------

def rcp_approx(x) -> Float32:
    """1 / x for Float32 by the hardware's approximate reciprocal (rcp.approx.ftz.f32: at most
    1 ulp off, subnormal inputs and results flushed to zero), one instruction where `1.0 / x`
    is IEEE-rounded and takes several plus a slow-path check."""
    b = ir.require("device", "rcp_approx")
    v = convert(x, Float32)
    return Float32._wrap(b.op(f"nvvm.rcp.approx.ftz.f {v.ir.name} : f32", "f32"))


# -- clocks -------------------------------------------------------------------------------------------

def clock() -> Int64:
    b = ir.require("device", "clock")
    return Int64._wrap(b.op('llvm.inline_asm has_side_effects "mov.u64 $0, %clock64;", "=l" : () -> i64', "i64"))



# Barriers, fences, register reallocation and clusters (sync.py), under cute.arch as in CuTe DSL.
from .sync import (barrier, block_idx_in_cluster, block_in_cluster_rank, cluster_arrive,  # noqa: E402,F401
                   cluster_arrive_relaxed, cluster_dim, cluster_idx, cluster_shape, cluster_wait, elect_one,
                   barrier_arrive, fence_acq_rel_cluster, fence_acq_rel_cta, fence_acq_rel_gpu, fence_proxy,
                   make_warp_uniform, mbarrier_arrive, mbarrier_arrive_and_expect_tx,
                   mbarrier_expect_tx, mbarrier_init, mbarrier_init_fence, mbarrier_try_wait, mbarrier_wait,
                   warpgroup_reg_alloc, warpgroup_reg_dealloc, store_shared_remote)
from .nvgpu.cpasync import commit_group as cp_async_bulk_commit_group  # noqa: E402,F401
from .nvgpu.cpasync import wait_group as cp_async_bulk_wait_group  # noqa: E402,F401
from .tiled_copy import cp_async_commit_group, cp_async_wait_group  # noqa: E402,F401
