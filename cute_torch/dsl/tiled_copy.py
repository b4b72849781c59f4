"""Copy atoms and tiled copies: CuTe DSL's `make_copy_atom`, `make_tiled_copy_tv`,
`get_slice`, `partition_S/D` and `cute.copy(tiled_copy, src, dst, pred=)`.

    atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(), cute.BFloat16, num_bits_per_copy=128)
    tiled = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)   # e.g. (32, 4) threads, (1, 8) values
    thr = tiled.get_slice(tid)
    tAgA, tAsA = thr.partition_S(gA), thr.partition_D(sA)          # (Val, RestM, RestN, ...)
    cute.copy(tiled, tAgA, tAsA, pred=tApA)                          # one cp.async per 16 bytes

A partition is CuTe's: the tile is divided by the tiled copy's tile, the tile mode composed
with the thread-value layout, the thread's index fixed. What is left is (Val, Rest...): the
thread's values in one tile, then the tiles. A copy issues the atom once per `num_bits_per_copy`
chunk of Val for every tile; `pred` (a Boolean tensor of shape (1, Rest...) or like `src`)
turns a chunk off: a cp.async then writes zeros (its source size is 0), a plain copy skips it.
"""

from __future__ import annotations

import enum

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from .layout import Layout, composition, divisibility, idx2crd, is_tuple, make_layout_tv, rank, size, zipped_divide
from .numeric import Boolean, Int32, Numeric, as_numeric, convert, where
from .pointer import shared_pointer
from .sync import require_arch
from .tensor import Tensor, byte_width


class CopyUniversalOp:
    """Plain loads and stores (vectorized up to the atom's width)."""


class LoadCacheMode(enum.Enum):
    """cp.async's cache operator, CuTe DSL's names: ALWAYS (`.ca`, the default: cached in L1 and
    L2) or GLOBAL (`.cg`: L2 only, 16-byte copies only). Which is faster depends on the kernel:
    kernels/row_reduce.py's stage_row and load_row_staged say what was measured for theirs."""
    ALWAYS = "ca"
    GLOBAL = "cg"


class CopyG2SOp:
    """`cp.async` (sm_80): 4, 8 or 16 bytes from global to shared memory without registers,
    cached as `cache_mode` says (LoadCacheMode). Complete them with
    cute.arch.cp_async_commit_group() and cp_async_wait_group(n)."""

    def __init__(self, cache_mode: LoadCacheMode = LoadCacheMode.ALWAYS):
        if not isinstance(cache_mode, LoadCacheMode):
            raise DSLError(ARGUMENT_MISMATCH, f"CopyG2SOp's cache_mode is a cpasync.LoadCacheMode, got {cache_mode!r}",
                           user_location())
        self.cache_mode = cache_mode


class CopyBulkG2SOp:
    """`cp.async.bulk` (sm_90): a contiguous run of `num_bits_per_copy` bits (a multiple of 16
    bytes) from global to shared memory by the async proxy (the TMA unit) without a tensor map,
    one thread issuing it; it completes its bytes on the mbarrier that cute.copy's `mbar_ptr=`
    names (armed with mbarrier_arrive_and_expect_tx). A whole row of a row kernel is one
    instruction, so a CTA can keep far more bytes in flight than its registers could hold."""


