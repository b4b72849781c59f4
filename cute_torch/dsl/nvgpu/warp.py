"""`cute.nvgpu.warp`: MMAs that one warp issues together (`mma.sync`, sm_80 and newer).

    op = cute.nvgpu.warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (2, 2, 1))     # four warps, 32x16 per k-step of 16

Each thread holds its share of the 16x16 A, 8x16 B and 16x8 C tiles in registers; which
elements is the atom's thread-value layout (CuTe's SM80_16x8x16 layouts, from the PTX ISA's
fragment tables): (thread, value) -> the column-major index of the element in the tile.
"""

from __future__ import annotations

from ..diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from ..layout import Layout
from ..mma_atom import MmaAtom, check_types, emit_inline_mma, zero_unless
from ..numeric import BFloat16, Float16, Float32

# The PTX ISA's m16n8k16 fragments. Threads t = t0 + 4*t1 (t0 = lane % 4, t1 = lane / 4).
# A (16x16): a register pair holds k = 2*t0 + {0,1}; the pairs go row + 8, then k + 8.
_A_16x16 = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
# B (8x16, indexed n + 8*k): k = 2*t0 + {0,1}, then k + 8; n = t1.
_B_8x16 = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
# C (16x8): n = 2*t0 + {0,1}, then row + 8; m = t1.
_C_16x8 = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))


class MmaF16BF16Op(MmaAtom):
    """D (16x8) = A (16x16) * B (16x8) + C with fp16 or bf16 inputs and fp32 accumulators
    (fp16 accumulators for fp16 inputs), one `mma.sync.aligned.m16n8k16.row.col` per call."""

    threads = 32

    def __init__(self, ab_dtype, acc_dtype, shape_mnk=(16, 8, 16)):
        check_types("warp.MmaF16BF16Op", ab_dtype, acc_dtype, {Float16: (Float32, Float16), BFloat16: (Float32,)})
        if tuple(shape_mnk) != (16, 8, 16):
            raise DSLError(ARGUMENT_MISMATCH, f"warp.MmaF16BF16Op supports shape_mnk (16, 8, 16), got {shape_mnk}",
                           user_location())
        self.a_dtype = self.b_dtype = ab_dtype
        self.acc_dtype = acc_dtype
        self.shape_mnk = (16, 8, 16)
        self.layout_a, self.layout_b, self.layout_c = _A_16x16, _B_8x16, _C_16x8

    def __str__(self) -> str:
        return f"warp.MmaF16BF16Op({self.a_dtype.__name__}, {self.acc_dtype.__name__}, m16n8k16)"

    def call(self, d, a, b, c, accumulate=True) -> None:
        """One MMA on fragments sliced to this atom (their first mode, the values); without
        `accumulate`, C is taken as zero."""
        if accumulate is not True:
            c = zero_unless(c, accumulate)
        ab = "f16" if self.a_dtype is Float16 else "bf16"
        acc = "f32" if self.acc_dtype is Float32 else "f16"
        emit_inline_mma(f"mma.sync.aligned.m16n8k16.row.col.{acc}.{ab}.{ab}.{acc}", d, a, b, c, self.acc_dtype)


# The m16n8k8 tf32 fragments (32-bit elements, one per register).
# A (16x8): m = t1, then row + 8; k = t0, then k + 4.
_A_16x8 = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
# B (8x8, indexed n + 8*k): k = t0, then k + 4; n = t1.
_B_8x8 = Layout(((4, 8), 2), ((8, 1), 32))


class MmaTF32Op(MmaAtom):
    """D (16x8, fp32) = A (16x8) * B (8x8) + C with tf32 inputs (fp32 values whose low 13
    mantissa bits the tensor core ignores), one `mma.sync.aligned.m16n8k8.row.col` per call.
    (CuTe DSL has no such op name; this follows MmaF16BF16Op's.)"""

    threads = 32

    def __init__(self, ab_dtype=Float32, acc_dtype=Float32, shape_mnk=(16, 8, 8)):
        check_types("warp.MmaTF32Op", ab_dtype, acc_dtype, {Float32: (Float32,)})
        if tuple(shape_mnk) != (16, 8, 8):
            raise DSLError(ARGUMENT_MISMATCH, f"warp.MmaTF32Op supports shape_mnk (16, 8, 8), got {shape_mnk}",
                           user_location())
        self.a_dtype = self.b_dtype = self.acc_dtype = Float32
        self.shape_mnk = (16, 8, 8)
        self.layout_a, self.layout_b, self.layout_c = _A_16x8, _B_8x8, _C_16x8

    def __str__(self) -> str:
        return "warp.MmaTF32Op(Float32, Float32, m16n8k8)"

    def call(self, d, a, b, c, accumulate=True) -> None:
        if accumulate is not True:
            c = zero_unless(c, accumulate)
        emit_inline_mma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", d, a, b, c, Float32)


class LdMatrix8x8x16bOp:
    """`ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16`: a warp loads `num_matrices` 8x8
    tiles of 16-bit elements from shared memory, each thread giving one 16-byte row's address
    and getting back one 32-bit register per tile, laid out as mma.sync's fragments. Through
    cute.make_tiled_copy_A/B of a warp MMA it fills the A (x4: the 16x16 atom tile) or B (x2: the
    8x16 tile) fragment with one instruction per atom instead of one shared load per register
    pair. Without `transpose` the rows are K-contiguous (a K-major operand); with it they are
    M- or N-contiguous (an MN-major operand, e.g. a row-major (K, N) B), and the hardware
    transposes each 8x8 tile on the way."""

    def __init__(self, transpose: bool = False, num_matrices: int = 4):
        if num_matrices not in (1, 2, 4):
            raise DSLError(ARGUMENT_MISMATCH, f"ldmatrix loads 1, 2 or 4 matrices, got {num_matrices}",
                           user_location())
        self.transpose, self.num_matrices = bool(transpose), num_matrices


# Which element of an m16n8k16 operand tile each lane's ldmatrix row address points at, with the
# 8 values of its 16-byte row (lane = l0 + 8 l1 + 16 l2; indices column-major, m + 16 k for A,
# n + 8 k for B). Register j of a thread is tile j, so tile j must be the fragment's j-th piece:
#  A (x4): tile j = l1 + 2 l2 covers rows 8 (j % 2).., k 8 (j // 2)..;
#  B (x2): tile j = l1 covers k 8 j..; lanes 16-31 repeat 0-15.
# K-major rows: lane l0 is row (m or n) l0 of its tile, the values run along k.
LDSM_A_16x16 = Layout(((8, 2, 2), 8), ((1, 8, 128), 16))
LDSM_B_8x16 = Layout(((8, 2, 2), 8), ((1, 64, 0), 8))
# Transposed (MN-major rows): lane l0 is k = l0 of its tile, the values run along m or n.
LDSM_T_A_16x16 = Layout(((8, 2, 2), 8), ((16, 8, 128), 1))
LDSM_T_B_8x16 = Layout(((8, 2, 2), 8), ((8, 64, 0), 1))
