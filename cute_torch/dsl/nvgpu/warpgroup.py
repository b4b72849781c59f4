"""`cute.nvgpu.warpgroup`: Hopper's warpgroup MMA (`wgmma.mma_async`, sm_90a), issued by four
warps (128 threads) together, asynchronously.

    op = cute.nvgpu.warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, 128, 16))
    tiled_mma = cute.make_tiled_mma(op, (2, 1, 1))        # two consumer warpgroups along M
    ...
    cute.nvgpu.warpgroup.fence()                          # registers written before: visible to wgmma
    cute.gemm(tiled_mma, acc, tCrA[None, None, k], tCrB[None, None, k], acc)
    cute.nvgpu.warpgroup.commit_group()
    cute.nvgpu.warpgroup.wait_group(0)                    # acc may be read now

A and B are read from shared memory through 64-bit matrix descriptors. The DSL builds them
from the operand's shared-memory layout (start address, leading and stride byte offsets,
swizzle mode): the user partitions shared-memory tensors with the tiled MMA and never spells a
descriptor. The layouts wgmma reads are CuTe's canonical ones, swizzled with Sw<1|2|3, 4, 3>
(on byte addresses): K-major (8-row groups of 32-, 64- or 128-byte rows, K contiguous) or
MN-major (MN contiguous in 32-/64-/128-byte rows, 8 k per group); the op's a_major_mode /
b_major_mode say which, and set the instruction's transpose bits.

A may instead come from registers (`a_src=OperandSource.RMEM`, K-major): make_fragment_A gives
registers laid out as each warp's mma.sync A fragment for its 16 rows, filled by a copy.

Differences from CuTe DSL: fp16 accumulators are not supported yet (an error that says so).
"""

from __future__ import annotations

import enum

from .. import ir
from ..diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from ..layout import Layout, Swizzle, size
from ..mma_atom import MmaAtom, check_types, inline_asm, packed_registers, struct_fields
from ..numeric import BFloat16, Boolean, Float16, Float32, Int32, Int64, as_numeric, convert
from ..sync import require_arch
from ..tensor import Tensor, byte_width


class OperandSource(enum.Enum):
    RMEM = "rmem"
    SMEM = "smem"


class OperandMajorMode(enum.Enum):
    MN = "mn"
    K = "k"


class Field(enum.Enum):
    ACCUMULATE = "accumulate"


# CuTe's SM90 64xN accumulator layout, from the PTX ISA's wgmma D fragment: warp w holds rows
# 16w..16w+15; in a warp, t0 = lane % 4 picks columns 2*t0 + {0,1} (then every 8 columns),
# t1 = lane / 4 picks the row (then the row 8 below).
def _c_layout(n: int) -> Layout:
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


# A from registers (RS): each warp w holds rows 16w..16w+15 of the 64x16 tile as mma.sync's A
# fragment (a register pair along k, then row + 8, then k + 8).
_RS_A_64x16 = Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512)))


def _smem_layout(rows: int) -> Layout:
    """A shared operand: every thread of the warpgroup names the whole (rows x 16) tile."""
    return Layout((128, (rows, 16)), (0, (1, rows)))