class CopyAtom:
    """An op moving `num_bits_per_copy` bits of `dtype` elements per instruction."""

    def __init__(self, op, dtype, num_bits_per_copy: int | None):
        bits = num_bits_per_copy or dtype.width
        if bits % dtype.width or bits // dtype.width < 1:
            raise DSLError(ARGUMENT_MISMATCH, f"num_bits_per_copy={bits} is not a whole number of {dtype.__name__}",
                           user_location())
        if isinstance(op, CopyG2SOp) and bits not in (32, 64, 128):
            raise DSLError(ARGUMENT_MISMATCH, f"cp.async copies 4, 8 or 16 bytes, got num_bits_per_copy={bits}",
                           user_location())
        if isinstance(op, CopyG2SOp) and op.cache_mode is LoadCacheMode.GLOBAL and bits != 128:
            raise DSLError(ARGUMENT_MISMATCH, f"cp.async with LoadCacheMode.GLOBAL (.cg) copies 16 bytes, got "
                           f"num_bits_per_copy={bits}", user_location(), "use LoadCacheMode.ALWAYS for 4 or 8 bytes")
        if isinstance(op, CopyBulkG2SOp) and bits % 128:
            raise DSLError(ARGUMENT_MISMATCH, f"cp.async.bulk copies a multiple of 16 bytes, got "
                           f"num_bits_per_copy={bits}", user_location())
        self.op, self.dtype, self.bits = op, dtype, bits

    @property
    def elements(self) -> int:
        return self.bits // self.dtype.width

    def __str__(self) -> str:
        return f"copy_atom<{type(self.op).__name__} {self.dtype.__name__} x{self.elements}>"

    __repr__ = __str__


def make_copy_atom(op, dtype, num_bits_per_copy: int | None = None) -> CopyAtom:
    from .nvgpu.warp import LdMatrix8x8x16bOp
    from .nvgpu.warpgroup import StMatrix8x8x16bOp
    if not isinstance(op, (CopyUniversalOp, CopyG2SOp, CopyBulkG2SOp, LdMatrix8x8x16bOp, StMatrix8x8x16bOp)):
        raise DSLError(UNSUPPORTED_TYPE, f"make_copy_atom knows CopyUniversalOp, cpasync.CopyG2SOp, "
                       f"cpasync.CopyBulkG2SOp, warp.LdMatrix8x8x16bOp and warpgroup.StMatrix8x8x16bOp, got "
                       f"{type(op).__name__}",
                       user_location())
    if isinstance(op, (LdMatrix8x8x16bOp, StMatrix8x8x16bOp)):
        if dtype.width != 16:
            raise DSLError(UNSUPPORTED_TYPE, f"ldmatrix/stmatrix move 16-bit elements, got {dtype.__name__}",
                           user_location())
        num_bits_per_copy = 128  # one 16-byte row per thread
    return CopyAtom(op, dtype, num_bits_per_copy)


class TiledCopy:
    """An atom repeated over threads: `tiler_mn` is the tile one pass covers, `layout_tv` maps
    (thread, value) to a coordinate of it."""

    def __init__(self, atom: CopyAtom, tiler_mn, layout_tv: Layout):
        self.atom, self.tiler_mn, self.layout_tv = atom, tiler_mn, layout_tv

    @property
    def size(self) -> int:
        return size(self.layout_tv[0])

    def get_slice(self, thr_idx) -> "ThrCopy":
        return ThrCopy(self, thr_idx)

    get_thread_slice = get_slice

    def __str__(self) -> str:
        return f"TiledCopy({self.atom}, tile {self.tiler_mn}, tv {self.layout_tv})"


def make_tiled_copy_tv(atom: CopyAtom, thr_layout: Layout, val_layout: Layout) -> TiledCopy:
    """Threads laid out by `thr_layout`, each owning a `val_layout` block (make_layout_tv)."""
    if not isinstance(atom, CopyAtom):
        raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_copy_tv takes a copy atom (make_copy_atom), got "
                       f"{type(atom).__name__}", user_location())
    tiler, tv = make_layout_tv(thr_layout, val_layout)
    if size(tv[1]) % atom.elements:
        raise DSLError(ARGUMENT_MISMATCH, f"each thread holds {size(tv[1])} values, not a multiple of the atom's "
                       f"{atom.elements}", user_location())
    return TiledCopy(atom, tiler, tv)


