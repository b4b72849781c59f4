"""The Hopper GEMM of the kernel library: persistent, warp-specialized, TMA in and out, any
elementwise epilogue fused.

    from cute_torch.kernels.gemm_sm90 import gemm
    gemm(a, b, c)                                         # c = a @ b, like torch.mm
    gemm(a, b, c, epilogue=lambda acc: cute.where(acc > 0, acc, 0.0))   # relu fused

A (M, K) and B (K, N), or batches of them (L, M, K) x (L, K, N) with any batch strides, are bf16
or fp16, each row- or column-major (all four combinations, no copies: an operand whose K is
contiguous is read K-major, else MN-major), or fp8 (e4m3fn / e5m2), both K-major; C (M, N) or
(L, M, N) is bf16, fp16 or fp32, row-major (N / 2 columns for a gated epilogue over `gate` and
`up`: interleave_gated), or 16-bit with M contiguous (the swapped problem's output: transposes).
Rows must be multiples of 16 bytes (TMA's rule); M, N, K are otherwise any size (TMA fills
out-of-bounds tails with zeros and does not store them). `epilogue` maps one fp32
accumulator to a value (DSL code, applied in registers before the conversion to C's type).

One CTA per SM (384 threads) walks output tiles of 128 x 256 (128 x 128 when 256-wide tiles
would leave more than half the SMs idle, 128 x 64 when 128-wide ones would, or the width whose
last wave ends first, such as 144 at 1536^3: 132 tiles for 132 SMs: choose_tile_n; and where
such tiles are few, 64 x 128 to 64 x 256 tiles in ping-pong instead, each read by one
warpgroup: short_tile_n):
  * warpgroup 0, the producer, keeps 40 registers; its first thread runs through every tile's
    k-tiles, acquiring a free stage of a ring of 4 at 256 wide (5 at 192 and in ping-pong, 6 for
    128-wide tiles: as many as shared memory holds; _stages) and issuing the TMA loads of A
    (128 x 64) and B (256 x 64) into it (128-byte swizzled, as wgmma reads them);
  * warpgroups 1 and 2, the consumers, ask for 232 registers (ptxas still budgets 168 for every
    thread of a 384-thread block) and own 64 rows of the tile each: per k-tile, wait for the
    stage, issue 4 wgmma 64x256x16, and once those are issued release the previous k-tile's stage
    (wait_group(1)); the consumers hold two stages, so 4 stages leave the producer two of lead;
  * at the end of a tile, the epilogue goes 64 columns at a time (32 with several outputs, fp32
    outputs, 192-wide tiles or a cooperative staged input, 16 for 144-wide tiles: epi_n) through
    two shared buffers per output: 16 columns per stmatrix (an expression's inputs and math
    reuse the registers of the accumulators already stored), then one thread
    sends the box out with a TMA store, and the next box fills the other buffer while that store
    reads; the next tile's k-loop starts while the last stores drain. An expression's inputs
    are read a box ahead of their math, two adjacent columns per load where the strides allow
    (the first box while the tile's last wgmmas run), except a whole 16-bit (M, N) input such
    as a residual, whose tile arrives by TMA into shared memory while the main loop runs and
    is read by ldmatrix (staged_inputs; in the cooperative schedule at 256 wide 3 operand stages
    then, and 32-column boxes);
  * ping-pong instead (choose_schedule for fused epilogues at K <= 2048, plain_pingpong on fast
    memory, wide_pingpong's 128 x 192 tiles for large plain GEMMs): each consumer warpgroup owns
    every other 128-row tile (two m64 wgmma rows) so that one's epilogue runs while the other's
    main loop does;
  * tiles are visited batch by batch, in groups of GROUP_M tile rows (grouped rasterization) so
    that CTAs running at the same time share A and B tiles in L2;
  * with `cluster=True`, clusters of two CTAs take vertically adjacent tiles, which need the same
    B tiles: each CTA loads half of B and multicasts it into both, and a stage is free once the
    consumer warps of both CTAs have released it (opt-in: on an H100 it measured the same as
    without, 0.97-1.02x cuBLAS on square and LLM shapes, so L2 traffic is not what limits it; on
    an H200 it is slower on small problems, 1024^3 with 64-wide tiles 0.79x cuBLAS against 0.86x
    without, 2048^3 0.95x against 0.98x, and within noise of it at 4096^3 and 8192^3; so were
    pairs along N sharing A, as cuBLAS's 1x2 clusters do, measured on a branch not kept:
    benchmarks/RESULTS.md);
  * with `stream_k=True`, the tiles of a partial last wave are shared among all CTAs by k-tiles,
    the partial accumulators summed through a workspace (kernels/gemm_stream_k.py; opt-in: on an
    H100 it measured 1-4 % slower than whole tiles).
Shared memory (one output, 256-wide tiles): 4 x 48 KB of operands + 2 x 16 KB of output buffers +
barriers = 224 KB.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

import cute_torch as cute
from cute_torch import Constexpr
from cute_torch.kernels.gemm_common import (calls_function, epilogue_values, is_gated, k_major_view, n_contiguous,
                                            problem, swizzled, tile_of)
from cute_torch.kernels.gemm_stream_k import Walk, gather_partials, publish_partial, workspace
from cute_torch.kernels.row_reduce import fast_memory

cpasync, warpgroup, pipeline = cute.nvgpu.cpasync, cute.nvgpu.warpgroup, cute.pipeline

BM, BK = 128, 64                 # tile rows and k-tile depth (16-bit operands; 128 for fp8: one 128-byte
                                 # swizzle row either way: k_tile); tile columns: choose_tile_n
EPI_N = 64                       # C leaves in 128 x 64 boxes, through two shared buffers (128 x 32
                                 # with several outputs: epi_n)
TILE_WIDTHS = (64, 128, 192, 256)  # tile columns that take any operand majors and clusters (gates: not 192)
MAX_STAGES = 6                   # the consumers hold two stages; the rest are the producer's lead
PINGPONG_STAGES = 5              # ping-pong measured slower with 6 (H100: 0.297 / 0.434 ms against 0.281 /
                                 # 0.371 for the block's qkv and fc1) and with 4
SMEM_BYTES = 227 * 1024          # what one CTA may allocate on sm_90
CONSUMERS = 256                  # two consumer warpgroups
THREADS = 128 + CONSUMERS
EPILOGUE_BARRIER = 1             # the consumers' named barrier (0 is the CTA's; ping-pong: 1 and 2)
ORDER_BARRIER = 3                # ping-pong: warpgroup w waits at ORDER_BARRIER + w for its main loop's turn
BUFFERS_BARRIER = 5              # ping-pong: ... and at BUFFERS_BARRIER + w for the output buffers
AHEAD = 4                        # epilogue chunks whose inputs are in flight (a 64-column box)


def k_tile(dtype) -> int:
    """k-tile depth in elements: one 128-byte swizzle row (64 bf16/fp16, 128 fp8)."""
    return 1024 // dtype.width


def _mma_op(a_type, b_type, n: int, k_major: tuple):
    """The warpgroup MMA of a 64 x n accumulator tile for these operand types: fp16/bf16 (k16,
    either major mode) or fp8 (k32, both operands K-major)."""
    major = {True: warpgroup.OperandMajorMode.K, False: warpgroup.OperandMajorMode.MN}
    if a_type.width == 8:
        return warpgroup.MmaF8Op(a_type, b_type, cute.Float32, (64, n, 32))
    return warpgroup.MmaF16BF16Op(a_type, cute.Float32, (64, n, 16), a_major_mode=major[k_major[0]],
                                  b_major_mode=major[k_major[1]])


class Config(NamedTuple):
    """A kernel variant (compile-time): tile columns (a multiple of 16, 64 to 256); the ping-pong
    schedule instead of the cooperative one; grouped rasterization along N (groups of GROUP_M tile
    columns, row by row) instead of along M, for N much larger than M; clusters of two CTAs on
    vertically adjacent tiles, which share their B tiles (each loads half and multicasts it to
    both: half the B traffic through L2); per epilogue input, whether it is staged: a whole
    (M, N) input read by TMA into shared memory, a tile at a time, and from there by ldmatrix in
    the accumulators' order (staged_inputs; ping-pong loads it as an epilogue starts, the
    cooperative schedule as the tile's main loop starts)."""
    tile_n: int = 256
    pingpong: bool = False
    raster_n: bool = False
    cluster: bool = False
    staged: tuple = ()          # per epilogue input: read through shared memory (TMA, ldmatrix)
    tile_m: int = BM            # tile rows: 128, or 64 with ping-pong (one m64 wgmma row per warpgroup)
    stream_k: bool = False      # the last partial wave's tiles shared by k-tiles among all CTAs (Walk)

    @property
    def narrow_boxes(self) -> bool:
        """Whether the outputs leave in 32-column boxes to make room for a cooperative tile's
        staged inputs (epi_n's `narrow`)."""
        return any(self.staged) and not self.pingpong