class MmaF16BF16Op(MmaAtom):
    """D (64xN, fp32) += A (64x16) * B (16xN), fp16 or bf16 inputs from shared memory,
    N in 8..256 by 8; one `wgmma.mma_async` per atom."""

    threads = 128

    def __init__(self, ab_dtype, acc_dtype, instruction_shape, a_src=OperandSource.SMEM,
                 a_major_mode=OperandMajorMode.K, b_major_mode=OperandMajorMode.K):
        check_types("warpgroup.MmaF16BF16Op", ab_dtype, acc_dtype, {Float16: (Float32,), BFloat16: (Float32,)})
        m, n, k = tuple(instruction_shape)
        if m != 64 or k != 16 or not (8 <= n <= 256 and n % 8 == 0):
            raise DSLError(ARGUMENT_MISMATCH, f"warpgroup.MmaF16BF16Op shapes are (64, N, 16) with N in 8..256 by 8, "
                           f"got {tuple(instruction_shape)}", user_location())
        if not isinstance(a_src, OperandSource):
            raise DSLError(ARGUMENT_MISMATCH, f"a_src is an OperandSource (SMEM or RMEM), got {a_src!r}",
                           user_location())
        if a_src is OperandSource.RMEM and a_major_mode is not OperandMajorMode.K:
            raise DSLError(ARGUMENT_MISMATCH, "A from registers is K-major (a_major_mode=OperandMajorMode.K)",
                           user_location())
        for name, major in (("A", a_major_mode), ("B", b_major_mode)):
            if not isinstance(major, OperandMajorMode):
                raise DSLError(ARGUMENT_MISMATCH, f"{name}'s major mode is an OperandMajorMode (K or MN), got "
                               f"{major!r}", user_location())
        self.a_major, self.b_major = a_major_mode, b_major_mode
        self.a_dtype = self.b_dtype = ab_dtype
        self.acc_dtype = acc_dtype
        self.shape_mnk = (m, n, k)
        self.a_source, self.b_source = a_src.value, "smem"
        self.layout_a = _RS_A_64x16 if a_src is OperandSource.RMEM else _smem_layout(m)
        self.layout_b, self.layout_c = _smem_layout(n), _c_layout(n)

    def __str__(self) -> str:
        return (f"warpgroup.MmaF16BF16Op({self.a_dtype.__name__}, {self.acc_dtype.__name__}, "
                f"m64n{self.shape_mnk[1]}k16)")

    def call(self, d, a, b, c, accumulate=True) -> None:
        """One wgmma: D = A * B + (C if accumulate); B (and A unless from registers) given as
        descriptor fragments. It is asynchronous: D's registers (and A's) may be read or
        changed only after wait_group."""
        _require_sm90a("warpgroup MMA (wgmma)")
        a_in_registers = self.a_source == "rmem"
        if not isinstance(b, DescriptorFragment) or (not a_in_registers and not isinstance(a, DescriptorFragment)):
            raise DSLError(ARGUMENT_MISMATCH, "warpgroup MMA reads B (and A, unless a_src=OperandSource.RMEM) from "
                           "shared memory: pass make_fragment_A/B of shared-memory partitions", user_location())
        if a_in_registers and (isinstance(a, DescriptorFragment) or a.memspace != "rmem"):
            raise DSLError(ARGUMENT_MISMATCH, "this op takes A from registers: pass make_fragment_A of a partition, "
                           "filled by a copy", user_location())
        n_acc = size(c.shape)
        if c is not d:
            for i in range(n_acc):
                d[i] = c[i]
        a_ops = packed_registers(a, "the A fragment") if a_in_registers else [a.descriptor(self.a_major).ir]
        desc_b = b.descriptor(self.b_major)
        ab = "f16" if self.a_dtype is Float16 else "bf16"
        scale_d = Int32(1) if accumulate is True else convert(as_numeric(accumulate, Boolean), Int32)
        accs = [d[i].ir for i in range(n_acc)]
        # Operands are numbered outputs first, then inputs: the tied accumulators, A (four
        # registers or a descriptor), B, the flag. A from registers has no transpose bit.
        regs = ", ".join(f"${i}" for i in range(n_acc))
        at = 2 * n_acc
        a_text = ("{" + ", ".join(f"${at + i}" for i in range(len(a_ops))) + "}") if a_in_registers else f"${at}"
        at += len(a_ops)
        trans_b = int(self.b_major is OperandMajorMode.MN)
        tail = f"{trans_b}" if a_in_registers else f"{int(self.a_major is OperandMajorMode.MN)}, {trans_b}"
        text = (f"{{\\0A.reg .pred p;\\0Asetp.ne.b32 p, ${at + 1}, 0;\\0A"
                f"wgmma.mma_async.sync.aligned.m64n{self.shape_mnk[1]}k16.f32.{ab}.{ab} "
                f"{{{regs}}}, {a_text}, ${at}, p, 1, 1, {tail};\\0A}}")
        struct_t = f"!llvm.struct<({', '.join(['f32'] * n_acc)})>"
        a_constraints = ["r"] * len(a_ops) if a_in_registers else ["l"]
        result = inline_asm(text, ["=f"] * n_acc, accs + a_ops + [desc_b.ir, scale_d.ir], struct_t,
                            input_constraints=[str(i) for i in range(n_acc)] + a_constraints + ["l", "r"])
        for i, v in enumerate(struct_fields(result, n_acc, "f32")):
            d[i] = Float32._wrap(v)


def _require_sm90a(what: str) -> None:
    require_arch("sm_90a", what)


# -- fences -----------------------------------------------------------------------------------------

def fence() -> None:
    """Orders register (and shared-memory) writes before the next wgmma that reads them."""
    _require_sm90a("warpgroup.fence")
    ir.current().emit("nvvm.wgmma.fence.aligned")