class ThrCopy:
    """One thread's view of a tiled copy."""

    def __init__(self, tiled: TiledCopy, thr_idx):
        self.tiled, self.thr_idx = tiled, thr_idx

    def partition_S(self, tensor: Tensor) -> Tensor:
        return self._partition(tensor, "partition_S")

    def partition_D(self, tensor: Tensor) -> Tensor:
        return self._partition(tensor, "partition_D")

    def _partition(self, tensor, what: str) -> Tensor:
        if not isinstance(tensor, Tensor):
            raise DSLError(ARGUMENT_MISMATCH, f"{what} takes a tensor, got {type(tensor).__name__}", user_location())
        layout = tensor._layout
        if rank(layout) < len(self.tiled.tiler_mn):
            raise DSLError(ARGUMENT_MISMATCH, f"{what}: a tile of {len(self.tiled.tiler_mn)} modes does not fit "
                           f"{layout}", user_location())
        blocks = zipped_divide(layout, tuple(self.tiled.tiler_mn))        # ((TileM, TileN), (RestM, RestN, ...))
        tv = composition(blocks[0], self.tiled.layout_tv)                  # (Thr, Val)
        rest = blocks[1]
        shapes = (tv.shape[1],) + (tuple(rest.shape) if is_tuple(rest.shape) else (rest.shape,))
        strides = (tv.stride[1],) + (tuple(rest.stride) if is_tuple(rest.stride) else (rest.stride,))
        thread = tv[0]
        return tensor.with_layout(Layout(shapes, strides), tensor.offset_at(thread, self.thr_idx),
                                  divisibility(self.thr_idx, thread.shape, thread.stride))


def tiled_copy(tiled, src: Tensor, dst: Tensor, pred=None, mbar_ptr=None) -> None:
    """cute.copy with a copy atom or tiled copy over (Val, Rest...) partitions."""
    atom = tiled.atom if isinstance(tiled, TiledCopy) else tiled
    bulk = isinstance(atom.op, CopyBulkG2SOp)
    if bulk and (mbar_ptr is None or pred is not None):
        raise DSLError(ARGUMENT_MISMATCH, "a bulk copy (CopyBulkG2SOp) takes mbar_ptr= (the mbarrier that counts its "
                       "bytes) and no pred=", user_location())
    if not bulk and mbar_ptr is not None:
        raise DSLError(ARGUMENT_MISMATCH, f"mbar_ptr= goes with a bulk copy (CopyBulkG2SOp), not {atom}",
                       user_location())
    if size(src) != size(dst):
        raise DSLError(ARGUMENT_MISMATCH, f"copy of {size(src)} elements ({src.layout}) into {size(dst)} "
                       f"({dst.layout})", user_location())
    src, dst = _with_modes(src), _with_modes(dst)
    if isinstance(atom.op, CopyUniversalOp) and pred is None:
        dst.store(src.load())
        return
    vals = size(src.shape[0]) if is_tuple(src.shape) else size(src.shape)
    if vals % atom.elements:
        raise DSLError(ARGUMENT_MISMATCH, f"a partition with {vals} values per tile does not split into the atom's "
                       f"{atom.elements}", user_location())
    rest_shape = tuple(src.shape[1:]) if is_tuple(src.shape) and len(src.shape) > 1 else ()
    tiles = size(rest_shape) if rest_shape else 1
    for t in range(tiles):
        rest = tuple(_leaves_of(idx2crd(t, rest_shape))) if rest_shape else ()
        flag = None if pred is None else _flag(pred, rest)
        for v in range(0, vals, atom.elements):
            if bulk:
                _issue_bulk(atom, src, dst, (v,) + rest, mbar_ptr)
            else:
                _issue(atom, src, dst, (v,) + rest, flag)


def _with_modes(t: Tensor) -> Tensor:
    """`t` with a tuple shape (a 1-D tensor of shape n as (n,)), so that the (value, rest...)
    coordinates below index it."""
    if is_tuple(t._layout.shape):
        return t
    return t.with_layout(Layout((t._layout.shape,), (t._layout.stride,)))


def _leaves_of(coord):
    return list(coord) if isinstance(coord, tuple) else [coord]


def _flag(pred, rest) -> Numeric:
    if not isinstance(pred, Tensor):
        raise DSLError(ARGUMENT_MISMATCH, f"pred= takes a Boolean tensor, got {type(pred).__name__}", user_location())
    return convert(as_numeric(pred[(0,) + rest], Boolean), Boolean)


