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
(on byte addresses) or unswizzled (interleaved 8 x 16-byte core matrices): K-major (8-row
groups of 32-, 64- or 128-byte rows, K contiguous) or MN-major (MN contiguous in 32-/64-/128-byte
rows, 8 k per group); the op's a_major_mode / b_major_mode say which, and set the instruction's
transpose bits.

A may instead come from registers (`a_src=OperandSource.RMEM`, K-major): make_fragment_A gives
registers laid out as each warp's mma.sync A fragment for its 16 rows, filled by a copy.

Ops: MmaF16BF16Op (fp16/bf16, k16; fp16 or fp32 accumulators for fp16), MmaF8Op (e4m3/e5m2,
k32; fp16 or fp32 accumulators) and MmaTF32Op (k8, fp32 accumulators; not a CuTe DSL name).
Only 16-bit operands may be MN-major: wgmma transposes nothing else.
"""

from __future__ import annotations

import enum

from .. import ir
from ..diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from ..layout import Layout, Swizzle, make_composed_layout, make_layout, make_swizzle, size
from ..mma_atom import MmaAtom, check_types, inline_asm, packed_registers, struct_fields, unpack_registers
from ..numeric import (BFloat16, Boolean, Float8E4M3FN, Float8E5M2, Float16, Float32, Int32, Int64, as_numeric,
                       convert)
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
# t1 = lane / 4 picks the row (then the row 8 below). fp16 accumulators pack values 2i, 2i+1
# into one register; the element mapping is the same.
def _c_layout(n: int) -> Layout:
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


# A from registers (RS): each warp w holds rows 16w..16w+15 of the 64xK tile as mma.sync's A
# fragment of its input width (column-major index m + 64 k):
#  16-bit (k16): a register pair along k, then row + 8, then k + 8;
#  tf32 (k8):   one value, then row + 8, then k + 4;
#  8-bit (k32): four values along k, then row + 8, then k + 16.
_RS_A_64x16 = Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512)))
_RS_A = {
    16: _RS_A_64x16,
    32: Layout(((4, 8, 4), (2, 2)), ((64, 1, 16), (8, 256))),
    8: Layout(((4, 8, 4), (4, 2, 2)), ((256, 1, 16), (64, 8, 1024))),
}


def _smem_layout(rows: int, k: int) -> Layout:
    """A shared operand: every thread of the warpgroup names the whole (rows x k) tile."""
    return Layout((128, (rows, k)), (0, (1, rows)))


# The PTX type of each input type.
_PTX_TYPE = {Float16: "f16", BFloat16: "bf16", Float32: "tf32", Float8E4M3FN: "e4m3", Float8E5M2: "e5m2"}


class WarpgroupMmaOp(MmaAtom):
    """D (64xN) = A (64xK) * B (KxN) + C, one `wgmma.mma_async` per atom; K is 32 bytes of the
    input type (16 for fp16/bf16, 8 for tf32, 32 for fp8). The ops below fix the types."""

    threads = 128

    def _setup(self, name: str, a_dtype, b_dtype, acc_dtype, instruction_shape, a_src, a_major_mode, b_major_mode):
        m, n, k = tuple(instruction_shape)
        want_k = 256 // a_dtype.width
        if m != 64 or k != want_k or not (8 <= n <= 256 and n % 8 == 0):
            raise DSLError(ARGUMENT_MISMATCH, f"{name} shapes are (64, N, {want_k}) with N in 8..256 by 8, "
                           f"got {tuple(instruction_shape)}", user_location())
        if not isinstance(a_src, OperandSource):
            raise DSLError(ARGUMENT_MISMATCH, f"a_src is an OperandSource (SMEM or RMEM), got {a_src!r}",
                           user_location())
        for operand, major in (("A", a_major_mode), ("B", b_major_mode)):
            if not isinstance(major, OperandMajorMode):
                raise DSLError(ARGUMENT_MISMATCH, f"{operand}'s major mode is an OperandMajorMode (K or MN), got "
                               f"{major!r}", user_location())
            if major is OperandMajorMode.MN and a_dtype.width != 16:
                raise DSLError(ARGUMENT_MISMATCH, f"{name}: wgmma transposes only 16-bit operands; {operand} must "
                               f"be K-major (OperandMajorMode.K)", user_location(),
                               "store the operand K-major in shared memory")
        if a_src is OperandSource.RMEM and a_major_mode is not OperandMajorMode.K:
            raise DSLError(ARGUMENT_MISMATCH, "A from registers is K-major (a_major_mode=OperandMajorMode.K)",
                           user_location())
        self.a_major, self.b_major = a_major_mode, b_major_mode
        self.a_dtype, self.b_dtype, self.acc_dtype = a_dtype, b_dtype, acc_dtype
        self.shape_mnk = (m, n, k)
        self.a_source, self.b_source = a_src.value, "smem"
        self.layout_a = _RS_A[a_dtype.width] if a_src is OperandSource.RMEM else _smem_layout(m, k)
        self.layout_b, self.layout_c = _smem_layout(n, k), _c_layout(n)

    def __str__(self) -> str:
        types = self.a_dtype.__name__ if self.a_dtype is self.b_dtype else \
            f"{self.a_dtype.__name__}, {self.b_dtype.__name__}"
        m, n, k = self.shape_mnk
        return f"warpgroup.{type(self).__name__}({types}, {self.acc_dtype.__name__}, m{m}n{n}k{k})"

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
        a_ops = packed_registers(a, "the A fragment", as_bits=True) if a_in_registers \
            else [a.descriptor(self.a_major).ir]
        desc_b = b.descriptor(self.b_major)
        scale_d = Int32(1) if accumulate is True else convert(as_numeric(accumulate, Boolean), Int32)
        # fp32 accumulators are one register each; fp16 ones two to a register (.f16x2).
        half = self.acc_dtype is Float16
        accs = packed_registers(d, "the accumulators") if half else [d[i].ir for i in range(n_acc)]
        n_reg = len(accs)
        # Operands are numbered outputs first, then inputs: the tied accumulators, A (registers
        # or a descriptor), B, the flag. Only 16-bit inputs have transpose bits; A from
        # registers has none.
        regs = ", ".join(f"${i}" for i in range(n_reg))
        at = 2 * n_reg
        a_text = ("{" + ", ".join(f"${at + i}" for i in range(len(a_ops))) + "}") if a_in_registers else f"${at}"
        at += len(a_ops)
        tail = "p, 1, 1"
        if self.a_dtype.width == 16:
            trans_b = int(self.b_major is OperandMajorMode.MN)
            tail += f", {trans_b}" if a_in_registers else f", {int(self.a_major is OperandMajorMode.MN)}, {trans_b}"
        m, n, k = self.shape_mnk
        types = f"{'f16' if half else 'f32'}.{_PTX_TYPE[self.a_dtype]}.{_PTX_TYPE[self.b_dtype]}"
        text = (f"{{\\0A.reg .pred p;\\0Asetp.ne.b32 p, ${at + 1}, 0;\\0A"
                f"wgmma.mma_async.sync.aligned.m{m}n{n}k{k}.{types} {{{regs}}}, {a_text}, ${at}, {tail};\\0A}}")
        reg_t, out = ("i32", "=r") if half else ("f32", "=f")
        struct_t = f"!llvm.struct<({', '.join([reg_t] * n_reg)})>"
        a_constraints = ["r"] * len(a_ops) if a_in_registers else ["l"]
        result = inline_asm(text, [out] * n_reg, accs + a_ops + [desc_b.ir, scale_d.ir], struct_t,
                            input_constraints=[str(i) for i in range(n_reg)] + a_constraints + ["l", "r"])
        for i, v in enumerate(unpack_registers(struct_fields(result, n_reg, reg_t), self.acc_dtype)):
            d[i] = v


class MmaF16BF16Op(WarpgroupMmaOp):
    """fp16 or bf16 inputs (k16), fp32 accumulators, or fp16 ones for fp16 inputs; A and B
    K-major or MN-major (transposed) in shared memory, or A K-major in registers."""

    def __init__(self, ab_dtype, acc_dtype, instruction_shape, a_src=OperandSource.SMEM,
                 a_major_mode=OperandMajorMode.K, b_major_mode=OperandMajorMode.K):
        check_types("warpgroup.MmaF16BF16Op", ab_dtype, acc_dtype, {Float16: (Float32, Float16), BFloat16: (Float32,)})
        self._setup("warpgroup.MmaF16BF16Op", ab_dtype, ab_dtype, acc_dtype, instruction_shape, a_src, a_major_mode,
                    b_major_mode)


class MmaF8Op(WarpgroupMmaOp):
    """fp8 inputs (Float8E4M3FN or Float8E5M2, A and B may differ; k32), fp32 or fp16
    accumulators; both operands K-major (wgmma does not transpose 8-bit operands)."""

    def __init__(self, a_dtype, b_dtype, acc_dtype, instruction_shape, a_src=OperandSource.SMEM,
                 a_major_mode=OperandMajorMode.K, b_major_mode=OperandMajorMode.K):
        fp8 = (Float8E4M3FN, Float8E5M2)
        for operand, dtype in (("A", a_dtype), ("B", b_dtype)):
            if dtype not in fp8:
                raise DSLError(UNSUPPORTED_TYPE, f"warpgroup.MmaF8Op: {operand} is Float8E4M3FN or Float8E5M2, got "
                               f"{getattr(dtype, '__name__', dtype)}", user_location())
        check_types("warpgroup.MmaF8Op", a_dtype, acc_dtype, {t: (Float32, Float16) for t in fp8})
        self._setup("warpgroup.MmaF8Op", a_dtype, b_dtype, acc_dtype, instruction_shape, a_src, a_major_mode,
                    b_major_mode)


class MmaTF32Op(WarpgroupMmaOp):
    """tf32 inputs (Float32 values whose low 13 mantissa bits the tensor core ignores; k8),
    fp32 accumulators; both operands K-major. (CuTe DSL has no warpgroup op of this name.)"""

    def __init__(self, instruction_shape, a_src=OperandSource.SMEM, a_major_mode=OperandMajorMode.K,
                 b_major_mode=OperandMajorMode.K):
        self._setup("warpgroup.MmaTF32Op", Float32, Float32, Float32, instruction_shape, a_src, a_major_mode,
                    b_major_mode)


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
        """The 64-bit matrix descriptor of this (rows x k) tile, k = 32 bytes of elements."""
        return smem_descriptor(self.tensor, major)


def smem_operand(atom, operand: str, partitioned) -> DescriptorFragment:
    if not isinstance(partitioned, Tensor) or partitioned.memspace != "smem":
        raise DSLError(ARGUMENT_MISMATCH, f"{atom} reads {operand} from shared memory: make_fragment_{operand} takes "
                       f"a shared-memory partition (partition_{operand} of a shared-memory tensor)", user_location())
    return DescriptorFragment(partitioned)


# Descriptor layout types (bits 62-63) by swizzle width in bytes (16: no swizzle, "interleave").
_LAYOUT_TYPE = {128: 1, 64: 2, 32: 3, 16: 0}


def smem_descriptor(tile: Tensor, major: OperandMajorMode = OperandMajorMode.K) -> Int64:
    """wgmma's descriptor of a (rows x k) tile (k = 32 bytes of elements): bits 0-13 the start
    address >> 4, 16-29 the leading byte offset >> 4, 32-45 the stride byte offset >> 4, 62-63
    the layout type. The tile must be CuTe's canonical layout for its major mode and swizzle,
    with S = the elements in one swizzle row of `width` bytes and T = the elements in 16 bytes:

      swizzled (Sw<1|2|3,4,3>, 32-, 64- or 128-byte rows):
        K-major:  rows ((8, m) : (S, SBO)),  k (2T : 1)                    LBO unused
        MN-major: rows ((S, m) : (1, LBO)),  k ((8, 2) : (S, SBO))
      no swizzle (interleaved 8 x 16-byte core matrices):
        K-major:  rows ((8, m) : (T, SBO)),  k ((T, 2) : (1, LBO))
        MN-major: rows ((T, m) : (1, SBO)),  k ((8, 2) : (T, LBO))

    The hardware applies the swizzle to the addresses it forms, so the start address is the
    unswizzled one (a k-th slice starts 32*k bytes or k*16 rows in)."""
    width = _swizzle_width(tile)
    elem = byte_width(tile.dtype)
    k_atom = 32 // elem
    layout = tile._layout
    while isinstance(layout.shape, tuple) and len(layout.shape) == 1:   # the atom's value mode, (rows, k)
        layout = layout[0]
    rows = size(layout.shape[0]) if isinstance(layout.shape, tuple) and len(layout.shape) == 2 else None
    if rows is None or size(layout.shape[1]) != k_atom:
        raise DSLError(ARGUMENT_MISMATCH, f"a wgmma operand tile of {tile.dtype.__name__} is (rows, {k_atom}), got "
                       f"{layout}", user_location())
    if not layout.is_static:
        raise DSLError(ARGUMENT_MISMATCH, f"wgmma operands need a static shared-memory layout, got {layout}",
                       user_location())
    per_row = width // elem          # S, or T without a swizzle
    t = 16 // elem

    def at(r, k):
        return layout((r, k))

    if major is OperandMajorMode.K:
        sbo = at(8, 0) if rows > 8 else 8 * per_row
        lbo = at(0, t) if width == 16 else 1
        want_row = [(r % 8) * per_row + (r // 8) * sbo for r in range(rows)]
        want_k = [k % t + (k // t) * lbo for k in range(k_atom)] if width == 16 else list(range(k_atom))
    else:
        if rows % per_row and rows > per_row:
            raise _not_canonical(tile, width, major, f"{rows} rows are not whole {width}-byte rows")
        mn_step = at(per_row, 0) if rows > per_row else 1     # the next group of per_row rows
        k_step = at(0, 8)                                     # k + 8
        lbo, sbo = (k_step, mn_step) if width == 16 else (mn_step, k_step)
        want_row = [(r % per_row) + (r // per_row) * mn_step for r in range(rows)]
        want_k = [(k % 8) * per_row + (k // 8) * k_step for k in range(k_atom)]
    for k in range(k_atom):
        if at(0, k) != want_k[k]:
            raise _not_canonical(tile, width, major, f"element k={k} of row 0 is at {at(0, k)}, not {want_k[k]}")
    for r in range(rows):
        if at(r, 0) != want_row[r]:
            raise _not_canonical(tile, width, major, f"row {r} starts at element {at(r, 0)}, not {want_row[r]}")
    for name, value in (("leading", lbo), ("stride", sbo)):
        if value != 1 and ((value * elem) % 16 or (value * elem) >> 4 >= 1 << 14):
            raise _not_canonical(tile, width, major, f"the {name} byte offset {value * elem} is not a multiple of "
                                 "16 below 256 KB")
    align = 8 * width if width > 16 else 16
    if tile.alignment < align:
        raise DSLError(ARGUMENT_MISMATCH, f"a {_form(width)} wgmma operand must start {align}-byte aligned; this "
                       f"shared memory is known {tile.alignment}-byte aligned", user_location(),
                       f"allocate it with byte_alignment={align} (or Align[{align}] in a cute.struct)")
    b = ir.current()
    base = Int32._wrap(b.op(f"llvm.ptrtoint {tile.ptr.name} : {tile.ptr.type} to i32", "i32"))
    offset = tile.offset if not isinstance(tile.offset, int) else Int32(tile.offset)
    address = base + convert(offset, Int32) * elem
    start = convert((address >> 4) & 0x3FFF, Int64)
    lbo_field = 1 if lbo == 1 else (lbo * elem) >> 4
    high = (lbo_field << 16) | (((sbo * elem) >> 4) << 32) | (_LAYOUT_TYPE[width] << 62)
    return start | Int64(high - (1 << 64) if high >= 1 << 63 else high)


def _form(width: int) -> str:
    return "non-swizzled (interleaved)" if width == 16 else f"{width}-byte swizzled"


def _swizzle_width(tile: Tensor) -> int:
    """The swizzle row in bytes: 32, 64 or 128 for Sw<1|2|3,4,3>, 16 for none (Sw<0,4,3>)."""
    sw = tile.swizzle
    if sw is None or (isinstance(sw, Swizzle) and sw.bits == 0):
        return 16
    if not isinstance(sw, Swizzle) or sw.base != 4 or sw.shift != 3 or sw.bits not in (1, 2, 3):
        raise DSLError(ARGUMENT_MISMATCH, f"wgmma reads shared memory swizzled by Sw<1|2|3,4,3> (32-, 64- or 128-byte "
                       f"rows) or not swizzled, got {sw} on {tile.layout}", user_location(),
                       "build the shared layout from a swizzle atom, e.g. make_composed_layout(make_swizzle(3, 4, 3), "
                       "0, make_layout((8, 64), stride=(64, 1))) tiled with tile_to_shape")
    return 16 << sw.bits


def _not_canonical(tile: Tensor, width: int, major, problem: str) -> DSLError:
    per_row = width // byte_width(tile.dtype)
    atom = (f"(8,{per_row}):({per_row},1)" if major is OperandMajorMode.K else f"({per_row},8):(1,{per_row})")
    if width == 16:
        how = f"tile_to_shape of the {atom} core-matrix atom (no swizzle)"
    else:
        how = f"tile_to_shape of the Sw<{(width // 16).bit_length() - 1},4,3> o {atom} atom"
    return DSLError(ARGUMENT_MISMATCH, f"this shared-memory tile is not a {major.name}-major {_form(width)} "
                    f"wgmma operand: {problem} in {tile.layout}", user_location(),
                    f"build it with {how} (the op's {major.name}-major mode must match how the operand is stored)")


# -- shared-memory layout atoms ---------------------------------------------------------------------

class SmemLayoutAtomKind(enum.Enum):
    """The smallest shared-memory layouts that wgmma (and TMA) read, by major mode and swizzle;
    tile_to_shape one onto (rows, k, stages) to get an operand buffer."""
    MN_INTER = ("MN", 16)
    MN_SW32 = ("MN", 32)
    MN_SW64 = ("MN", 64)
    MN_SW128 = ("MN", 128)
    K_INTER = ("K", 16)
    K_SW32 = ("K", 32)
    K_SW64 = ("K", 64)
    K_SW128 = ("K", 128)


def make_smem_layout_atom(kind: SmemLayoutAtomKind, element_type):
    """CuTe DSL's make_smem_layout_atom: 8 rows of one swizzle row (`width` bytes of K, K-major)
    or one swizzle row of M/N by 8 k (MN-major), swizzled by Sw<log2(width/16),4,3> on byte
    addresses; the INTER kinds are unswizzled 8 x 16-byte core matrices."""
    if not isinstance(kind, SmemLayoutAtomKind):
        raise DSLError(ARGUMENT_MISMATCH, f"make_smem_layout_atom takes a SmemLayoutAtomKind, got {kind!r}",
                       user_location())
    major, width = kind.value
    if major == "MN" and element_type.width != 16:
        raise DSLError(ARGUMENT_MISMATCH, f"{kind.name}: wgmma reads only 16-bit operands MN-major, got "
                       f"{element_type.__name__}", user_location(), "use a K_* kind")
    per_row = width * 8 // element_type.width
    inner = make_layout((8, per_row), stride=(per_row, 1)) if major == "K" else \
        make_layout((per_row, 8), stride=(1, per_row))
    if width == 16:
        return inner
    return make_composed_layout(make_swizzle((width // 16).bit_length() - 1, 4, 3), 0, inner)


class StMatrix8x8x16bOp:
    """`stmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16` (sm_90): a warp stores four 8x8 tiles of
    16-bit elements to shared memory, each thread giving one 16-byte row's address, the
    registers laid out as an MMA accumulator fragment. Through cute.make_tiled_copy_C of a
    warpgroup MMA it writes a (16-bit) accumulator fragment to shared memory, 16 columns of a
    warp's 16 rows per instruction: the epilogue's way to shared memory before a TMA store.
    Without `transpose` the tile is row-major (N contiguous); with it, column-major (M
    contiguous), each 8x8 tile transposed on the way."""

    def __init__(self, transpose: bool = False, num_matrices: int = 4):
        if num_matrices != 4:
            raise DSLError(ARGUMENT_MISMATCH, f"stmatrix stores num_matrices=4 here, got {num_matrices}",
                           user_location())
        self.transpose, self.num_matrices = bool(transpose), num_matrices


def stsm_layout(n: int, transpose: bool = False) -> Layout:
    """Which element of a 64xN accumulator tile (column-major index m + 64 n) each thread's
    stmatrix row address points at, and the 8 values of its row. Register i of a 16-column group
    is the 8x8 tile (rows 8 (i % 2).., columns 8 (i // 2)..), whose rows lanes 8i..8i+7 address.
    In warp w, lane l = l0 + 8 l1 + 16 l2:
      row-major:  row l0 + 8 l1 + 16 w, columns 8 l2 + 16 j.. (the values along n);
      transposed: column l0 + 8 l2 + 16 j, rows 8 l1 + 16 w.. (the values along m)."""
    if transpose:
        return Layout(((8, 2, 2, 4), (8, n // 16)), ((64, 8, 512, 16), (1, 1024)))
    return Layout(((8, 2, 2, 4), (8, n // 16)), ((1, 8, 512, 16), (64, 1024)))