def _stages(outputs, tile_n: int, pingpong: bool = False, gated: bool = False, staged: int = 0,
            tile_m: int = BM) -> int:
    """Operand stages that fit beside the outputs' buffers (out_buffers 128 x epi_n boxes per
    output; ping-pong's two warpgroups take turns with them) and the staged inputs' tiles (128 x the
    output tile's columns, 16-bit, each). `outputs`: each output's element bytes, or how many
    16-bit outputs."""
    widths = (2,) * outputs if isinstance(outputs, int) else tuple(outputs)
    out_cols = tile_n // 2 if gated else tile_n
    box_n = epi_n(len(widths), out_cols, max(widths), narrow=staged > 0 and not pingpong)
    epilogue = sum(out_buffers(out_cols, box_n) * tile_m * box_n * w for w in widths) + staged * tile_m * out_cols * 2
    # (64-row ping-pong tiles keep up to MAX_STAGES: 8 measured within noise of 6 at 1024^3 - 4096 x 2048 x 1024)
    most = PINGPONG_STAGES if pingpong and tile_m == BM else MAX_STAGES
    return min(most, (SMEM_BYTES - epilogue - 1024) // ((tile_m + tile_n) * BK * 2))


def epi_n(outputs: int, out_cols: int = 256, widest: int = 2, narrow: bool = False) -> int:
    """Columns of an output box, for tiles of `out_cols` output columns: 64 (128 bytes of a
    16-bit row), or 32 with several outputs, whose buffers would otherwise take an operand stage
    (two outputs at 256 wide: 4 stages instead of 3), with an fp32 output (whose 32 columns are
    128 bytes), for 192-column tiles (an even number of boxes per tile: box s goes through
    buffer s % 2) and with `narrow` (a cooperative tile's staged input takes 64 KB: 3 stages
    fit beside it with 32-column output boxes, 2 with 64); never more than the tile has (a
    gated 64-wide tile: 32), and a divisor of the tile's columns (16 for 144: 32-byte rows,
    swizzled by 32 bytes)."""
    wide = outputs == 1 and widest == 2 and out_cols != 192 and not narrow
    box = min(out_cols, EPI_N if wide else EPI_N // 2)
    while out_cols % box:
        box //= 2
    return box


def out_buffers(out_cols: int, box_n: int) -> int:
    """Shared buffers per output: two, box s in buffer s % 2, or with an odd number of boxes
    (a 144-wide tile's nine) one per box, whose stores the tile's first box waits on."""
    boxes = out_cols // box_n
    return boxes if boxes % 2 and boxes > 1 else 2


# A tile's time per k-tile grows like its columns plus this (the A tile's load and the wgmma
# issue that every width pays): fit to one wave of each width at 1536^3 and 1536 x 1536 x 4096
# on an H200, and it ranks the widths of 11 shapes as measured (benchmarks/gemm.py --sections tiles).
TILE_OVERHEAD_COLUMNS = 35


def wave_cost(m: int, n: int, batches: int, sms: int, width: int) -> int:
    """The time of an M x N output in 128-row tiles of `width` columns: its waves (rounded up)
    times a tile's cost, its columns plus TILE_OVERHEAD_COLUMNS."""
    return -(-(-(-m // BM) * -(-n // width) * batches) // sms) * (width + TILE_OVERHEAD_COLUMNS)


def choose_tile_n(m: int, n: int, batches: int, sms: int, gated: bool = False, any_width: bool = False) -> int:
    """Tile columns: 256 (the most work per byte of shared memory read) unless 128 x 256 tiles
    would leave more than half the SMs idle or N is narrow, then 128 (twice the tiles), and 64
    where even 128 x 128 tiles would (1024^3: 128 tiles on 132 SMs instead of 64). Otherwise the
    width whose last wave ends first: the waves (rounded up) times the tile's cost, its columns
    plus TILE_OVERHEAD_COLUMNS, taken only when that is at least 10 % less than 256's. The
    widths are 128, 192 and 256, and with `any_width` (16-bit operands, B K-major, no gate: see
    host_arguments) every multiple of 16 from 128 to 256: 1536^3 takes 144 (one wave of 132 tiles: 0.012 ms
    against 0.0144 at 192 on an H200), 2560^3 208 (two waves of 260 instead of two of 200). A
    gated GEMM (`n` counts the accumulator columns) never takes 192 (96 output columns would
    be an odd number of boxes)."""
    def tiles(width):
        return -(-m // BM) * -(-n // width) * batches
    if n <= 64 or 2 * tiles(128) <= sms:
        return 64
    if n <= 128 or 2 * tiles(256) <= sms:
        return 128

    def cost(width):
        return wave_cost(m, n, batches, sms, width)
    widths = (256,) if gated else range(128, 257, 16) if any_width else TILE_WIDTHS[1:]
    best = min(reversed(widths), key=cost)      # ties: the wider
    return best if cost(best) <= 0.9 * cost(256) else 256


def transpose_pays(m: int, n: int, sms: int, any_width: bool, any_width_swapped: bool) -> bool:
    """Whether an M x N output's tiles end their last wave sooner as the swapped problem's (C^T =
    B^T A^T: N x M, written back with M contiguous), by choose_tile_n's width and its
    wave_cost each way. 3072 x 1024 takes 96 tiles of
    128 x 256 (0.73 of an H200's 132 SMs), 1024 x 3072 128 of 128 x 192, as cuBLAS's
    nvjet_sm90_tst_128x192 does: cuBLAS / ours 0.81 -> 0.99 at K = 4096, 0.87 -> 1.03 at 16384
    (dY^T X, H200). `any_width`: choose_tile_n's, for B and for the swapped B (A^T)."""
    def cost(rows, cols, widths):
        return wave_cost(rows, cols, 1, sms, choose_tile_n(rows, cols, 1, sms, False, widths))
    return cost(n, m, any_width_swapped) < cost(m, n, any_width)


def transposes(a: torch.Tensor, b: torch.Tensor, outs: tuple, epilogue, inputs, variant: tuple) -> bool:
    """Whether gemm runs c = a @ b as c^T = b^T a^T (transpose_pays): a 2-D problem of M and N
    past 64 (64-row tiles serve those), 16-bit operands, no gate, 16-bit outputs with N
    contiguous, and no variant asked for (`variant`: tile_n, schedule, raster, tile_m,
    cluster). Epilogue inputs
    go as transposed views: a bias is then read once per row, a residual one element at a time
    instead of in pairs, and still the swap wins (H200, 3072 x 1024 x 4096 bias + gelu_tanh
    37.6 -> 34.8 us, bias + residual 39.9 -> 37.7; 6144 x 1024 x 4096 75.8 -> 68.6 / 81.1 ->
    75.1; cuBLAS's plain GEMM 33.8 / 67.8). Gemm.cpp's transposes decides the same."""
    epilogues = tuple(epilogue) if isinstance(epilogue, (tuple, list)) else (epilogue,)
    if any(v not in (None, False) for v in variant) or a.dim() != 2 or b.dim() != 2 or is_gated(epilogues):
        return False
    if min(a.shape[0], b.shape[1]) <= 64 or any(o.element_size() != 2 or not n_contiguous(o) for o in outs):
        return False
    if a.element_size() != 2:              # 8-bit operands with M-contiguous outputs: not run on a GPU yet
        return False
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 132
    return transpose_pays(a.shape[0], b.shape[1], sms, k_major_b(b), k_major_b(a.t()))


# 64-row tiles: one warpgroup's m64 x n wgmma row per tile, the two consumer warpgroups in
# ping-pong. A 128-row tile's two warpgroups each read its whole B tile from shared memory; a
# 64-row tile's one reads it once, so where tiles are few (a wave or two) the short tiles run
# more of them at less shared-memory traffic per FLOP: H200, cuBLAS / ours, 128-row choice ->
# 64-row: 1024^3 0.855 -> 0.982 (64 x 128), 2048^3 0.969 -> 0.996 (64 x 256), 4096 x 2048 x
# 1024 0.956 -> 1.035, 3072 x 1536 x 1536 0.919 -> 0.982 (64 x 192), dY^T X at 1024 x 1024 x
# 8192 0.775 -> 0.932. With many waves, or K past 2048, 128-row tiles stay faster (4096^3 0.987
# against 0.935, 8192 x 2048 x 2048 0.978 against 0.964, 8192^3 0.972 against 0.897).
SHORT_TILE_WIDTHS = (128, 192, 256)


def short_tile_cost(width: int) -> int:
    """A 64-row ping-pong tile's time in tenths of choose_tile_n's units (a 128-row tile costs its
    columns plus TILE_OVERHEAD_COLUMNS), 0.3 * width + 48: fit to one wave of 64 x 128 / 192 / 256
    tiles at 1024^3 on an H200 (5.38 / 7.06 / 7.78 us against 6.18 for 128 x 64). Integers, as
    Gemm.cpp's chooseShortTileN computes it."""
    return 3 * width + 480


def short_tile_n(m: int, n: int, k: int, batches: int, sms: int, tile_n: int, force: bool = False) -> int:
    """Columns of 64-row ping-pong tiles where their waves cost less than those of the 128-row
    tiles of `tile_n` columns (choose_tile_n's), else 0; with `force`, the cheapest width
    anyway. Considered only where M <= 64 (as many 64-row tiles as 128-row ones, half as empty),
    where 128 x 128 tiles would leave half the SMs idle, or where 128 x 256 tiles make at most two
    waves and K is at most 2048 (the measurements above)."""
    def tiles(rows, width):
        return -(-m // rows) * -(-n // width) * batches

    def waves(rows, width):
        return -(-tiles(rows, width) // sms)
    best = min(SHORT_TILE_WIDTHS, key=lambda w: waves(64, w) * short_tile_cost(w))
    if force:
        return best
    if not (m <= 64 or 2 * tiles(BM, 128) <= sms or (k <= 2048 and tiles(BM, 256) <= 2 * sms)):
        return 0
    wide = 10 * waves(BM, tile_n) * (tile_n + TILE_OVERHEAD_COLUMNS)
    return best if waves(64, best) * short_tile_cost(best) < wide else 0


def k_major_b(b: torch.Tensor) -> bool:
    """Whether b (K, N[, ...]) has K contiguous, as F.linear's weight.t(): the tiles between the
    standard widths take only that (their B tile is not a whole number of 64-column MN slabs)."""
    return b.stride(-2) == 1 or b.shape[-2] == 1


def choose_schedule(k: int, tile_n: int, outputs: int, staged: tuple, gated: bool = False,
                    fp8: bool = False, fused: bool = False) -> str:
    """Ping-pong where its overlap pays: the epilogue has work to hide behind the other
    warpgroup's main loop (a second output, a staged (M, N) input, or `fused`: a broadcast
    input such as a bias, or a function call such as gelu_tanh) and K is at most 2048, so that
    the epilogue is a large part of a tile's time; cooperative otherwise, and wherever
    choose_tile_n picked less than 256 columns (few tiles: ping-pong's 128 x 128 tiles leave a
    warpgroup idle). Ping-pong / cooperative on an H100 (scratch-style probe, 2026-11-26, M, N,
    K from 2048 x 8192 x 2048 to 8192 x 8192 x 2048 and 8192 x 4096 x 1024): bias + gelu_tanh
    0.94-0.99, bias + silu 0.92-0.97, pre-activation and gelu_tanh 0.90-0.99, a bias alone
    0.94-1.01 (1.01 and 1.015 at the two narrowest), a plain GEMM 0.96-1.08; bias + residual
    0.89-0.95 (2026-11-25). K = 4096-8192 stays cooperative (plain 1.02-1.09, fused 0.97-1.05);
    8-bit operands and gated GEMMs too (not measured with ping-pong)."""
    heavy = outputs >= 2 or any(staged) or fused
    return "pingpong" if heavy and k <= 2048 and tile_n == 256 and not (gated or fp8) else "cooperative"


def plain_pingpong(k: int, tile_n: int, outputs: int, inputs: int, fast: bool) -> bool:
    """Ping-pong for a plain GEMM (one output, no epilogue inputs) whose choice is 128 x 256
    cooperative, at K <= 1024, on a card with fast memory (row_reduce.fast_memory: the H200).
    There a tile's main loop is short beside its epilogue, and ping-pong hides the one behind the
    other's: cuBLAS / ours, H200, 30 shapes M 4096-16384 x N 2048-8192, TN and NN, cooperative ->
    ping-pong, every one faster by 1.6-13 % (8192 x 2752 x 1024 0.895 -> 1.024, 4096 x 5504 0.899
    -> 1.030, 16384 x 8192 1.004 -> 1.027; scratch-style sweep, 2026-11-26). At K = 2048 it was
    mixed (16384 x 2752 0.968 -> 0.943, 4096 x 5504 0.930 -> 1.008), and the H100 lost up to 17 %
    at K = 1024 (16384 x 2752 0.973 -> 0.800). Gemm.cpp's chooseVariant decides the same. Where
    wide_pingpong applies (more than two waves, M and N past 2048) its 128 x 192 tiles take over,
    these shapes included; 128 x 128 serves the rest."""
    return fast and k <= 1024 and tile_n == 256 and outputs == 1 and inputs == 0


# Ping-pong's widest 128-row tile: one warpgroup's 128 x 192 accumulators (192 registers a thread
# of its 232 under setmaxnreg).
WIDE_PINGPONG = 192
# What ping-pong's hidden epilogues save, in percent of a plain tile's time (wide_pingpong's fit).
PINGPONG_SAVES = 7


def wide_pingpong(m: int, n: int, k: int, batches: int, sms: int, tile_n: int) -> bool:
    """Ping-pong over 128 x WIDE_PINGPONG tiles for a plain GEMM (one 16-bit output, no epilogue
    inputs or calls, 16-bit operands) whose choice is 128 x 256 cooperative (or on fast memory
    plain_pingpong's 128 x 128) with more than two waves of those tiles, M and N past 2048, at K
    <= 2048, or at N >= 8192 with K <= 8192, where the narrower tiles' waves (wave_cost), less
    the PINGPONG_SAVES percent their hidden epilogues save, end before the 256-wide tiles'. The
    last condition (2026-11-28) keeps 4096 x 4096 at K <= 2048 cooperative: 704 tiles of 128 x
    192 make 6 waves where 512 of 128 x 256 make 4 (H100, cuBLAS / ours at K = 2048: ping-pong
    0.883, cooperative 0.935; K = 1024 0.979 / 0.979), and 8192 x 11008 (29 waves against 21:
    1.001 / 0.998 at K = 4096, H100; 1.01 / 1.00 on 2026-11-27). cuBLAS / ours (TN, NN), choice
    -> this, 2026-11-27:

    | M x N x K | H100 | H200 |
    |---|---|---|
    | 8192^3 | 1.01 / 1.01 -> 1.02 / 1.03 | 1.02 / 1.01 -> 1.02 / 1.02 |
    | 8192 x 12288 x 4096 | 0.98 / 0.99 -> 1.01 / 1.03 | 0.99 / 1.00 -> 1.01 / 1.02 |
    | 8192 x 14336 x 4096 | 0.99 / 0.98 -> 1.01 / 1.01 | 0.99 / 0.99 -> 1.01 / 1.01 |
    | 8192 x 11008 x 4096 | 1.00 / 1.01 -> 1.01 / 1.03 | 1.01 / 1.02 -> 1.01 / 1.02 |
    | 8192 x 128256 x 4096 | 1.05 / 1.07 -> 1.08 / 1.08 | 0.94 / 0.99 -> 0.95 / 1.02 |
    | 4096 x 2752 x 1024 | 0.84 / 0.98 -> 0.93 / 1.08 | 0.88 / 1.04 -> 0.92 / 1.07 |
    | 4096 x 2752 x 2048 | 0.88 / 0.95 -> 0.93 / 1.01 | 0.85 / 0.95 -> 0.90 / 1.00 |
    | 8192 x 2752 x 1024 | 0.91 / 0.92 -> 1.03 / 1.05 | 1.02 / 1.06 -> 1.02 / 1.03 |
    | 16384 x 2752 x 1024 | 0.94 / 0.93 -> 1.02 / 1.02 | 0.95 / 0.97 -> 1.02 / 1.02 |
    | 4096 x 5504 x 1024 | 0.91 / 0.93 -> 1.05 / 1.08 | 1.06 / 1.07 -> 1.03 / 1.05 |
    | 8192 x 5504 x 2048 | 0.99 / 1.01 -> 1.04 / 1.05 | 1.01 / 1.02 -> 1.04 / 1.06 |
    | 8192 x 4096 x 1024 | 0.93 / 0.93 -> 0.96 / 1.01 | 0.99 / 0.98 -> 1.01 / 1.01 |
    | 16384 x 8192 x 1024 | 1.01 / 1.03 -> 1.08 / 1.11 | 1.04 / 1.07 -> 1.09 / 1.12 |

    Left out, where it lost: N = 4096 at K >= 4096 (8192 x 4096 x 4096 / 11008 / 14336: 0.98-0.99
    -> 0.96-0.98 on both), 4096^3 (0.97 -> 0.91), two waves or fewer (2048^3: 1.01 -> 0.74), M or
    N of 2048 (H200, 8192 x 2048 x 2048 / 2048 x 8192 x 2048: 0.87 / 0.88 wide), and 16384^3
    (H100 TN 1.02 -> 1.04 but NN 1.03 -> 1.01, H200 TN 1.01 -> 0.98). On the H200 128 x 176 read
    0.95 / 0.94 at 4096 x 2752 x 1024 / 2048 (TN), and lost on the H100 (0.85 / 0.88)."""
    tiles = -(-m // BM) * -(-n // 256) * batches
    return tile_n == 256 and tiles > 2 * sms and min(m, n) > 2048 and (k <= 2048 or (n >= 8192 and k <= 8192)) \
        and (100 - PINGPONG_SAVES) * wave_cost(m, n, batches, sms, WIDE_PINGPONG) < 100 * wave_cost(m, n, batches,
                                                                                                     sms, 256)


def _with_even_strides(x):
    """`x` with its run-time strides assumed even (the host checked them: reads_pairs)."""
    strides = tuple(cute.assume(d, divby=2) if not isinstance(d, int) else d for d in x.stride)
    return cute.make_tensor(x.iterator, cute.make_layout(x.shape, stride=strides))


def _input_pair(x, coords, i: int, pairs: bool) -> tuple:
    """Elements i and i + 1 of input `x`, i even: in the wgmma accumulator layout two adjacent
    columns of one row, (r, c) and (r, c + 1) with c even. They are read at coordinates clamped
    inside x (a tail tile's elements past the edge are never stored, so any valid element
    will do); with `pairs` (unit column stride, even strides: _with_even_strides) as one
    vector load, else one element at a time."""
    if cute.const_expr(not pairs):
        return tuple(x[tuple(cute.math.min(c, s - 1) for c, s in zip(coords[k], x.shape))] for k in (i, i + 1))
    r, c, *l = coords[i]
    col = cute.assume(cute.math.min(c, x.shape[1] - 2), divby=2)   # N is even (the output's rows)
    at = cute.domain_offset((cute.math.min(r, x.shape[0] - 1), col, *l), x)
    pair = cute.local_tile(at, (1, 2) + (1,) * len(l), (0,) * (2 + len(l)))[(0, None) + (0,) * len(l)].load()
    return pair[0], pair[1]


def _chunk_inputs(inputs, coords, q: int, values_per_m: int, frg_m: int, pairs: tuple, staged: tuple) -> list:
    """Per input, the four element pairs at the accumulators of the epilogue's chunk q: 16
    columns (j = q // frg_m) of one 64-row fragment (fm = q % frg_m), accumulators 8 j +
    values_per_m fm + 0..7 (None for a staged input: _staged_pairs reads it)."""
    j, fm = divmod(q, frg_m)
    base = 8 * j + values_per_m * fm
    return [None if st else [_input_pair(x, coords, base + e, p) for e in (0, 2, 4, 6)]
            for x, p, st in zip(inputs, pairs, staged)]


def _staged_pairs(ldsms, tRsRs, rpieces, j: int, fm: int) -> dict:
    """Per staged input (by input index), the chunk's four element pairs from shared memory: one
    ldmatrix.x4, the registers in the accumulators' order."""
    out, k = {}, 0
    for i, ldsm in enumerate(ldsms):
        if ldsm is not None:
            cute.copy(ldsm, tRsRs[k][(None, j), fm, None], rpieces[k])
            out[i] = [(rpieces[k][e], rpieces[k][e + 1]) for e in (0, 2, 4, 6)]
            k += 1
    return out


def _cluster_tile(tile_id, cluster_rows, tiles_n, along_n: bool, cm: int, rank):
    """(m, n, l) of this CTA's tile in the tile_id-th cluster tile (tile_of's order over cm x 1
    blocks of tiles)."""
    m, n, l = tile_of(tile_id, cluster_rows, tiles_n, along_n)
    return (m * cm + rank if cute.const_expr(cm == 2) else m), n, l


@cute.jit
def _release(pipe, state, lane, cm: Constexpr):
    """The consumers are done with a stage: every thread arrives, or in a cluster the first lane
    of each warp (its wgmma wait is warp-wide) in both CTAs."""
    if cute.const_expr(cm == 2):
        if lane == 0:
            pipe.consumer_release(state)
    else:
        pipe.consumer_release(state)


@cute.jit
def _load_staged(tma_rs, sRs, gRs, bar, m, n, l, boxes: Constexpr, ctid):
    """The first consumer thread loads tile (m, n, l) of each staged input into its shared tile,
    `boxes` TMA boxes each, counted by `bar`. Every consumer's ldmatrix reads of the previous
    tile there are done (a barrier since): a proxy fence orders them before the TMA writes."""
    if ctid == 0:
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.mbarrier_arrive_and_expect_tx(bar, sum(r.size_in_bytes for r in tma_rs) * boxes)
        for tma_r, sR, gR in zip(tma_rs, sRs, gRs):
            for s in cute.range_constexpr(boxes):
                cute.copy(tma_r, _tile(gR, m, n * boxes + s, l), sR[None, None, s], tma_bar_ptr=bar)


def _tile(tiles, i, j, l):
    """One tile of a (rows, cols, tiles_i, tiles_j[, L]) coordinate tensor."""
    return tiles[(None, None, i, j) + ((l,) if len(tiles.shape) == 5 else ())]


@cute.kernel
def gemm_kernel(tma_a, tma_b, tma_cs, mA, mB, mC, inputs, tma_rs, mRs, shared, tiled_mma: Constexpr, out_mma: Constexpr,
                stsms: Constexpr, ldsms: Constexpr,
                epilogues: Constexpr, input_dtypes: Constexpr, input_pairs: Constexpr, out_types: Constexpr,
                k_major: Constexpr, stages: Constexpr, config: Constexpr, out_m_major: Constexpr):
    """tma_rs, mRs: the TMA atoms and coordinate tensors of the staged inputs (config.staged),
    ldsms: their ldmatrix copies into the output tile's partition (None for the others);
    shared: with stream-K, the workspace of partial accumulators (Float32, one slot per CTA) and
    the CTAs' flags (Int32, zeros), else empty (Walk);
    out_m_major: the outputs have M contiguous (output_m_major)."""
    BM, BN, pingpong = config.tile_m, config.tile_n, config.pingpong
    # A gated GEMM's output tile has half the columns: each output column combines a pair.
    gated = is_gated(epilogues)
    out_n = BN // 2 if gated else BN
    tid = cute.arch.thread_idx()[0]
    # Cooperative: both consumer warpgroups work on every tile (64 rows each). Ping-pong: each owns
    # every other tile of the CTA (all 128 rows), so one's epilogue runs during the other's main
    # loop; each has its own epilogue barrier, and the two epilogues take turns with the output
    # buffers (so that the operands keep the stages: 5 instead of 3 with two outputs).
    owners = 2 if pingpong else 1
    per_tile = 128 if pingpong else CONSUMERS               # consumer threads on one tile
    smem = cute.SmemAllocator()
    bk = k_tile(tma_a.dtype)
    sA = smem.allocate_tensor(tma_a.dtype, swizzled(BM, bk, stages, k_major[0], tma_a.dtype.width // 8), 1024)
    sB = smem.allocate_tensor(tma_b.dtype, swizzled(BN, bk, stages, k_major[1], tma_b.dtype.width // 8), 1024)
    widths = tuple(t.width // 8 for t in out_types)
    box_n = epi_n(len(out_types), out_n, max(widths), narrow=config.narrow_boxes)
    buffers = out_buffers(out_n, box_n)
    sCs = [smem.allocate_tensor(t, swizzled(BM, box_n, buffers, not out_m_major, w), 1024)   # per output
           for t, w in zip(out_types, widths)]
    # Staged inputs: each a whole output tile (boxes of 128 x box_n), filled by TMA (_load_staged)
    # at the start of an epilogue (ping-pong: the warpgroups take turns with them as with the
    # output buffers) or of the tile's main loop (cooperative: the previous epilogue's reads are
    # done, and the load has the main loop's time to land) and read by ldmatrix; one barrier
    # counts the bytes.
    staged = config.staged if cute.const_expr(bool(config.staged)) else (False,) * len(inputs)
    sRs = [smem.allocate_tensor(r.dtype, swizzled(BM, box_n, out_n // box_n), 1024) for r in tma_rs]
    bars = smem.allocate_tensor(cute.Int64, cute.make_layout(2 * stages + (1 if tma_rs else 0)), 8)
    staged_bar = bars.iterator + 2 * stages
    if cute.const_expr(bool(tma_rs)):
        if tid == 0:
            cute.arch.mbarrier_init(staged_bar, 1)
            cute.arch.mbarrier_init_fence()          # the pipeline's create syncs the CTA after it
    # In a cluster a stage is released by the consumer warps of both CTAs (the peer's B half lands
    # in it too): one arrival per warp, here and in the peer, instead of one per thread here.
    cm = 2 if cute.const_expr(config.cluster) else 1
    pipe = pipeline.PipelineTmaAsync.create(
        num_stages=stages, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, per_tile // 32 if cm == 2 else per_tile),
        tx_count=tma_a.size_in_bytes + tma_b.size_in_bytes, barrier_storage=bars.iterator,
        cta_layout_vmnk=(1, 2, 1, 1) if cm == 2 else None)

    # Coordinates of the tiles: (BM, bk, tiles_m, k_tiles[, L]); a batch mode only when batched (a
    # coordinate tensor packs each mode in a field: 31 bits for two modes, 20 for three).
    modes = (None,) * len(mA.shape)
    gA = cute.local_tile(mA, (BM, bk), modes)
    gB = cute.local_tile(mB, (BN, bk), modes)
    gC = cute.local_tile(mC, (BM, out_n), modes)
    gE = cute.local_tile(mC, (BM, box_n), modes)             # the epilogue's boxes
    gRs = [cute.local_tile(mR, (BM, box_n), modes) for mR in mRs]
    tiles_m, tiles_n, k_tiles = cute.size(gA, mode=[2]), cute.size(gB, mode=[2]), cute.size(gA, mode=[3])
    batches = cute.size(gA, mode=[4]) if cute.const_expr(len(mA.shape) == 3) else 1
    # The schedule walks cluster tiles (cm tile rows by one tile column; cm = 1 without clusters):
    # this CTA takes row `rank` of each (a row past M loads zeros and stores nothing).
    cluster_rows = (tiles_m + cm - 1) // cm
    tiles = cluster_rows * tiles_n * batches
    first, step = cute.arch.block_idx()[0] // cm, cute.arch.grid_dim()[0] // cm
    rank = cute.arch.block_in_cluster_rank() if cute.const_expr(cm == 2) else 0
    warp_group = cute.arch.make_warp_uniform(tid // 128)

    if warp_group == 0:                                   # the producer
        cute.arch.warpgroup_reg_dealloc(40)
        if tid == 0:
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
            walk = Walk(tiles, k_tiles, first, step, first, step, config.stream_k)
            for u in range(*walk.units()):
                tile_id, k0, k1 = walk.unit(u)
                m, n, l = _cluster_tile(tile_id, cluster_rows, tiles_n, config.raster_n, cm, rank)
                for kt in range(k0, k1):
                    pipe.producer_acquire(state)
                    bar = pipe.producer_get_barrier(state)
                    cute.copy(tma_a, _tile(gA, m, kt, l), sA[None, None, state.index], tma_bar_ptr=bar)
                    if cute.const_expr(cm == 2):          # this CTA's half of B, into both CTAs
                        sb, gb = cpasync.tma_partition(tma_b, rank, cute.make_layout(2), sB[None, None, state.index],
                                                       _tile(gB, n, kt, l))
                        cute.copy(tma_b, gb, sb, tma_bar_ptr=bar, mcast_mask=0b11)
                    else:
                        cute.copy(tma_b, _tile(gB, n, kt, l), sB[None, None, state.index], tma_bar_ptr=bar)
                    state.advance()
            if cute.const_expr(cm == 2):
                # Neither CTA leaves while its peer may still release its stages: every stage has
                # been released by both CTAs' consumers (so every multicast landed, too), as
                # CUTLASS's load tail does; a cluster barrier at the exit cost 1024^3 (64-wide
                # tiles) 0.72 -> 0.79 of cuBLAS on an H200.
                pipe.producer_tail(state)
    else:                                                 # the consumers
        cute.arch.warpgroup_reg_alloc(232)
        owner = warp_group - 1 if cute.const_expr(pingpong) else 0   # which tiles: every owners-th
        ctid = tid % 128 if cute.const_expr(pingpong) else tid - 128
        # The whole 128 x out_n output tile seen over the two output buffers (box s of box_n
        # columns in buffer s % 2), so that the accumulators' stmatrix partition addresses them.
        boxes = out_n // box_n                            # per tile: 1 (64-wide tiles) to 8
        if cute.const_expr(boxes == 1):
            over_buffers = cute.make_layout((BM, box_n), stride=(1, BM))
        elif cute.const_expr(boxes % 2):                # an odd number of boxes: one buffer each
            over_buffers = cute.make_layout((BM, (box_n, boxes)), stride=(1, (BM, BM * box_n)))
        else:
            over_buffers = cute.make_layout((BM, (box_n, 2, boxes // 2)), stride=(1, (BM, BM * box_n, 0)))
        sC_tiles = [cute.composition(sC, over_buffers) for sC in sCs]
        thr = tiled_mma.get_slice(ctid)
        tCrA = thr.make_fragment_A(thr.partition_A(sA))
        tCrB = thr.make_fragment_B(thr.partition_B(sB))
        acc = thr.make_fragment_C(tiled_mma.partition_shape_C((BM, BN)))   # (values, FrgM, FrgN)
        acc_per_m, frg_m = cute.size(acc, mode=[0]), cute.size(acc, mode=[1])
        # The output tile's partition: the accumulators' own (out_mma is tiled_mma) or, gated, that
        # of an MMA half as wide (output value 8 j + p of chunk j combines accumulators
        # 8 (2 j + p // 4) + p % 4 (gate) and 4 more (up): a pair of 8-column groups).
        thr_out = out_mma.get_slice(ctid)
        values_per_m = acc_per_m // 2 if gated else acc_per_m
        chunks = out_n // 16 * frg_m                      # the epilogue's steps: 16 columns x 64 rows
        xs = [_with_even_strides(x) if cute.const_expr(p) else x for x, p in zip(inputs, input_pairs)]
        # A staged input's tile as the output tile over its boxes (box s in buffer s), partitioned
        # for ldmatrix like the outputs' buffers for stmatrix.
        over_boxes = cute.make_layout((BM, (box_n, boxes)), stride=(1, (BM, BM * box_n))) if cute.const_expr(
            boxes > 1) else cute.make_layout((BM, box_n), stride=(1, BM))
        tRsRs = [ldsm.get_slice(ctid).partition_S(cute.composition(sR, over_boxes))
                 for ldsm, sR in zip([c for c in ldsms if c is not None], sRs)]
        rpieces = [cute.make_fragment(cute.make_layout((8, 1)), r.dtype) for r in tma_rs]
        # Inputs read one element at a time take twice the registers per chunk in flight.
        ahead = AHEAD if all(input_pairs) else AHEAD // 2
        pieces = [cute.make_fragment(cute.make_layout((8, 1)), t) for t in out_types]   # one stmatrix each
        # 16-bit outputs leave the registers by stmatrix; fp32 ones by plain stores through the
        # accumulators' own partition of the buffers (stmatrix moves 16-bit elements only).
        tSsCs = [stsm.get_slice(ctid).partition_D(sC_tile) if cute.const_expr(stsm is not None)
                 else thr_out.partition_C(sC_tile) for stsm, sC_tile in zip(stsms, sC_tiles)]
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        released = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        if cute.const_expr(pingpong):                     # the second owner starts at the second tile
            state.advance_by(owner * k_tiles)
            released.advance_by(owner * k_tiles)
        lane = cute.arch.lane_idx()
        walk = Walk(tiles, k_tiles, first + owner * step, owners * step, first, step, config.stream_k)
        for u in range(*walk.units()):
            tile_id, k0, k1 = walk.unit(u)
            m, n, l = _cluster_tile(tile_id, cluster_rows, tiles_n, config.raster_n, cm, rank)
            if cute.const_expr(pingpong):
                # The main loops take turns: wait until the other warpgroup has consumed the
                # previous tile, so this one never waits on a stage more than one fill ahead
                # (mbarrier phases are told apart by their parity only).
                if tile_id != first:
                    cute.arch.barrier(barrier_id=ORDER_BARRIER + owner, number_of_threads=2 * 128)
            if cute.const_expr(bool(tma_rs) and not pingpong):
                _load_staged(tma_rs, sRs, gRs, staged_bar, m, n, l, boxes, ctid)
            for kt in range(k0, k1):
                pipe.consumer_wait(state)
                warpgroup.fence()
                tiled_mma.set(warpgroup.Field.ACCUMULATE, kt > k0)
                for kb in cute.range_constexpr(bk // tiled_mma.op.shape_mnk[2]):
                    cute.gemm(tiled_mma, acc, tCrA[None, None, kb, state.index], tCrB[None, None, kb, state.index],
                              acc)
                    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
                warpgroup.commit_group()
                warpgroup.wait_group(1)                   # k-tile kt - 1's wgmmas are done
                if kt > k0:
                    _release(pipe, released, lane, cm)
                    released.advance()
                state.advance()
            if cute.const_expr(pingpong):
                # The other owner's turn as soon as this tile's wgmmas are issued (not done): its
                # first ones queue behind them, so the tensor cores never drain between tiles.
                if tile_id + step < tiles:                # (it has that tile)
                    cute.arch.barrier_arrive(barrier_id=ORDER_BARRIER + 1 - owner, number_of_threads=2 * 128)
            # The epilogue's inputs are read `ahead` chunks of 16 columns early, the first ones while
            # the last wgmmas run: their latency hides behind the math and stores before them.
            coords = thr_out.partition_C(_tile(gC, m, n, l)) if cute.const_expr(bool(inputs)) else None
            loaded = [_chunk_inputs(xs, coords, q, values_per_m, frg_m, input_pairs, staged)
                      for q in cute.range_constexpr(min(ahead, chunks))]
            warpgroup.wait_group(0)
            _release(pipe, released, lane, cm)            # the tile's last stage
            released.advance()
            if cute.const_expr(pingpong):                 # the other owner's tile comes next in the ring
                state.advance_by(k_tiles)
                released.advance_by(k_tiles)
            if cute.const_expr(pingpong):
                # The buffers' turn: the other warpgroup's epilogue of the CTA's previous tile has
                # had its stores read them.
                if tile_id != first:
                    cute.arch.barrier(barrier_id=BUFFERS_BARRIER + owner, number_of_threads=2 * 128)
            if cute.const_expr(bool(tma_rs)):
                if cute.const_expr(pingpong):
                    # The staged inputs' tile, now that their buffers are this warpgroup's. The CTA's
                    # epilogues alternate between the owners, so this one waits on parity `owner`.
                    _load_staged(tma_rs, sRs, gRs, staged_bar, m, n, l, boxes, ctid)
                    cute.arch.mbarrier_wait(staged_bar, owner)
                else:                                     # one load per tile of this CTA
                    cute.arch.mbarrier_wait(staged_bar, (tile_id - first) // step % 2)
            # Stream-K: a piece that ends inside its tile hands its partial accumulators to the
            # tile's finisher, which adds those of the tile's other pieces (gemm_stream_k.py).
            finishes = True
            if cute.const_expr(config.stream_k):
                finishes = k1 == k_tiles
                if k1 < k_tiles:
                    publish_partial(acc, shared, first, ctid, per_tile, EPILOGUE_BARRIER)
                if k1 == k_tiles and k0 > 0:
                    gather_partials(acc, shared, walk, tile_id, ctid, per_tile, EPILOGUE_BARRIER)
            if finishes:
                # The epilogue: fused math in registers, 16-bit values to shared memory, TMA out.
                ahead_inputs = list(loaded)             # (grows below: a list of its own in this region)
                for s in cute.range_constexpr(boxes):
                    # Buffer s % 2 is free once the store issued from it two boxes ago has read it (with
                    # one box per tile, buffer 0 was the last one's: issued a main loop ago).
                    # (A buffer per box: all are free once the last tile's stores have read them.)
                    if cute.const_expr(boxes % 2 == 0 or s == 0):
                        if ctid == 0:
                            cute.arch.cp_async_bulk_wait_group(0 if boxes % 2 else 1, read=True)
                    cute.arch.barrier(barrier_id=EPILOGUE_BARRIER + owner, number_of_threads=per_tile)
                    # 16 columns at a time (one stmatrix per 64-row atom): the accumulators already
                    # stored are dead, so the epilogue's inputs and math reuse the main loop's registers.
                    for j in cute.range_constexpr(s * box_n // 16, (s + 1) * box_n // 16):
                        for fm in cute.range_constexpr(frg_m):
                            q = j * frg_m + fm                # the chunk; its inputs were loaded ahead
                            if cute.const_expr(q + ahead < chunks):
                                ahead_inputs.append(_chunk_inputs(xs, coords, q + ahead, values_per_m, frg_m,
                                                                  input_pairs, staged))
                            from_smem = _staged_pairs(ldsms, tRsRs, rpieces, j, fm)
                            for e in cute.range_constexpr(8):
                                if cute.const_expr(gated):
                                    i = 8 * (2 * j + e // 4) + e % 4 + acc_per_m * fm
                                    accs = [acc[i], acc[i + 4]]
                                else:
                                    accs = [acc[8 * j + e + acc_per_m * fm]]
                                elements = [(pairs if pairs is not None else from_smem[i])[e // 2][e % 2]
                                            for i, pairs in enumerate(ahead_inputs[q])]
                                values = epilogue_values(epilogues, accs, elements, input_dtypes, out_types)
                                for piece, value in zip(pieces, values):
                                    piece[e] = value
                            for stsm, piece, tSsC in zip(stsms, pieces, tSsCs):
                                if cute.const_expr(stsm is not None):
                                    cute.copy(stsm, piece, tSsC[(None, j), fm, None])
                                else:
                                    for e in cute.range_constexpr(8):
                                        tSsC[8 * j + e + values_per_m * fm] = piece[e]
                    cute.arch.fence_proxy("async.shared", space="cta")    # stmatrix writes -> the TMA stores
                    cute.arch.barrier(barrier_id=EPILOGUE_BARRIER + owner, number_of_threads=per_tile)
                    if ctid == 0:
                        for tma_c, sC in zip(tma_cs, sCs):
                            cute.copy(tma_c, sC[None, None, s % buffers], _tile(gE, m, n * boxes + s, l))
                        cute.arch.cp_async_bulk_commit_group()
            if cute.const_expr(pingpong):
                if tile_id + step < tiles:                # hand the buffers over once the stores read them
                    if ctid == 0:
                        cute.arch.cp_async_bulk_wait_group(0, read=True)
                    cute.arch.barrier_arrive(barrier_id=BUFFERS_BARRIER + 1 - owner, number_of_threads=2 * 128)
        if ctid == 0:
            cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def _gemm_host(a: cute.Tensor, b: cute.Tensor, sms: cute.Int32, config: Constexpr, epilogues: Constexpr,
               input_dtypes: Constexpr, input_pairs: Constexpr, *tensors):
    """a (M, K[, L]), b (N, K[, L]) (views: M/N or K may be the contiguous mode); `tensors` are
    one output per epilogue, (M, N[, L]) with N contiguous, then the epilogues' inputs."""
    shared = tensors[-2:] if config.stream_k else ()     # the workspace and flags (Walk)
    tensors = tensors[:-2] if config.stream_k else tensors
    outs, inputs = tensors[:len(epilogues)], tensors[len(epilogues):]
    ab, c = a.element_type, outs[0]
    BM, BN, pingpong = config.tile_m, config.tile_n, config.pingpong
    k_major = (k_major_view(a), k_major_view(b))
    load, store = cpasync.CopyBulkTensorTileG2SOp(), cpasync.CopyBulkTensorTileS2GOp()
    bk = k_tile(ab)
    tma_a, mA = cpasync.make_tiled_tma_atom(load, a, swizzled(BM, bk, None, k_major[0], ab.width // 8), (BM, bk))
    cm = 2 if config.cluster else 1
    tma_b, mB = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SMulticastOp() if cm == 2 else load, b,
                                            swizzled(BN, bk, None, k_major[1], ab.width // 8), (BN, bk),
                                            num_multicast=cm)
    gated = is_gated(epilogues)
    out_n = BN // 2 if gated else BN
    widths = tuple(out.element_type.width // 8 for out in outs)
    box_n = epi_n(len(outs), out_n, max(widths), narrow=config.narrow_boxes)
    # Outputs with M contiguous leave through column-major boxes: stmatrix.trans into 64-row
    # slabs (the layout of an M-major operand), each slab one TMA box.
    m_major = output_m_major(c)
    stores = [cpasync.make_tiled_tma_atom(store, out, swizzled(BM, box_n, None, not m_major, w), (BM, box_n))
              for out, w in zip(outs, widths)]
    tma_cs, mC = tuple(atom for atom, _ in stores), stores[0][1]   # one coordinate tensor serves all
    op = _mma_op(ab, b.element_type, BN, k_major)
    atoms = (1, 1, 1) if pingpong else (2, 1, 1)          # 1 or 2 warpgroups per tile
    tiled_mma = cute.make_tiled_mma(op, atoms)
    # A gated GEMM's outputs are partitioned like the accumulators of an MMA half as wide (never
    # issued: it only lays out the output tile).
    out_mma = tiled_mma if not gated else cute.make_tiled_mma(_mma_op(ab, b.element_type, out_n, k_major), atoms)
    out_types = tuple(out.element_type for out in outs)
    stsms = tuple(cute.make_tiled_copy_C(cute.make_copy_atom(warpgroup.StMatrix8x8x16bOp(m_major), t), out_mma)
                  if t.width == 16 else None for t in out_types)
    staged = config.staged or (False,) * len(inputs)
    loads = [cpasync.make_tiled_tma_atom(load, x, swizzled(BM, box_n), (BM, box_n))
             for x, st in zip(inputs, staged) if st]
    tma_rs, mRs = tuple(atom for atom, _ in loads), tuple(coords for _, coords in loads)
    ldsms = tuple(cute.make_tiled_copy_C(cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(), x.element_type),
                                         out_mma) if st else None for x, st in zip(inputs, staged))
    tiles = cute.ceil_div(cute.size(c, mode=[0]), BM * cm) * cute.ceil_div(cute.size(c, mode=[1]), out_n)
    if cute.const_expr(len(c.shape) == 3):
        tiles = tiles * cute.size(c, mode=[2])
    grid = cute.math.min(tiles, sms // cm) * cm              # whole clusters (cluster tiles of cm tiles)
    gemm_kernel(tma_a, tma_b, tma_cs, mA, mB, mC, inputs, tma_rs, mRs, shared, tiled_mma, out_mma, stsms, ldsms,
                epilogues, input_dtypes, input_pairs, out_types, k_major,
                _stages(widths, BN, pingpong, gated, sum(staged), BM),
                config, m_major).launch(
        grid=(grid, 1, 1), block=(THREADS, 1, 1), min_blocks_per_mp=1, cluster=(cm, 1, 1) if cm == 2 else None)


def output_m_major(c) -> bool:
    """Whether an output view (M, N[, L]) has M contiguous rather than N: a transposed
    problem's (gemm's C^T = B^T A^T, transpose_pays), 16-bit outputs only."""
    return not (isinstance(c.stride[1], int) and c.stride[1] == 1)


def staged_inputs(inputs, out_shape) -> tuple:
    """Per epilogue input, whether the epilogue stages it through shared memory: a whole 16-bit
    (M, N[, L]) tensor (no broadcast mode), N contiguous, that TMA can address (ping-pong at its
    epilogue's start; cooperative at the tile's main loop start, where 3 operand stages still fit:
    host_arguments). Its tile then arrives in a few bulk copies while a main loop runs, instead of as 64
    four-byte loads per thread, each with its clamped coordinates (on an H100 those loads cost a
    ping-pong proj + bias + residual 0.114 ms against 0.093 plain: they also slowed the other
    warpgroup's main loop)."""
    def whole(x):   # x as the kernel sees it: (M, N[, L]), broadcasts expanded (stride 0)
        return (x.dtype in (torch.bfloat16, torch.float16) and tuple(x.shape) == tuple(out_shape)
                and x.stride(1) == 1 and 0 not in x.stride() and x.data_ptr() % 16 == 0
                and all((d * 2) % 16 == 0 for i, d in enumerate(x.stride()) if i != 1))
    return tuple(whole(x) for x in inputs)


def reads_pairs(strides) -> bool:
    """Whether the epilogue reads an input view (rows, cols[, L]) of these strides two columns
    per load: a unit column stride and every other stride even (promised to the kernel with
    cute.assume; cute::gemm's C++ key tells even strides from odd ones). Measured on an H100:
    an L2 prefetch (cute.prefetch) of each tile's residual by the producer made the fused
    GEMMs 1-5 % slower, so there is none."""
    return strides[1] == 1 and all(d % 2 == 0 for i, d in enumerate(strides) if i != 1)


FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _check_operand_types(a: torch.Tensor, b: torch.Tensor) -> None:
    """bf16 or fp16 operands of one dtype, or fp8 ones (e4m3/e5m2, may differ) read K-major:
    wgmma transposes only 16-bit operands."""
    if a.dtype in FP8 and b.dtype in FP8:
        for name, t, k_dim in (("a", a, -1), ("b", b, -2)):
            if t.stride(k_dim) != 1 and t.shape[k_dim] > 1:
                raise ValueError(f"gemm: fp8 {name} (shape {tuple(t.shape)}, strides {t.stride()}) must have K "
                                 "contiguous: wgmma reads 8-bit operands K-major only (b as w.t() of an (N, K) w)")
    elif a.dtype != b.dtype or a.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"gemm: a is {a.dtype} and b {b.dtype}; the operands are both bfloat16, both float16, or "
                         "float8 (e4m3fn / e5m2)")


def _check_tma_addressable(name: str, t: torch.Tensor, output: bool = False) -> None:
    """TMA reads and writes tensors whose address and every stride but the contiguous one are
    multiples of 16 bytes: anything else is an error here, never a wrong answer."""
    operand_types = (torch.bfloat16, torch.float16, *FP8)
    if t.dtype not in ((torch.bfloat16, torch.float16, torch.float32) if output else operand_types):
        raise ValueError(f"gemm: {name} is {t.dtype}; the operands are bfloat16, float16 or float8 (e4m3fn / "
                         "e5m2), the outputs bfloat16, float16 or float32")
    if 1 not in t.stride()[-2:]:
        raise ValueError(f"gemm: {name} (shape {tuple(t.shape)}, strides {t.stride()}) has neither of its last two "
                         "dims contiguous; TMA needs one")
    size = t.element_size()
    bad = [s for s, n in zip(t.stride(), t.shape) if s != 1 and n > 1 and (s * size) % 16]
    if bad or t.data_ptr() % 16:
        raise ValueError(f"gemm: {name} (shape {tuple(t.shape)}, strides {t.stride()}, address {t.data_ptr():#x}) "
                         "is not addressable by TMA: its address and strides must be multiples of 16 bytes "
                         f"({16 // size} elements); pad the leading dimension")


def gemm(a: torch.Tensor, b: torch.Tensor, c, epilogue=None, inputs=(), tile_n: int | None = None,
         schedule: str | None = None, raster: str | None = None, tune: bool = False, cluster: bool = False,
         tile_m: int | None = None, stream_k: bool = False):
    """c = epilogue(a @ b) on one Hopper GPU, like torch.mm / torch.bmm (see host_arguments);
    with a tuple of outputs and one epilogue per output, every output from the same GEMM. With
    `tune` (and no explicit variant) the variant is the fastest of a few, timed once per
    problem class and remembered on disk (kernels/gemm_tuning.py)."""
    outs = tuple(c) if isinstance(c, (tuple, list)) else (c,)
    if a.dim() == 3 and b.dim() == 2 and not inputs:   # one weight for all: a single GEMM over the rows
        try:
            rows_a, rows = a.view(-1, a.shape[-1]), tuple(out.view(-1, out.shape[-1]) for out in outs)
        except RuntimeError:              # a or an output is not viewable as rows: broadcast b
            rows_a = None
        if rows_a is not None:
            gemm(rows_a, b, rows if isinstance(c, (tuple, list)) else rows[0], epilogue, tile_n=tile_n,
                 schedule=schedule, raster=raster, tune=tune, cluster=cluster, tile_m=tile_m, stream_k=stream_k)
            return c
    if transposes(a, b, outs, epilogue, inputs, (tile_n, schedule, raster, tile_m, cluster, stream_k)):
        swapped = tuple(out.t() for out in outs)        # (N, M) views with M contiguous; `tune` times its variants
        gemm(b.t(), a.t(), swapped if isinstance(c, (tuple, list)) else swapped[0], epilogue,
             tuple(x.expand(outs[0].shape).t() for x in inputs), tune=tune)
        return c
    if tune and tile_n is None and schedule is None and raster is None and tile_m is None:
        tile_n, schedule, raster, tile_m = _tuned(a, b, c, epilogue, inputs)
    _gemm_host(*host_arguments(a, b, c, epilogue, inputs, tile_n, schedule, raster, cluster, tile_m, stream_k))
    return c


def _tuned(a, b, c, epilogue, inputs):
    """The remembered or timed variant of this problem class, the heuristic's first."""
    from cute_torch.kernels import gemm_tuning as tuning
    outs = tuple(c) if isinstance(c, (tuple, list)) else (c,)
    epilogues = tuple(epilogue) if isinstance(epilogue, (tuple, list)) else (epilogue,)
    key = tuning.problem_key(torch.cuda.get_device_name(a.device), a, b, outs, epilogues, tuple(inputs))
    known = tuning.remembered(key)
    if known is not None:      # every call after the first: no heuristic, no timing
        return known
    config = host_arguments(a, b, c, epilogue, inputs)[3]     # the heuristic's choice
    default = tuning.Candidate(config.tile_n, "pingpong" if config.pingpong else "cooperative",
                               "n" if config.raster_n else "m", config.tile_m)
    candidates = (default, *(x for x in tuning.CANDIDATES if x != default))

    def time_ms(candidate):
        args = host_arguments(a, b, c, epilogue, inputs, candidate.tile_n, candidate.schedule, candidate.raster,
                              tile_m=candidate.tile_m)
        return tuning.cuda_time_ms(lambda: _gemm_host(*args))
    return tuning.choose(key, time_ms, candidates)


def host_arguments(a: torch.Tensor, b: torch.Tensor, c, epilogue=None, inputs=(), tile_n: int | None = None,
                   schedule: str | None = None, raster: str | None = None, cluster: bool = False,
                   tile_m: int | None = None, stream_k: bool = False) -> tuple:
    """The arguments of _gemm_host for c = epilogue(a @ b): a (M, K) or (L, M, K), b (K, N) or
    (L, K, N), c (M, N) or (L, M, N) with N contiguous. a and b may each be row- or
    column-major, with any batch strides (no copies: an operand's shared layout and the wgmma's
    major mode follow its contiguous mode).

    `epilogue` is None, a DSL function of one fp32 accumulator, or an expression in the
    pointwise language over `acc` and x0..xN, the tensors of `inputs` broadcast to c's shape (a
    bias `acc + x0` with x0 of shape (N,), a residual of shape (M, N), ...). `c` may be a tuple
    of up to MAX_OUTPUTS outputs with `epilogue` a tuple of as many epilogues, all computed from
    the same accumulators (e.g. the pre-activation and the activation for autograd). `tile_n`
    (a multiple of 16 from 64 to 256; other than 64, 128, 192 and 256 only with 16-bit operands,
    K-major B and no gate or cluster) overrides choose_tile_n; `schedule` is "cooperative" (both consumer
    warpgroups on each tile) or "pingpong" (each on its own 128-row tile, 128 columns wide, or
    up to WIDE_PINGPONG given or where wide_pingpong chose it; the epilogue of one overlapping the
    other's main loop), by default choose_schedule's, which short_tile_n, wide_pingpong or
    plain_pingpong may turn into ping-pong (cooperative where `tile_n` is given);
    `raster` is "m" (the default: groups of tile rows) or
    "n" (groups of tile columns, for N much larger than M); `cluster` runs clusters of two CTAs
    on vertically adjacent tiles that multicast their shared B tiles (cooperative only);
    `tile_m` is 128 or 64 (ping-pong only, 16-bit operands, no gate: one warpgroup per 64-row
    tile, any `tile_n`), by default 64 where short_tile_n finds it faster; `stream_k` shares the
    tiles of a last partial wave among all CTAs by k-tiles (cooperative 128-row tiles without
    clusters; kernels/gemm_stream_k.py), through a workspace allocated here."""
    outs, epilogues, gated, batched, views, tensors, dtypes = problem(a, b, c, epilogue, inputs, m_major_outputs=True)
    for name, t in (("a", a), ("b", b)):
        _check_tma_addressable(name, t)
    _check_operand_types(a, b)
    for i, out in enumerate(outs):
        _check_tma_addressable(f"output {i}", out, output=True)
    if len({out.stride(-2) == 1 and out.stride(-1) != 1 for out in outs}) > 1:
        raise ValueError("gemm: the outputs must all have N contiguous, or all M")
    line = 1 if n_contiguous(outs[0]) else 2                                   # the contiguous mode
    if (outs[0].shape[-line] * outs[0].element_size()) % 16:
        raise ValueError(f"gemm: an output line of {outs[0].shape[-line]} elements is not a multiple of 16 bytes (TMA "
                         f"stores it); pad {'M' if line == 2 else 'N'}")
    shape = outs[0].shape
    pairs = tuple(reads_pairs(x.stride()) for x in tensors[len(outs):])
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 132
    # Broadcast inputs keep their static stride 0: a bias is then read once per column.
    dynamic = [cute.from_dlpack(x).mark_layout_dynamic(keep_broadcast=True) for x in views + tuple(tensors)]
    if schedule not in (None, "cooperative", "pingpong"):
        raise ValueError(f"gemm: schedule is 'cooperative' or 'pingpong', got {schedule!r}")
    staged = staged_inputs(tensors[len(outs):], tensors[0].shape)
    if tile_m not in (None, 64, BM):
        raise ValueError(f"gemm: tile_m is 128 or 64, got {tile_m!r}")
    if tile_m == 64 and (gated or a.element_size() == 1 or cluster or schedule == "cooperative"):
        raise ValueError("gemm: 64-row tiles take 16-bit operands, no gate or cluster, and the ping-pong schedule "
                         "(one warpgroup's wgmma row per tile)")
    batches, short_only = shape[0] if batched else 1, tile_m == 64
    schedule = "cooperative" if stream_k and schedule is None else schedule
    if tile_n is None:
        tile_n = choose_tile_n(shape[-2], b.shape[-1], batches, sms, gated,
                               k_major_b(b) and not cluster and a.element_size() == 2)
        given = schedule
        if schedule is None and not cluster:
            fused = calls_function(epilogues) or any(0 in x.stride() for x in tensors[len(outs):])
            schedule = choose_schedule(a.shape[-1], tile_n, len(outs), staged, gated, a.element_size() == 1, fused)
        # 64-row tiles where 128-row ones would be cooperative (where ping-pong was chosen to hide an
        # epilogue, its 128-row tiles measured as fast or faster: a residual 1-6 % on the H200), and
        # wherever M <= 64 (half of each 128-row tile would be empty).
        if short_only or (tile_m is None and given is None and (schedule == "cooperative" or shape[-2] <= 64)
                          and not cluster and not gated and a.element_size() == 2):
            short = short_tile_n(shape[-2], b.shape[-1], a.shape[-1], batches, sms, tile_n, force=short_only)
            if short:
                tile_m, tile_n, schedule = 64, short, "pingpong"
        wide = False
        if given is None and tile_m is None and schedule == "cooperative" and not (cluster or gated) \
                and a.element_size() == 2:
            plain = len(outs) == len(tensors) == 1 and outs[0].element_size() == 2 \
                and not calls_function(epilogues)
            wide = plain and wide_pingpong(shape[-2], shape[-1], a.shape[-1], batches, sms, tile_n)
            if wide or plain_pingpong(a.shape[-1], tile_n, len(outs), len(tensors) - len(outs),
                                      fast_memory(a.device.index if a.is_cuda else None)):
                schedule = "pingpong"
        tile_n = (WIDE_PINGPONG if wide else 128) if schedule == "pingpong" and tile_m != 64 else tile_n
    tile_m = tile_m or BM
    if tile_m == 64:
        schedule = "pingpong"
    pingpong = schedule == "pingpong"
    if not (isinstance(tile_n, int) and 64 <= tile_n <= 256 and tile_n % 16 == 0) or (
            pingpong and tile_m == BM and not 128 <= tile_n <= WIDE_PINGPONG):
        raise ValueError(f"gemm: tile_n is a multiple of 16 from 64 to 256 (128 to {WIDE_PINGPONG} for ping-pong's "
                         f"128-row tiles: one warpgroup's accumulators), got {tile_n!r}")
    if tile_n not in TILE_WIDTHS and (gated or cluster or not k_major_b(b) or a.element_size() == 1):
        raise ValueError(f"gemm: a {tile_n}-wide tile needs 16-bit operands, K-major B (b a column-major view, as "
                         "F.linear's weight.t()) and no gate or cluster; 64, 128, 192 and 256 take any")
    if gated and tile_n == 192:
        raise ValueError("gemm: a gated GEMM's tile_n is 64, 128 or 256 (192 would be an odd number of boxes)")
    if raster not in (None, "m", "n"):
        raise ValueError(f"gemm: raster is 'm' or 'n', got {raster!r}")
    if cluster and pingpong:
        raise ValueError("gemm: clusters are for the cooperative schedule")
    if any(staged) and not pingpong:     # the cooperative schedule stages where 3 operand stages still fit
        widths = tuple(out.element_size() for out in outs)
        fits = tile_n in (128, 256) and _stages(widths, tile_n, False, gated, sum(staged)) >= 3
        staged = staged if fits and not (gated or cluster) and a.element_size() == 2 else ()
    if stream_k and (pingpong or cluster):
        raise ValueError("gemm: stream-K runs the cooperative schedule over 128-row tiles, without clusters")
    staged = () if stream_k else staged       # (a finisher's epilogue reads its inputs from global memory)
    config = Config(tile_n, pingpong, raster == "n", bool(cluster), staged if any(staged) else (), tile_m,
                    bool(stream_k))
    if stream_k:     # a slot of one tile's Float32 accumulators per CTA, and the CTAs' flags (zeros)
        dynamic += [cute.from_dlpack(t).mark_layout_dynamic() for t in workspace(a.device, sms, BM * tile_n)]
    return (*dynamic[:2], sms, config, epilogues, dtypes, pairs, *dynamic[2:])