def _issue(atom: CopyAtom, src: Tensor, dst: Tensor, coord, flag) -> None:
    n = atom.elements
    _check_contiguous(src, coord, n, "source")
    _check_contiguous(dst, coord, n, "destination")
    nbytes = n * byte_width(atom.dtype)
    for t in (src, dst):
        if t.swizzle is not None and nbytes > 1 << t.swizzle.base:
            raise DSLError(ARGUMENT_MISMATCH, f"{t.swizzle} moves {1 << t.swizzle.base}-byte pieces apart; a "
                           f"{nbytes}-byte copy atom would straddle them", user_location(),
                           "use an atom of at most 2^base bytes, or a swizzle with a larger base")
    if isinstance(atom.op, CopyG2SOp):
        if src.memspace != "gmem" or dst.memspace != "smem":
            raise DSLError(ARGUMENT_MISMATCH, "cp.async copies global memory into shared memory", user_location())
        b = ir.require("device", "cp.async")
        s_addr, d_addr = src._address(coord), dst._address(coord)
        cache = atom.op.cache_mode.value
        if flag is None:
            b.emit(f"nvvm.cp.async.shared.global {d_addr.name}, {s_addr.name}, {nbytes}, cache = {cache} : "
                   f"{d_addr.type}, {s_addr.type}")
        else:
            size_v = where(flag, Int32(nbytes), Int32(0))
            b.emit(f"nvvm.cp.async.shared.global {d_addr.name}, {s_addr.name}, {nbytes}, cache = {cache}, "
                   f"{size_v.ir.name} : {d_addr.type}, {s_addr.type}, i32")
        return
    from .control import if_
    chunk_s, chunk_d = _chunk(src, coord, n), _chunk(dst, coord, n)

    def move():
        chunk_d.store(chunk_s.load())
        return ()

    if_(flag, move, lambda: (), (), (), user_location())


def _issue_bulk(atom: CopyAtom, src: Tensor, dst: Tensor, coord, mbar_ptr) -> None:
    n = atom.elements
    _check_contiguous(src, coord, n, "source")
    _check_contiguous(dst, coord, n, "destination")
    if src.memspace != "gmem" or dst.memspace != "smem" or dst.swizzle is not None:
        raise DSLError(ARGUMENT_MISMATCH, "a bulk copy (CopyBulkG2SOp) copies global memory into unswizzled shared "
                       "memory", user_location())
    b = ir.require("device", "cp.async.bulk")
    require_arch("sm_90", "cp.async.bulk (CopyBulkG2SOp)")
    s_addr, d_addr = src._address(coord), dst._address(coord)
    d32 = b.op(f"llvm.ptrtoint {d_addr.name} : !llvm.ptr<3> to i32", "i32")
    bar_ptr = shared_pointer(mbar_ptr, "a bulk copy's mbar_ptr").value
    bar = b.op(f"llvm.ptrtoint {bar_ptr.name} : !llvm.ptr<3> to i32", "i32")
    size_v = Int32(n * byte_width(atom.dtype))
    # LLVM 19's NVVM dialect has no op for the non-tensor bulk copy: one instruction of inline PTX.
    b.emit('llvm.inline_asm has_side_effects "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes '
           f'[$0], [$1], $2, [$3];", "r,l,r,r" {d32.name}, {s_addr.name}, {size_v.ir.name}, {bar.name} : '
           f"(i32, {s_addr.type}, i32, i32) -> ()")


def _chunk(t: Tensor, coord, n: int) -> Tensor:
    """The n elements of mode 0 from coord on, as a tensor (n):(1)."""
    first = t.offset_at(t._layout, coord)
    return t.with_layout(Layout(n, 1), first, divisibility(coord, t.shape, t.stride))


def _check_contiguous(t: Tensor, coord, n: int, what: str) -> None:
    """Values v0..v0+n-1 of mode 0 are n consecutive elements. Only mode 0 decides that (the
    other coordinates add the same offset to all), and only a static one can be checked here: a
    run-time layout would only emit dead index arithmetic."""
    values = t._layout[0] if is_tuple(t._layout.shape) else t._layout
    if n == 1 or not values.is_static:
        return
    v0 = coord[0]
    base = values(v0)
    for i in range(1, n):
        step = values(v0 + i)
        if step - base != i:
            raise DSLError(ARGUMENT_MISMATCH, f"the copy atom moves {n} contiguous elements, but the {what}'s values "
                           f"{v0}..{v0 + n - 1} are not contiguous in {t.layout}", user_location(),
                           "choose a val_layout whose blocks are contiguous in memory, or a narrower atom")