def commit_group() -> None:
    """Closes the group of wgmmas issued since the last commit."""
    _require_sm90a("warpgroup.commit_group")
    ir.current().emit("nvvm.wgmma.commit.group.sync.aligned")


def wait_group(group) -> None:
    """Waits until at most `group` (a compile-time int) committed groups are still running."""
    _require_sm90a("warpgroup.wait_group")
    if not isinstance(group, int) or group < 0:
        raise DSLError(ARGUMENT_MISMATCH, f"wait_group takes a compile-time count >= 0, got {group}", user_location())
    ir.current().emit(f"nvvm.wgmma.wait.group.sync.aligned {group}")


# -- shared-memory operands as descriptors ----------------------------------------------------------

class DescriptorFragment:
    """A thread's partition of a shared-memory operand, standing for the wgmma descriptors of
    its atoms (CuTe DSL's make_fragment_A/B of an SS MMA). Slices like the tensor it wraps."""

    def __init__(self, tensor: Tensor):
        self.tensor = tensor

    @property
    def shape(self):
        return self.tensor.shape

    @property
    def _layout(self):
        return self.tensor._layout

    @property
    def dtype(self):
        return self.tensor.dtype

    def with_layout(self, layout) -> "DescriptorFragment":
        return DescriptorFragment(self.tensor.with_layout(layout))

    def __getitem__(self, coord) -> "DescriptorFragment":
        return DescriptorFragment(self.tensor._slice(coord))

    def __str__(self) -> str:
        return f"descriptors of {self.tensor}"

    def descriptor(self, major: OperandMajorMode) -> Int64:
        """The 64-bit matrix descriptor of this (rows x 16) tile."""
        return smem_descriptor(self.tensor, major)


def smem_operand(atom, operand: str, partitioned) -> DescriptorFragment:
    if not isinstance(partitioned, Tensor) or partitioned.memspace != "smem":
        raise DSLError(ARGUMENT_MISMATCH, f"{atom} reads {operand} from shared memory: make_fragment_{operand} takes "
                       f"a shared-memory partition (partition_{operand} of a shared-memory tensor)", user_location())
    return DescriptorFragment(partitioned)


# Descriptor layout types (bits 62-63) by swizzle width in bytes.
_LAYOUT_TYPE = {128: 1, 64: 2, 32: 3}