def cp_async_commit_group() -> None:
    """Closes the group of cp.async copies issued since the last commit."""
    ir.require("device", "cp_async_commit_group").emit("nvvm.cp.async.commit.group")


def cp_async_wait_group(n: int) -> None:
    """Waits until at most `n` committed cp.async groups are in flight."""
    if not isinstance(n, int) or n < 0:
        raise DSLError(ARGUMENT_MISMATCH, f"cp_async_wait_group takes a compile-time count >= 0, got {n!r}",
                       user_location())
    ir.require("device", "cp_async_wait_group").emit(f"nvvm.cp.async.wait.group {n}")


# -- ldmatrix into a warp MMA's fragments ------------------------------------------------------------

class MmaOperandCopy:
    """make_tiled_copy_A/B: an ldmatrix atom feeding operand A or B of a warp tiled MMA;
    make_tiled_copy_C: a stmatrix atom writing a warpgroup MMA's accumulators, or an ldmatrix
    (x4) atom reading a 16-bit tile into registers laid out as those accumulators (an epilogue's
    source tile: the same row addresses as stmatrix's, the registers in the same order)."""

    def __init__(self, atom: CopyAtom, tiled_mma, operand: str):
        from .mma import TiledMma
        from .nvgpu import warp
        if operand == "C":
            self._init_c(atom, tiled_mma)
            return
        if not isinstance(atom, CopyAtom) or not isinstance(atom.op, warp.LdMatrix8x8x16bOp):
            raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_copy_{operand} takes an ldmatrix copy atom "
                           f"(cute.nvgpu.warp.LdMatrix8x8x16bOp), got {atom}", user_location())
        if not isinstance(tiled_mma, TiledMma) or not isinstance(tiled_mma.atom, warp.MmaF16BF16Op):
            raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_copy_{operand} feeds a warp MMA "
                           f"(cute.nvgpu.warp.MmaF16BF16Op), got {tiled_mma}", user_location())
        need = 4 if operand == "A" else 2
        if atom.op.num_matrices != need:
            raise DSLError(ARGUMENT_MISMATCH, f"an m16n8k16 {operand} tile is {need} 8x8 matrices: use "
                           f"LdMatrix8x8x16bOp(num_matrices={need})", user_location())
        self.atom, self.tiled_mma, self.operand = atom, tiled_mma, operand
        layouts = {(False, "A"): warp.LDSM_A_16x16, (False, "B"): warp.LDSM_B_8x16,
                   (True, "A"): warp.LDSM_T_A_16x16, (True, "B"): warp.LDSM_T_B_8x16}
        self.layout_tv = layouts[(atom.op.transpose, operand)]

    def _init_c(self, atom: CopyAtom, tiled_mma) -> None:
        from .mma import TiledMma
        from .nvgpu import warp, warpgroup
        ops = (warpgroup.StMatrix8x8x16bOp, warp.LdMatrix8x8x16bOp)
        if not isinstance(atom, CopyAtom) or not isinstance(atom.op, ops) or atom.op.num_matrices != 4:
            raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_copy_C takes a stmatrix copy atom "
                           f"(cute.nvgpu.warpgroup.StMatrix8x8x16bOp) or an x4 ldmatrix one "
                           f"(cute.nvgpu.warp.LdMatrix8x8x16bOp), got {atom}", user_location())
        if not isinstance(tiled_mma, TiledMma) or not isinstance(tiled_mma.atom, warpgroup.WarpgroupMmaOp):
            raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_copy_C writes a warpgroup MMA's accumulators, got "
                           f"{tiled_mma}", user_location())
        n = tiled_mma.atom.shape_mnk[1]
        if n % 16:
            raise DSLError(ARGUMENT_MISMATCH, f"stmatrix stores 16 columns at a time; the MMA's N is {n}",
                           user_location())
        self.atom, self.tiled_mma, self.operand = atom, tiled_mma, "C"
        self.layout_tv = warpgroup.stsm_layout(n, atom.op.transpose)

    @property
    def reads_shared(self) -> bool:
        """Whether the copy goes from shared memory to registers (ldmatrix)."""
        from .nvgpu import warp
        return isinstance(self.atom.op, warp.LdMatrix8x8x16bOp)

    def get_slice(self, thr_idx) -> "ThrMmaOperandCopy":
        return ThrMmaOperandCopy(self, thr_idx)

    get_thread_slice = get_slice


class ThrMmaOperandCopy:
    def __init__(self, tiled: MmaOperandCopy, thr_idx):
        from .mma import ThrMma
        self.tiled, self.thr = tiled, ThrMma(tiled.tiled_mma, thr_idx)

    def partition_S(self, tensor: Tensor) -> Tensor:
        """ldmatrix: (8 values of this thread's row, FrgX, FrgK, ...), the row whose address it
        gives; of a C tile, as stmatrix's partition_D (stmatrix: the accumulator fragment, as it
        is)."""
        if self.tiled.operand == "C":
            return self.thr._partition("C", tensor, self.tiled.layout_tv) if self.tiled.reads_shared else tensor
        return self.thr._partition(self.tiled.operand, tensor, self.tiled.layout_tv)

    def partition_D(self, tensor: Tensor) -> Tensor:
        """stmatrix: ((8 values of a row, N/16 groups), FrgM, FrgN, ...) of the shared tile, the
        rows whose addresses this thread gives (ldmatrix: the fragment, as it is)."""
        if self.tiled.operand == "C" and not self.tiled.reads_shared:
            return self.thr._partition("C", tensor, self.tiled.layout_tv)
        return tensor

    def retile(self, fragment: Tensor) -> Tensor:
        """The MMA fragment as the copy's register side: ldmatrix returns and stmatrix takes
        registers in exactly the fragment's order."""
        return fragment


def make_tiled_copy_A(atom: CopyAtom, tiled_mma) -> MmaOperandCopy:
    return MmaOperandCopy(atom, tiled_mma, "A")


def make_tiled_copy_B(atom: CopyAtom, tiled_mma) -> MmaOperandCopy:
    return MmaOperandCopy(atom, tiled_mma, "B")


def make_tiled_copy_C(atom: CopyAtom, tiled_mma) -> MmaOperandCopy:
    return MmaOperandCopy(atom, tiled_mma, "C")


def ldmatrix_copy(tiled: MmaOperandCopy, src: Tensor, dst: Tensor) -> None:
    """One ldmatrix per atom of the fragments: (8, FrgX, FrgK) from shared memory."""
    from .mma_atom import struct_fields, unpack_registers
    if src.memspace != "smem" or dst.memspace != "rmem":
        raise DSLError(ARGUMENT_MISMATCH, "ldmatrix copies shared memory into a register fragment", user_location())
    n = tiled.atom.op.num_matrices
    rest_shape = tuple(src.shape[1:]) if is_tuple(src.shape) and len(src.shape) > 1 else ()
    if size(rest_shape or 1) != size(tuple(dst.shape[1:]) if is_tuple(dst.shape) and len(dst.shape) > 1 else 1):
        raise DSLError(ARGUMENT_MISMATCH, f"ldmatrix source {src.shape} and fragment {dst.shape} have different "
                       "numbers of atoms", user_location())
    b = ir.require("device", "ldmatrix")
    order = "col" if tiled.atom.op.transpose else "row"   # col: .trans
    reg_t = "i32" if n == 1 else f"!llvm.struct<({', '.join(['i32'] * n)})>"
    for t in range(size(rest_shape) if rest_shape else 1):
        rest = tuple(_leaves_of(idx2crd(t, rest_shape))) if rest_shape else ()
        _check_contiguous(src, (0,) + rest, 8, "ldmatrix row")
        address = src._address((0,) + rest)
        result = b.op(f"nvvm.ldmatrix {address.name} {{num = {n} : i32, layout = #nvvm.mma_layout<{order}>}} : "
                      f"({address.type}) -> {reg_t}", reg_t)
        registers = [result] if n == 1 else struct_fields(result, n, "i32")
        for v, value in enumerate(unpack_registers(registers, dst.dtype)):
            dst[(v,) + rest] = value