def smem_descriptor(tile: Tensor, major: OperandMajorMode = OperandMajorMode.K) -> Int64:
    """wgmma's descriptor of a (rows x 16) tile: bits 0-13 the start address >> 4, 16-29 the
    leading byte offset >> 4, 32-45 the stride byte offset >> 4, 62-63 the swizzle mode. The
    tile must be CuTe's canonical layout for its major mode, with S = the swizzle's row of
    `width` bytes, in elements:

      K-major:  rows ((8, m) : (S, SBO)),  k ((16) : (1))            LBO unused (1)
      MN-major: rows ((S, m) : (1, LBO)),  k ((8, 2) : (S, SBO))

    The hardware applies the swizzle to the addresses it forms, so the start address is the
    unswizzled one (a k-th slice starts 32*k bytes or k*16 rows in)."""
    width = _swizzle_width(tile)
    elem = byte_width(tile.dtype)
    layout = tile._layout
    while isinstance(layout.shape, tuple) and len(layout.shape) == 1:   # the atom's value mode, (rows, 16)
        layout = layout[0]
    rows = size(layout.shape[0]) if isinstance(layout.shape, tuple) and len(layout.shape) == 2 else None
    if rows is None or size(layout.shape[1]) != 16:
        raise DSLError(ARGUMENT_MISMATCH, f"a wgmma operand tile is (rows, 16), got {layout}", user_location())
    if not layout.is_static:
        raise DSLError(ARGUMENT_MISMATCH, f"wgmma operands need a static shared-memory layout, got {layout}",
                       user_location())
    per_row = width // elem

    def at(r, k):
        return layout((r, k))

    if major is OperandMajorMode.K:
        lbo, sbo = 1, at(8, 0) if rows > 8 else 8 * per_row
        want_row = [(r % 8) * per_row + (r // 8) * sbo for r in range(rows)]
        want_k = list(range(16))
    else:
        if rows % per_row and rows > per_row:
            raise _not_canonical(tile, width, major, f"{rows} rows are not whole {width}-byte swizzle rows")
        lbo, sbo = (at(per_row, 0) if rows > per_row else 1), at(0, 8)
        want_row = [(r % per_row) + (r // per_row) * lbo for r in range(rows)]
        want_k = [(k % 8) * per_row + (k // 8) * sbo for k in range(16)]
    for k in range(16):
        if at(0, k) != want_k[k]:
            raise _not_canonical(tile, width, major, f"element k={k} of row 0 is at {at(0, k)}, not {want_k[k]}")
    for r in range(rows):
        if at(r, 0) != want_row[r]:
            raise _not_canonical(tile, width, major, f"row {r} starts at element {at(r, 0)}, not {want_row[r]}")
    for name, value in (("leading", lbo), ("stride", sbo)):
        if value != 1 and ((value * elem) % 16 or (value * elem) >> 4 >= 1 << 14):
            raise _not_canonical(tile, width, major, f"the {name} byte offset {value * elem} is not a multiple of "
                                 "16 below 256 KB")
    if tile.alignment < 8 * width:
        raise DSLError(ARGUMENT_MISMATCH, f"a {width}-byte swizzled wgmma operand must start {8 * width}-byte "
                       f"aligned; this shared memory is known {tile.alignment}-byte aligned", user_location(),
                       f"allocate it with byte_alignment={8 * width} (or Align[{8 * width}] in a cute.struct)")
    b = ir.current()
    base = Int32._wrap(b.op(f"llvm.ptrtoint {tile.ptr.name} : {tile.ptr.type} to i32", "i32"))
    offset = tile.offset if not isinstance(tile.offset, int) else Int32(tile.offset)
    address = base + convert(offset, Int32) * elem
    start = convert((address >> 4) & 0x3FFF, Int64)
    lbo_field = 1 if lbo == 1 else (lbo * elem) >> 4
    high = (lbo_field << 16) | (((sbo * elem) >> 4) << 32) | (_LAYOUT_TYPE[width] << 62)
    return start | Int64(high - (1 << 64) if high >= 1 << 63 else high)


def _swizzle_width(tile: Tensor) -> int:
    sw = tile.swizzle
    if not isinstance(sw, Swizzle) or sw.base != 4 or sw.shift != 3 or sw.bits not in (1, 2, 3):
        raise DSLError(ARGUMENT_MISMATCH, f"wgmma reads shared memory swizzled by Sw<1|2|3,4,3> (32-, 64- or 128-byte "
                       f"rows), got {sw or 'no swizzle'} on {tile.layout}", user_location(),
                       "build the shared layout from a swizzle atom, e.g. make_composed_layout(make_swizzle(3, 4, 3), "
                       "0, make_layout((8, 64), stride=(64, 1))) tiled with tile_to_shape")
    return 16 << sw.bits


def _not_canonical(tile: Tensor, width: int, major, problem: str) -> DSLError:
    bits = (width // 16).bit_length() - 1
    per_row = width // byte_width(tile.dtype)
    atom = (f"(8,{per_row}):({per_row},1)" if major is OperandMajorMode.K else f"({per_row},8):(1,{per_row})")
    return DSLError(ARGUMENT_MISMATCH, f"this shared-memory tile is not a {major.name}-major {width}-byte swizzled "
                    f"wgmma operand: {problem} in {tile.layout}", user_location(),
                    f"build it with tile_to_shape of the Sw<{bits},4,3> o {atom} atom (the op's "
                    f"{major.name}-major mode must match how the operand is stored)")


class StMatrix8x8x16bOp:
    """`stmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_90): a warp stores four 8x8 tiles of 16-bit
    elements to shared memory, each thread giving one 16-byte row's address, the registers laid
    out as an MMA accumulator fragment. Through cute.make_tiled_copy_C of a warpgroup MMA it
    writes a (16-bit converted) accumulator fragment to a row-major shared tile, 16 columns of a
    warp's 16 rows per instruction: the epilogue's way to shared memory before a TMA store.
    Transposed stores are not supported yet."""

    def __init__(self, transpose: bool = False, num_matrices: int = 4):
        if transpose or num_matrices != 4:
            raise DSLError(ARGUMENT_MISMATCH, "stmatrix supports transpose=False, num_matrices=4 for now",
                           user_location())
        self.transpose, self.num_matrices = transpose, num_matrices


def stsm_layout(n: int) -> Layout:
    """Which element of a 64xN accumulator tile each thread's stmatrix row address points at,
    and the 8 values of its row: in warp w, lane l = l0 + 8 l1 + 16 l2 addresses row
    l0 + 8 l1 + 16 w, columns 8 l2 + 16 j for the j-th 16-column group."""
    return Layout(((8, 2, 2, 4), (8, n // 16)), ((1, 8, 512, 16), (64, 1024)))