def ldmatrix_c_copy(tiled: MmaOperandCopy, src: Tensor, dst: Tensor) -> None:
    """One ldmatrix.x4 per 16 columns of each accumulator atom, stmatrix_copy backwards: group
    j of the shared partition lands in the fragment's values 8j..8j+7 (16-bit)."""
    from .mma_atom import struct_fields, unpack_registers
    if src.memspace != "smem" or dst.memspace != "rmem":
        raise DSLError(ARGUMENT_MISMATCH, "ldmatrix copies shared memory into a register fragment", user_location())
    if dst.dtype.width != 16:
        raise DSLError(UNSUPPORTED_TYPE, f"ldmatrix loads 16-bit elements, got a {dst.dtype.__name__} fragment",
                       user_location())
    groups = size(src.shape[0]) // 8
    rest_shape = tuple(src.shape[1:]) if is_tuple(src.shape) and len(src.shape) > 1 else ()
    b = ir.require("device", "ldmatrix")
    order = "col" if tiled.atom.op.transpose else "row"   # col: .trans
    reg_t = "!llvm.struct<(i32, i32, i32, i32)>"
    for t in range(size(rest_shape) if rest_shape else 1):
        rest = tuple(_leaves_of(idx2crd(t, rest_shape))) if rest_shape else ()
        for j in range(groups):
            _check_contiguous(src, (8 * j,) + rest, 8, "ldmatrix row")
            address = src._address((8 * j,) + rest)
            result = b.op(f"nvvm.ldmatrix {address.name} {{num = 4 : i32, layout = #nvvm.mma_layout<{order}>}} : "
                          f"({address.type}) -> {reg_t}", reg_t)
            values = dst.with_layout(Layout(8, 1), dst._layout((8 * j,) + rest))
            for v, value in enumerate(unpack_registers(struct_fields(result, 4, "i32"), dst.dtype)):
                values[v] = value


def stmatrix_copy(tiled: MmaOperandCopy, src: Tensor, dst: Tensor) -> None:
    """One stmatrix.x4 per 16 columns of each accumulator atom: the fragment's values 8j..8j+7
    (16-bit) go to group j of the shared partition."""
    from .mma_atom import packed_registers
    if src.memspace != "rmem" or dst.memspace != "smem":
        raise DSLError(ARGUMENT_MISMATCH, "stmatrix copies a register fragment into shared memory", user_location())
    if src.dtype.width != 16:
        raise DSLError(UNSUPPORTED_TYPE, f"stmatrix stores 16-bit elements; convert the accumulators first "
                       f"(got {src.dtype.__name__})", user_location())
    groups = size(dst.shape[0]) // 8
    rest_shape = tuple(dst.shape[1:]) if is_tuple(dst.shape) and len(dst.shape) > 1 else ()
    b = ir.require("device", "stmatrix")
    order = "col" if tiled.atom.op.transpose else "row"   # col: .trans
    for t in range(size(rest_shape) if rest_shape else 1):
        rest = tuple(_leaves_of(idx2crd(t, rest_shape))) if rest_shape else ()
        for j in range(groups):
            _check_contiguous(dst, (8 * j,) + rest, 8, "stmatrix row")
            address = dst._address((8 * j,) + rest)
            values = src.with_layout(Layout(8, 1), src._layout((8 * j,) + rest))
            registers = packed_registers(values, "stmatrix")
            names = ", ".join(r.name for r in registers)
            b.emit(f"nvvm.stmatrix {address.name}, {names} {{layout = #nvvm.mma_layout<{order}>}} : "
                   f"{address.type}, i32, i32, i32, i32")

