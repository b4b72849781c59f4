"""RMSNorm and LayerNorm over the last dimension, forward and backward, one pass over memory.

Forward (a thread's part of a row in registers, kernels/row_reduce.py), optionally after adding
a residual (the sum is written too: the next block's residual stream):

    RMSNorm:    rstd = rsqrt(mean(x^2) + eps);                    y = x * rstd * w
    LayerNorm:  mean = mean(x); rstd = rsqrt(mean((x - mean)^2) + eps);  y = (x - mean) * rstd * w + b

rstd (and mean) are saved per row in Float32 for the backward. LayerNorm's variance is the
two-pass form over registers (no cancellation), the columns past N that a thread holds masked
out of it; 16-bit rows held by one CTA take both statistics in one trip through shared memory,
each thread's mean and squared deviations merged by Chan's formula (one_trip_statistics).
Short rows take one block of rows per CTA, and two or more CTAs per SM overlap one's
reductions with another's loads. Long rows (and rows with a residual) leave room for one CTA
per SM: there each CTA walks several blocks of rows and loads the next block's rows into
registers before the current block's reductions (forward_plan). Over a cluster, LayerNorm's
16-bit parts trade their (mean, M2) once per row, and that trip is pipelined behind the next
row's, on a grid of as many clusters as run at once (pipelined_forward).

Backward, with x_hat = (x - mean) * rstd and g = dy * w:

    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (RMSNorm: no mean(g) term)
    dw = sum over rows of dy * x_hat,   db = sum over rows of dy

The backward is a persistent grid (as many CTAs, or clusters, as run at once: the driver's
occupancy) whose CTAs walk blocks of rows. x and dy reach shared memory by cp.async, blocks
ahead of the math in a ring (each thread copies and reads its own vectors, so no barrier), and
each row is read from there twice, for its sums and then for dx: the loads stay in flight
through the reduction without holding registers. The weight is staged once per CTA. The
instruction issue, not memory, bounds it: a row's sums take g * (x - mean) by fma, rstd
applied once to the sum (except the 256-thread CTAs, tight_schedule). Over a
cluster, a row's sums trade between the CTAs, a trip that waits for the slowest of them; each
CTA sums and sends the next row before it receives this row's and writes its dx
(_walk_cluster_rows_backward).

dw and db are reduced in two stages: each CTA sums its rows into Float32 partials in
registers, adds its rows' partials in shared memory (in a fixed order: deterministic) and
writes one partial row; the partial rows are then summed (kernels/column_sums.py's second
launch, a (CTAs x N) read, small next to the (M x N) tensors).

Rows too long for one CTA are split over a cluster of CTAs (kernels/row_reduce.py), up to 8 x
32768 columns: past forward_plan's values per thread forward, past BACKWARD_BYTES per thread
per staged row backward. The limits are measured (benchmarks/RESULTS.md): fewer,
fuller CTAs win until registers spill (forward) or shared memory runs out (backward).
"""

from __future__ import annotations

from dataclasses import replace

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .column_sums import launch_sum_partials
from .row_reduce import (MAX_CLUSTER, MAX_THREADS, NON_PORTABLE_CLUSTER, RowConfig, clamp_row, clear_staged,
                         cluster_merge_mean_m2, cluster_peers, cluster_reduce_received, cluster_send, column_mask,
                         cta_group, direct_config, direct_exchange, direct_fold, dynamic_rows, fast_memory,
                         fetch_row, fold, fold_products, launch_cluster, launch_grid, load_row, merge_mean_m2,
                         open_direct, persistent_groups, resident_groups, row_config, row_mean_m2, row_reduce,
                         spills, stage_row, stage_vectors, start_staged_row, store_row, thread_place,
                         unless_it_spills, walk_cluster_rows, walking_groups, warp_mean_m2)

# Rows of up to this many elements: one CTA's registers, times the largest cluster.
MAX_NORM_N = 32768 * MAX_CLUSTER
# Row values a thread holds at most forward.
FORWARD_VALUES = 64
# forward_shape's walk for direct_shape's forwards: one row per cluster in quack's shape.
DIRECT = 0
# Backward: bytes of each staged tensor (x, dy) per thread (32 16-bit values, 16 Float32), in
# CTAs of MAX_THREADS; the ring takes up to BACKWARD_STAGES blocks of rows within the shared
# memory an H100 CTA may have (what row_reduce allocates statically kept aside).
BACKWARD_BYTES, BACKWARD_STAGES, BACKWARD_SMEM = 64, 4, 232448 - 2048


# Forwards that walk blocks of rows, each fetching the next block into registers ahead of its
# reductions: (element size, rms, residual) -> [(from N, values per thread, blocks walked),
# ...], the last entry whose N is reached applies. A thread that holds its part of a row and
# fetches the next keeps one CTA per SM busy through its reductions, where one row per CTA
# needs two CTAs per SM to overlap them, and long rows (or rows with a residual) leave no room
# for two. The faster the memory, the more it matters: measured fraction of copy, H200 / H100,
# before -> after (benchmarks/RESULTS.md); an entry that cost the H100 over 2 % for less than
# 10 % on the H200 was left out.
FORWARD_WALKS = {
    # 65536, 131072: 0.82 -> 0.93 / 0.98 -> 0.95; 0.78 -> 0.89 / 0.95 -> 0.93
    (2, True, False): [(65536, 64, 8)],
    # 16384, 65536, 131072: 0.78 -> 0.95 / 0.94 -> 0.98; 0.77 -> 0.94 / 0.96 -> 0.97; 0.76 -> 0.90 / 0.94 -> 0.96
    (2, True, True): [(16384, 32, 4)],
    # Walking from 16384 .. 131072 with two-trip statistics: 0.81 / 0.79 / 0.68 / 0.64 -> 0.88 / 0.89 / 0.74 /
    # 0.72 (H200), 0.92 / 0.93 / 0.84 / 0.79 -> 0.95 / 0.93 / 0.88 / 0.86 (H100)
    # Up to 16384 one row per CTA since its statistics take one trip (one_trip_statistics; they walked
    # 2048 .. 16384 with two trips): 2048 / 4096 / 8192 / 16384 0.958 / 0.956 / 0.943 / 0.897 -> 0.968 / 0.971 /
    # 0.974 / 0.896 (H200), 0.970 / 0.991 / 0.977 / 0.958 -> 0.979 / 0.985 / 0.987 / 0.982 (H100)
    # 65536 and 131072 walk pipelined on a persistent grid (pipelined_forward; the 8 is unused there).
    (2, False, False): [(32768, 64, 8), (65536, 32, 8)],
    # 32768 .. 131072: 0.78 / 0.72 / 0.73 -> 0.94 / 0.90 / 0.87 (H200), 0.86 / 0.84 / 0.86 -> 0.95 / 0.95 / 0.94;
    # 16384 and 32768 walking 4 blocks instead of 8: 0.936 / 0.931 -> 0.943-0.950 / 0.932-0.942 (H200),
    # 0.968 / 0.950 -> 0.977 / 0.965 (H100)
    (2, False, True): [(16384, 32, 4), (65536, 32, 8)],
    # 65536, 131072: 0.78 -> 0.96 / 0.95 -> 0.96; 0.76 -> 0.93 / 0.91 -> 0.96
    (4, True, False): [(65536, 32, 8)],
    # 32768: 0.94 -> 0.96 / 0.95 -> 0.97 (65536 on: 0.91 -> 0.95 on the H200, 1.00 -> 0.96 on the H100)
    (4, True, True): [(32768, 16, 8), (65536, 32, 1)],
    # 16384 .. 131072: 0.89 / 0.88 / 0.86 / 0.79 -> 0.95 / 0.95 / 0.90 / 0.87 (H200), within 1.5 % on the H100
    (4, False, False): [(16384, 32, 8)],
}


# Walks only a card with fast memory takes (row_reduce.fast_memory: an H200), merged into
# FORWARD_WALKS by their N (after its entries of the same N): (element size, rms, residual,
# weight and bias given: 0, 1 or 2) -> entries as there. H200 bf16 fraction of copy, before -> after:
# LayerNorm at 16384 with weight and bias, read once per CTA into shared memory where it walks
# (_stages_parameters) instead of once per row through L2, two CTAs per SM (walking_ctas): 0.893 -> 0.924-0.929.
# Without them it lost (0.973 -> 0.940); at 32768 walking 4 blocks equals 8.
# At 32768 32 values a thread over clusters of 2, pipelined on the persistent grid as from 65536:
# 0.913 / 0.909 -> 0.921 / 0.923 (the H100 lost: 0.938 / 0.940 -> 0.923 / 0.921). (2026-11-26)
_LAYER_NORM_PARAMETER_WALKS = [(16384, 64, 4), (32768, 32, 8)]
FAST_MEMORY_WALKS = {
    # RMSNorm at 32768 with a weight, one 512-thread CTA per SM unwalked: 0.903 -> 0.944 walking 4 blocks
    # (0.936 walking 8).
    (2, True, False, 1): [(32768, 64, 4)],
    (2, False, False, 1): _LAYER_NORM_PARAMETER_WALKS,
    # With weight and bias past 8192 they walked 4 blocks too (10000 / 12288 / 14000: 0.77 / 0.83 / 0.88 ->
    # 0.85 / 0.93 / 0.90); one row per CTA bounded to three CTAs per SM (unwalked_ctas) measured 0.95 / 0.96 /
    # 0.93-0.95 (2026-11-27; at 14000 spilling 24 bytes, UNWALKED_SPILL), and keeps them there.
    (2, False, False, 2): _LAYER_NORM_PARAMETER_WALKS,
}


def forward_plan(n: int, size: int, rms: bool, residual: bool, fast: bool = False,
                 params: int = 2) -> tuple[int, int]:
    """(row values per thread, blocks of rows each CTA (cluster) walks; 1: one block, no loop)
    of the forward over rows of `n` elements of `size` bytes (the largest operand's); `fast`:
    the device has fast memory, `params`: how many of weight and bias are given (FAST_MEMORY_WALKS)."""
    plan = (forward_values(n, rms, residual), 1)
    key = (size, rms, residual)
    walks = FORWARD_WALKS.get(key, []) + (FAST_MEMORY_WALKS.get(key + (params,), []) if fast else [])
    for start, values, walk in sorted(walks, key=lambda entry: entry[0]):
        if n >= start:
            plan = (values, walk)
    return plan


def forward_values(n: int, rms: bool, residual: bool = False) -> int:
    """Row values per thread of a forward that does not walk (forward_plan), measured on an
    H100 in bf16 (fraction of copy; benchmarks/row_configs.py and reductions.py): 64, and 32
    where 64 would need a cluster anyway (RMSNorm past 32768 columns: 0.98 against 0.96 at
    65536) or would spill (LayerNorm past 8192 columns with a residual)."""
    if rms:
        return 32 if n > 32768 else FORWARD_VALUES
    return 32 if n > 8192 and residual else FORWARD_VALUES


def one_trip_statistics(bits: int, cfg: RowConfig, residual: bool) -> bool:
    """Whether LayerNorm's forward takes its mean and variance in one trip through shared memory
    (row_reduce.row_mean_m2: each thread's own mean and squared deviations, merged by Chan's
    formula) instead of two (the mean, then the squares about it): for 16-bit rows held whole
    by one CTA, without padding or a residual. One trip let 2048-16384 columns run as one row
    per CTA without the walk (FORWARD_WALKS; bf16 fraction of copy, H200 / H100: 8192 0.943 /
    0.977 -> 0.974 / 0.987, 16384 0.897 / 0.958 -> 0.896 / 0.982). With a residual it measured
    0.5-1.2 % slower on both; Float32 rows within 0.5 %, and there its rstd was less exact
    (relative error 4.9e-6 against 1.2e-7 on rows at 1000 + N(0, 1)), which a 16-bit output
    does not resolve. Over a cluster each part's (mean, M2) trade once instead of two sums
    (bf16 with weight and bias, fraction of copy, 65536 / 131072 columns: H200 0.80 / 0.77 ->
    0.81 / 0.77, H100 0.918 / 0.898 -> 0.925 / 0.901; then pipelined: pipelined_forward)."""
    return bits <= 16 and not cfg.padding and not residual


@cute.jit
def _statistics(x, cfg: Constexpr, rms: Constexpr, eps, lane, row_in_cta, peers, step, one_trip: Constexpr):
    """(mean, rstd) of this thread's row (mean is 0.0 for RMSNorm). `step` counts the kernel's
    reductions so far (row_reduce's slot sets; None: the kernel's only row, without a cluster);
    LayerNorm makes two per row, one with `one_trip` (one_trip_statistics)."""
    first, second = (None, None) if cute.const_expr(step is None) else (step, step + 1)
    if cute.const_expr(rms):
        mean = 0.0
        var = row_reduce(fold(x * x, "sum"), "sum", cfg, lane, row_in_cta, first, peers) * (1.0 / cfg.n)
    elif cute.const_expr(one_trip):
        mean, m2 = row_mean_m2(x, cfg, row_in_cta, first, peers)
        var = m2 * (1.0 / cfg.n)
    else:
        mean = row_reduce(fold(x, "sum"), "sum", cfg, lane, row_in_cta, first, peers) * (1.0 / cfg.n)
        centered = x - mean
        if cute.const_expr(cfg.padding):
            centered = centered * column_mask(lane, cfg)
        var = row_reduce(fold(centered * centered, "sum"), "sum", cfg, lane, row_in_cta, second, peers) * (1.0 / cfg.n)
    return mean, cute.math.rsqrt(var + eps)


@cute.kernel
def _forward_kernel(mX: cute.Tensor, mRes, mW, mB, mY: cute.Tensor, mResOut, mRstd: cute.Tensor, mMean,
                    eps: cute.Float32, cfg: Constexpr, rms: Constexpr, walk: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    one_trip = one_trip_statistics(mX.element_type.width, cfg, mRes is not None)
    pipelined = pipelined_forward(cfg, walk, mX.element_type.width, rms, mRes is not None)
    peers = None
    if cute.const_expr(walk != DIRECT):
        peers = cluster_peers(cfg, sets=4 if cute.const_expr(pipelined) else 2)   # (pipelined: sends run ahead)
    rows = mX.shape[0]
    outputs = (mY, mResOut, mRstd, mMean)
    if cute.const_expr(walk == DIRECT):
        if cute.const_expr(mRes is not None or (cfg.padding and not rms)):
            raise ValueError("the direct shape takes rows without a residual, LayerNorm's without padding "
                             "(norms.direct_shape)")
        _direct_row(mX, mW, mB, outputs, eps, cfg, rms, row, lane, row_in_cta)
    elif cute.const_expr(pipelined):
        _walk_cluster_rows(mX, mW, mB, outputs, eps, cfg, lane, peers)
    elif cute.const_expr(walk > 1):
        # Each CTA (cluster) walks every groups-th block of rows, the next block's x (and
        # residual) fetched into registers before this one's reductions: its loads are in
        # flight through them.
        group, groups = cta_group(cfg)
        blocks = (rows + cfg.rows - 1) // cfg.rows
        ahead_x = cute.make_rmem_tensor((cfg.vec, cfg.vectors), mX.element_type)
        ahead_r = cute.make_rmem_tensor((cfg.vec, cfg.vectors), mRes.element_type) \
            if cute.const_expr(mRes is not None) else None
        _fetch_rows(mX, mRes, ahead_x, ahead_r, clamp_row(group * cfg.rows + row_in_cta, rows), cfg, lane)
        held = (None, None)
        if cute.const_expr(_stages_parameters(mW, mB)):
            smem = cute.SmemAllocator()
            held = tuple(_stage_parameter(smem, p, cfg, lane, row_in_cta) for p in (mW, mB))
            cute.arch.sync_threads()
        k = 0                                       # blocks done
        for block in range(group, blocks, groups):
            x = ahead_x.load().to(cute.Float32)
            res = ahead_r.load().to(cute.Float32) if cute.const_expr(mRes is not None) else None
            _fetch_rows(mX, mRes, ahead_x, ahead_r, clamp_row((block + groups) * cfg.rows + row_in_cta, rows), cfg,
                        lane)
            _normalize_row(x, res, block * cfg.rows + row_in_cta, rows, mW, mB, held, outputs, eps, cfg, rms, lane,
                           row_in_cta, peers, k * (1 if cute.const_expr(rms or one_trip) else 2), one_trip)
            # (a step a reduction)
            k = k + 1
    else:                                           # one block of rows per CTA (cluster), no loop
        src = clamp_row(row, rows)
        res = load_row(mRes, src, lane, cfg) if cute.const_expr(mRes is not None) else None
        _normalize_row(load_row(mX, src, lane, cfg), res, row, rows, mW, mB, (None, None), outputs, eps, cfg, rms, lane,
                       row_in_cta, peers, 0 if cute.const_expr(peers is not None) else None, one_trip)


@cute.jit
def _direct_row(mX, mW, mB, outputs, eps, cfg: Constexpr, rms: Constexpr, row, lane, row_in_cta):
    """The row in quack's shape (direct_shape), one row per cluster: the CTA's part of x staged
    by cp.async.ca, the weight (and bias) read into registers under those copies, each warp's
    statistics sent straight to every CTA (row_reduce.direct_exchange: RMSNorm's sum of
    squares; LayerNorm's mean and M2 about it, merged by Chan's formula as row_mean_m2's), then
    x read again from shared memory, so that it is not live through the exchange (RMSNorm: 80
    registers, three CTAs per SM, no spills; four CTAs at 64 registers spilled 20 bytes and
    read 0.93 of copy)."""
    rows = mX.shape[0]
    slots, bar = open_direct(cfg, 1 if cute.const_expr(rms) else 2)
    vectors = start_staged_row(mX, clamp_row(row, rows), lane, row_in_cta, cfg)
    w = _held_parameter(mW, cfg, lane)
    b = _held_parameter(mB, cfg, lane)
    cute.arch.cp_async_wait_group(0)
    x = vectors.load().to(cute.Float32)
    mean = 0.0
    if cute.const_expr(rms):
        total = cute.arch.warp_reduction(fold_products(x, x), lambda u, v: u + v, 32)
        direct_exchange((total,), cfg, slots, bar)
        (square_sum,) = direct_fold(cfg, slots, 1, lambda a, b, count_a, count_b: (a[0] + b[0],))
    else:
        direct_exchange(warp_mean_m2(x, cfg), cfg, slots, bar)
        per_entry = cfg.vec * cfg.vectors * 32
        mean, square_sum = direct_fold(cfg, slots, 2, lambda a, b, count_a, count_b:
                                       merge_mean_m2(a, b, count_a * per_entry, count_b * per_entry))
    rstd = cute.math.rsqrt(square_sum * (1.0 / cfg.n) + eps)
    x = vectors.load().to(cute.Float32)
    y = (x if cute.const_expr(rms) else x - mean) * rstd
    if cute.const_expr(mW is not None):
        y = y * w.load().to(cute.Float32)
    if cute.const_expr(mB is not None):
        y = y + b.load().to(cute.Float32)
    mY, _, mRstd, mMean = outputs
    if row < rows:
        store_row(mY, row, lane, cfg, y)
        if lane == 0:
            mRstd[row] = rstd
            if cute.const_expr(not rms):
                mMean[row] = mean


@cute.jit
def _held_parameter(mP, cfg: Constexpr, lane):
    """This thread's values of weight or bias `mP` in registers, in its own type (None for None)."""
    if cute.const_expr(mP is None):
        return None
    held = cute.make_rmem_tensor((cfg.vec, cfg.vectors), mP.element_type)
    fetch_row(mP, 0, lane, cfg, held)
    return held


def pipelined_forward(cfg: RowConfig, walk: int, bits: int, rms: bool, residual: bool) -> bool:
    """Whether the forward walks rows over a cluster with its exchanges pipelined
    (_walk_cluster_rows) on a persistent grid (row_reduce.persistent_groups): LayerNorm's walking forwards
    over clusters whose statistics take one trip (one_trip_statistics: 16-bit rows without
    padding or a residual). bf16 with weight and bias, fraction of copy at 65536 / 131072
    columns, H200: two exchanges a row -> one 0.80 / 0.77 -> 0.81 / 0.77; pipelined 0.82 /
    0.80; on the persistent grid 0.90 / 0.90 (without weight and bias 0.85 / 0.83 -> 0.93 /
    0.93). H100: 0.917 / 0.898 -> 0.915 / 0.929 (0.937 / 0.924 -> 0.927 / 0.929). The
    persistent grid cost the other walks on the H200 (one CTA a block at 32768 columns 0.91 ->
    0.86, RMSNorm over clusters of 2 at 65536 0.94 -> 0.91): they keep forward_plan's groups of
    `walk` blocks."""
    return walk > 1 and cfg.cluster > 1 and not rms and one_trip_statistics(bits, cfg, residual)


@cute.jit
def _walk_cluster_rows(mX, mW, mB, outputs, eps, cfg: Constexpr, lane, peers):
    """LayerNorm's rows split across a cluster (one_trip_statistics), walked pipelined as
    softmax's are (row_reduce.walk_cluster_rows): a row's parts trade their (mean, M2) once;
    `held` keeps x. The weight and bias are staged while the first row loads
    (_stages_parameters)."""
    rows = mX.shape[0]

    def stage():
        params = (None, None)
        if cute.const_expr(_stages_parameters(mW, mB)):
            smem = cute.SmemAllocator()
            params = tuple(_stage_parameter(smem, p, cfg, lane, 0) for p in (mW, mB))
            cute.arch.sync_threads()
        return params

    def start(x, held, step, context):
        held.store(x)
        tidx, _, _ = cute.arch.thread_idx()
        cluster_send(row_mean_m2(x, cfg, 0, step, peers, cluster_wide=False), cfg, tidx, 0, step, peers)

    def finish(held, kept, row, step, params):
        mean, m2 = cluster_merge_mean_m2(cfg, 0, step, peers)
        _store_normalized(held, mean, cute.math.rsqrt(m2 * (1.0 / cfg.n) + eps), row, rows, mW, mB, params, outputs,
                          cfg, False, lane)

    walk_cluster_rows(mX, cfg, lane, start, finish, prologue=stage)


def _stages_parameters(mW, mB) -> bool:
    """Whether a walking forward copies the weight and bias to shared memory once per CTA:
    16-bit ones, read per row from global memory, were as many bytes again through L2 as the
    rows themselves (H200 bf16 LayerNorm 0.75 / 0.72 -> 0.80 / 0.77 of copy at 65536 / 131072,
    0.91 -> 0.95 walked at 4096). Float32 ones measured slower staged (0.88 -> 0.77 at 131072)."""
    present = [p for p in (mW, mB) if p is not None]
    return bool(present) and all(p.element_type.width <= 16 for p in present)


@cute.jit
def _parameter(mP, staged, cfg: Constexpr, lane):
    """This thread's values of a weight or bias: from its shared-memory copy, or global memory."""
    if cute.const_expr(staged is not None):
        return stage_vectors(staged, lane, cfg).load().to(cute.Float32)
    return load_row(mP, 0, lane, cfg)


@cute.jit
def _stage_parameter(smem, mP, cfg: Constexpr, lane, row_in_cta):
    """A shared-memory copy of this CTA's part of weight or bias `mP` (None for None), written
    by the first row's threads; the caller syncs the CTA before reading it."""
    if cute.const_expr(mP is None):
        return None
    staged = smem.allocate_tensor(mP.element_type, cute.make_layout(cfg.part), 16)
    if row_in_cta == 0:
        vectors = stage_vectors(staged, lane, cfg)
        clear_staged(vectors, lane, cfg)
        vectors.store(load_row(mP, 0, lane, cfg).to(mP.element_type))
    return staged


@cute.jit
def _fetch_rows(mX, mRes, ahead_x, ahead_r, row, cfg: Constexpr, lane):
    """Starts loading row `row` of x (and of the residual, unless None) into registers."""
    fetch_row(mX, row, lane, cfg, ahead_x)
    if cute.const_expr(mRes is not None):
        fetch_row(mRes, row, lane, cfg, ahead_r)


@cute.jit
def _normalize_row(x, res, row, rows, mW, mB, held, outputs, eps, cfg: Constexpr, rms: Constexpr, lane, row_in_cta,
                   peers, step, one_trip: Constexpr):
    """One row (`x` and the residual `res` or None, as load_row reads them) normalized and stored
    with its statistics. `held`: the weight's and bias's shared-memory copies where the kernel
    made them (None: read from global memory here, after the reductions)."""
    if cute.const_expr(res is not None):
        x = x + res
    mean, rstd = _statistics(x, cfg, rms, eps, lane, row_in_cta, peers, step, one_trip)
    _store_normalized(x, mean, rstd, row, rows, mW, mB, held, outputs, cfg, rms, lane)


@cute.jit
def _store_normalized(x, mean, rstd, row, rows, mW, mB, held, outputs, cfg: Constexpr, rms: Constexpr, lane):
    """Row `row` (`x`, after any residual) normalized by its statistics, with its weight and
    bias (from their shared-memory copies `held`, or global memory), and stored with them."""
    mY, mResOut, mRstd, mMean = outputs
    y = x * rstd if cute.const_expr(rms) else (x - mean) * rstd
    if cute.const_expr(mW is not None):
        y = y * _parameter(mW, held[0], cfg, lane)
    if cute.const_expr(mB is not None):
        y = y + _parameter(mB, held[1], cfg, lane)
    if row < rows:
        store_row(mY, row, lane, cfg, y)
        if cute.const_expr(mResOut is not None):
            store_row(mResOut, row, lane, cfg, x)
        if lane == 0:
            mRstd[row] = rstd
            if cute.const_expr(mMean is not None):
                mMean[row] = mean


@cute.kernel
def _backward_kernel(mX: cute.Tensor, mW, mDY: cute.Tensor, mRstd: cute.Tensor, mMean, mDX: cute.Tensor,
                     mDWPartial, mDBPartial, cfg: Constexpr, stages: Constexpr):
    _, lane, row_in_cta = thread_place(cfg)
    # (the pipelined walk trades one row ahead: four sets of exchange slots)
    peers = cluster_peers(cfg, sets=4 if cute.const_expr(pipelined_backward(cfg, stages)) else 2)
    group, groups = cta_group(cfg)
    rows = mX.shape[0]
    blocks = (rows + cfg.rows - 1) // cfg.rows
    # A ring of `stages` blocks of x and dy rows (this CTA's columns) in shared memory, filled by
    # cp.async `stages - 1` blocks ahead of the math: the loads stay in flight through the row's
    # reduction without holding registers. Each thread copies and reads only its own vectors.
    # (stages == 0: rows too long for one block in shared memory are read from global memory.)
    smem = cute.SmemAllocator()
    sX, sDY, sW = None, None, None
    if cute.const_expr(stages > 0):
        sX, sDY = _open_ring(smem, mX, mDY, stages, group, groups, blocks, cfg, lane, row_in_cta)
        # The weight, once per CTA (the first row's threads copy it for all rows).
        if cute.const_expr(mW is not None):
            sW = _stage_parameter(smem, mW, cfg, lane, row_in_cta)
            cute.arch.sync_threads()
    dw = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    db = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    dw.fill(0.0)
    db.fill(0.0)
    rings = (sX, sDY, sW)
    grads = (mDX, dw, db, mDWPartial is not None, mDBPartial is not None)
    layer = mMean is not None
    if cute.const_expr(pipelined_backward(cfg, stages)):
        _walk_cluster_rows_backward(mX, mW, mDY, mRstd, mMean, rings, grads, cfg, stages, lane, peers)
    else:
        # The row statistics are read one block ahead, in registers.
        following = clamp_row(group * cfg.rows + row_in_cta, rows)
        rstd_next = mRstd[following]
        mean_next = mMean[following] if cute.const_expr(layer) else 0.0
        step = 0                                    # blocks done: the ring's slot, row_reduce's slot set
        for block in range(group, blocks, groups):
            slot = step % stages if cute.const_expr(stages > 0) else 0
            if cute.const_expr(stages > 0):
                _stage_block(mX, mDY, sX, sDY, block + (stages - 1) * groups, (step + stages - 1) % stages, blocks,
                             cfg, lane, row_in_cta)
                cute.arch.cp_async_commit_group()
            row = block * cfg.rows + row_in_cta
            rstd, mean = rstd_next, mean_next
            following = clamp_row(row + groups * cfg.rows, rows)
            rstd_next = mRstd[following]
            if cute.const_expr(layer):
                mean_next = mMean[following]
            if cute.const_expr(stages > 0):
                cute.arch.cp_async_wait_group(stages - 1)   # this block's copies (and older) have landed
            # Two passes over the row (the second reads it again rather than keep x, dy and w live
            # across the reduction): the sums, then dx, dw and db.
            sums = _row_sums(mX, mDY, mW, rings, row, slot, mean, rstd, cfg, layer, lane, row_in_cta)
            c1, c2 = _means(row_reduce(sums, "sum", cfg, lane, row_in_cta, step, peers), rstd, cfg)
            if cute.const_expr(cfg.threads_per_row <= 32):
                cute.arch.sync_warp()   # (shuffles alone would let the compiler keep the first pass's loads)
            _finish_row(mX, mDY, mW, rings, grads, row, rows, slot, mean, rstd, c1, c2, cfg, layer, lane, row_in_cta)
            step = step + 1
    if cute.const_expr(stages > 0):
        cute.arch.cp_async_wait_group(0)
    if cute.const_expr(cfg.rows == 1):
        if cute.const_expr(mDWPartial is not None):
            store_row(mDWPartial, group, lane, cfg, dw.load())
        if cute.const_expr(mDBPartial is not None):
            store_row(mDBPartial, group, lane, cfg, db.load())
    else:
        # One partial row per CTA: its rows' sums added in shared memory (over the ring, done
        # with), row after row in a fixed order, so the result does not vary between runs.
        cute.arch.sync_threads()
        if cute.const_expr(mDWPartial is not None):
            _sum_rows(mDWPartial, sX, dw.load(), group, cfg, lane, row_in_cta)
        if cute.const_expr(mDBPartial is not None):
            _sum_rows(mDBPartial, sDY, db.load(), group, cfg, lane, row_in_cta)


def pipelined_backward(cfg, stages: int) -> bool:
    """Whether the backward walks rows over a cluster with each row's exchange pipelined
    (_walk_cluster_rows_backward): rows split over a cluster, with a ring of 3 blocks or more
    (the row being finished, the next one being summed, one landing)."""
    return cfg.cluster > 1 and stages >= 3


@cute.jit
def _walk_cluster_rows_backward(mX, mW, mDY, mRstd, mMean, rings, grads, cfg: Constexpr, stages: Constexpr, lane,
                                peers):
    """The backward's walk over rows split across a cluster (one row per cluster at a time,
    every groups-th one). A row's sums trade between the cluster's CTAs, a trip that waits for
    the slowest CTA; so each CTA sums and sends the next row before it receives this row's
    sums and writes its dx (sends one exchange ahead: four slot sets), its ring two rows ahead
    of the sums."""
    sX, sDY, _ = rings
    group, groups = cta_group(cfg)
    rows = mX.shape[0]
    layer = mMean is not None
    cute.arch.cp_async_wait_group(stages - 2)       # the first row has landed
    rstd, mean = mRstd[group], mMean[group] if cute.const_expr(layer) else 0.0
    following = clamp_row(group + groups, rows)
    rstd_next, mean_next = mRstd[following], mMean[following] if cute.const_expr(layer) else 0.0
    _send_sums(mX, mDY, mW, rings, group, 0, mean, cfg, layer, lane, peers, 0)
    step = 0                                        # rows done: the ring's slot, the exchanges' step
    for row in range(group, rows, groups):
        _stage_block(mX, mDY, sX, sDY, row + (stages - 1) * groups, (step + stages - 1) % stages, rows, cfg, lane, 0)
        cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(stages - 2)   # the next row (and older) have landed
        if row + groups < rows:
            _send_sums(mX, mDY, mW, rings, row + groups, (step + 1) % stages, mean_next, cfg, layer, lane, peers,
                       step + 1)
        sums = cluster_reduce_received(2 if cute.const_expr(layer) else 1, "sum", cfg, 0, step, peers)
        c1, c2 = _means(sums, rstd, cfg)
        _finish_row(mX, mDY, mW, rings, grads, row, rows, step % stages, mean, rstd, c1, c2, cfg, layer, lane, 0)
        rstd, mean = rstd_next, mean_next
        following = clamp_row(row + 2 * groups, rows)
        rstd_next = mRstd[following]
        if cute.const_expr(layer):
            mean_next = mMean[following]
        step = step + 1


@cute.jit
def _send_sums(mX, mDY, mW, rings, row, slot, mean, cfg: Constexpr, layer: Constexpr, lane, peers, step):
    """This CTA's part of row `row`'s sums (_row_sums, from ring slot `slot`), folded over its
    threads and sent to every CTA of the cluster (exchange `step`)."""
    sums = _row_sums(mX, mDY, mW, rings, row, slot, mean, None, cfg, layer, lane, 0)
    cluster_send(row_reduce(sums, "sum", cfg, lane, 0, step, peers, cluster_wide=False), cfg, lane, 0, step, peers)


@cute.jit
def _row_sums(mX, mDY, mW, rings, row, slot, mean, rstd, cfg: Constexpr, layer: Constexpr, lane, row_in_cta):
    """This thread's sums of row `row`: (g * (x - mean),) and, for LayerNorm, g's too (both
    take one trip through shared memory). rstd is applied once to the row's sum (_means),
    and each product is an fma: the instruction issue, not memory, bounds the backward
    (LayerNorm's at 32768 bf16 columns issued in 0.68 of its cycles, 33 instructions an
    element in PTX, H200). Half-size CTAs (tight_schedule) keep the sums of g * x_hat."""
    sX, sDY, sW = rings
    x, _, g = _backward_values(mX, mDY, mW, sX, sDY, sW, row, slot, cfg, lane, row_in_cta)
    if cute.const_expr(tight_schedule(cfg)):
        x_hat = (x - mean) * rstd
        if cute.const_expr(layer):
            return (fold(g * x_hat, "sum"), fold(g, "sum"))
        return (fold(g * x_hat, "sum"),)
    if cute.const_expr(layer):
        return (fold_products(g, x - mean), fold(g, "sum"))
    return (fold_products(g, x),)


def _means(sums: tuple, rstd, cfg) -> tuple:
    """(mean of g * x_hat, mean of g or 0.0) from a row's sums (_row_sums)."""
    scale = 1.0 / cfg.n if tight_schedule(cfg) else rstd * (1.0 / cfg.n)
    return sums[0] * scale, sums[1] * (1.0 / cfg.n) if len(sums) > 1 else 0.0


def tight_schedule(cfg: RowConfig) -> bool:
    """Whether the backward is backward_config's half-size CTA (256 threads, no cluster), whose
    225-231 registers leave one CTA of 8 warps per SM: its speed hangs on ptxas's instruction
    schedule, which the fewer instructions of the fma forms (_row_sums, _finish_row) made
    worse: LayerNorm's at 2048-8192 bf16 columns went from 0.96-0.99 to 0.82 of copy on an
    H100 and from 0.93-0.95 to 0.64 on an H200 (with two CTAs per SM at 128 registers, 0.90
    and 0.94-0.96). These keep the arithmetic they were tuned with (PTX as before)."""
    return cfg.threads <= MAX_THREADS // 2 and cfg.cluster == 1


@cute.jit
def _finish_row(mX, mDY, mW, rings, grads, row, rows, slot, mean, rstd, c1, c2, cfg: Constexpr, layer: Constexpr,
                lane, row_in_cta):
    """The second pass over row `row` (read again, not kept live through the reduction): dx
    stored, dy * x_hat and dy added to the dw and db partials (`grads`); `layer`: LayerNorm's."""
    sX, sDY, sW = rings
    mDX, dw, db, want_dw, want_db = grads
    x, dy, g = _backward_values(mX, mDY, mW, sX, sDY, sW, row, slot, cfg, lane, row_in_cta)
    if cute.const_expr(cfg.cluster > 1 and layer):
        # LayerNorm's over a cluster: one fma (bf16, H200, fraction of copy at 32768 / 65536 /
        # 131072: 0.842 / 0.851 / 0.809 -> 0.846 / 0.859 / 0.816; Float32 within noise)
        x_hat = cute.math.fma(x, rstd, -mean * rstd)
    else:
        x_hat = (x - mean) * rstd
    if row < rows:
        if cute.const_expr(cfg.cluster > 1):
            # rstd * (g - c2 - x_hat * c1) as two fmas (0.84 -> 0.86 of copy at 65536 bf16
            # columns, H200); a CTA's whole row (16384) spilled so at 128 registers
            store_row(mDX, row, lane, cfg, cute.math.fma(cute.math.fma(x_hat, -c1, g), rstd, -c2 * rstd))
        else:
            store_row(mDX, row, lane, cfg, (g - c2 - x_hat * c1) * rstd)
        if cute.const_expr(want_dw):
            dw.store(dw.load() + dy * x_hat if cute.const_expr(tight_schedule(cfg)) else
                     cute.math.fma(dy, x_hat, dw.load()))
        if cute.const_expr(want_db):
            db.store(db.load() + dy)


@cute.jit
def _sum_rows(partial, buffer, values, group, cfg: Constexpr, lane, row_in_cta):
    """Row `group` of `partial`: `values` (each thread's, a row's worth per cfg row) summed over
    the CTA's rows through `buffer` (shared memory of at least cfg.part Float32)."""
    sums = stage_vectors(cute.make_tensor(cute.recast_ptr(buffer.iterator, cute.Float32),
                                          cute.make_layout(cfg.part)), lane, cfg)
    for r in cute.range_constexpr(cfg.rows):
        if row_in_cta == r:
            sums.store(values if cute.const_expr(r == 0) else sums.load() + values)
        cute.arch.sync_threads()
    if row_in_cta == 0:
        store_row(partial, group, lane, cfg, sums.load())


@cute.jit
def _open_ring(smem, mA, mB, stages: Constexpr, group, groups, blocks, cfg: Constexpr, lane, row_in_cta):
    """(sA, sB): rings of `stages` blocks of mA's (and mB's, unless None) rows of this CTA's
    columns, allocated from `smem`, their columns past N zeroed, the copies of this group's
    first `stages - 1` blocks started (one cp.async group per block)."""
    ring = cute.make_layout((cfg.part, cfg.rows, stages))
    sA = smem.allocate_tensor(mA.element_type, ring, 16)
    sB = smem.allocate_tensor(mB.element_type, ring, 16) if cute.const_expr(mB is not None) else None
    for s in cute.range_constexpr(stages):
        _clear_slot(sA, s, cfg, lane, row_in_cta)
        _clear_slot(sB, s, cfg, lane, row_in_cta)
    for s in cute.range_constexpr(stages - 1):
        _stage_block(mA, mB, sA, sB, group + s * groups, s, blocks, cfg, lane, row_in_cta)
        cute.arch.cp_async_commit_group()
    return sA, sB


@cute.jit
def _stage_block(mA, mB, sA, sB, block, slot, blocks, cfg: Constexpr, lane, row_in_cta):
    """Starts the copies of block `block`'s rows of mA (and mB, unless None) into ring slot
    `slot` of sA (sB): nothing past the last block; rows past the end read the last row."""
    if block < blocks:
        row = clamp_row(block * cfg.rows + row_in_cta, mA.shape[0])
        stage_row(mA, row, lane, cfg, stage_vectors(sA[(None, row_in_cta, slot)], lane, cfg))
        if cute.const_expr(mB is not None):
            stage_row(mB, row, lane, cfg, stage_vectors(sB[(None, row_in_cta, slot)], lane, cfg))


@cute.jit
def _clear_slot(ring, slot, cfg: Constexpr, lane, row_in_cta):
    """Zeros this thread's vectors past N in ring slot `slot` (a None ring: nothing)."""
    if cute.const_expr(ring is not None):
        clear_staged(stage_vectors(ring[(None, row_in_cta, slot)], lane, cfg), lane, cfg)


@cute.jit
def _slot_values(ring, slot, cfg: Constexpr, lane, row_in_cta):
    """This thread's values in ring slot `slot` as Float32 (None for a None ring)."""
    if cute.const_expr(ring is None):
        return None
    return stage_vectors(ring[(None, row_in_cta, slot)], lane, cfg).load().to(cute.Float32)


@cute.jit
def _backward_values(mX, mDY, mW, sX, sDY, sW, row, slot, cfg: Constexpr, lane, row_in_cta):
    """(x, dy, g = dy * w) of this thread's values of `row`, in Float32: from its ring slot in
    shared memory, or (no ring) from global memory."""
    if cute.const_expr(sX is not None):
        x, dy = _slot_values(sX, slot, cfg, lane, row_in_cta), _slot_values(sDY, slot, cfg, lane, row_in_cta)
    else:
        src = clamp_row(row, mX.shape[0])
        x, dy = load_row(mX, src, lane, cfg), load_row(mDY, src, lane, cfg)
    g = dy * _parameter(mW, sW, cfg, lane) if cute.const_expr(mW is not None) else dy
    return x, dy, g


@cute.jit
def _forward(x, res, w, b, y, res_out, rstd, mean, eps: cute.Float32, groups: cute.Int32, cfg: Constexpr,
             rms: Constexpr, walk: Constexpr, ctas: Constexpr = None):
    """`walk`: forward_plan's blocks of rows per CTA (cluster); `groups`: a pipelined_forward's
    persistent grid (row_reduce.persistent_groups), unused by the others; `ctas`: the CTAs per SM
    an unwalked forward asks ptxas to fit (forward_shape's; None: no bound)."""
    grid = launch_grid(x.shape[0], cfg, max(walk, 1))
    if cute.const_expr(pipelined_forward(cfg, walk, x.element_type.width, rms, res is not None)):
        grid = (groups * cfg.cluster, 1, 1)
    _forward_kernel(x, res, w, b, y, res_out, rstd, mean, eps, cfg, rms, walk).launch(
        grid=grid, block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg),
        min_blocks_per_mp=3 if cute.const_expr(walk == DIRECT) else walking_ctas(cfg, walk) or ctas,
        accepted_spill_bytes=UNWALKED_SPILL if cute.const_expr(ctas) else 0)


def walking_ctas(cfg: RowConfig, walk: int):
    """CTAs per SM a walking forward of 256 threads or fewer asks ptxas to fit (None: no bound):
    the next row fetched ahead beside this one took LayerNorm's at 16384 bf16 columns to 150
    registers, one CTA per SM (0.896-0.900 of copy on an H200); bounded, 127 and no spills, two."""
    return 2 if walk > 1 and cfg.threads <= 256 else None


@cute.jit
def _backward(x, w, dy, rstd, mean, dx, dw_partial, db_partial, dw, db, groups: cute.Int32, cfg: Constexpr):
    """dx, and dw and db (None: not wanted) through `groups` partial rows."""
    stages, smem = backward_ring(cfg, *(0 if t is None else t.element_type.width // 8 for t in (x, dy, w)))
    _backward_kernel(x, w, dy, rstd, mean, dx, dw_partial, db_partial, cfg, stages).launch(
        grid=(groups * cfg.cluster, 1, 1), block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg), smem=smem,
        min_blocks_per_mp=paired_ctas(cfg, mean is not None))
    if cute.const_expr(dw is not None or db is not None):
        launch_sum_partials(dw_partial, db_partial, dw, db, groups)


def paired_ctas(cfg: RowConfig, layer: bool) -> int | None:
    """CTAs per SM LayerNorm's backward over pairs of 256-thread CTAs (backward_config's, on fast
    memory) asks ptxas to fit (None: no bound): two where each thread holds at most 3 vectors of
    x and of dy (12288 columns). Free, ptxas took 152-231 registers, one CTA per SM. bf16 fraction
    of copy, H200 (2026-11-27), free -> two: 10000 / 12288 0.75 / 0.83 -> 0.80 / 0.88; at 16384
    0.87 -> 0.88, at 14000 (4 vectors, 80 bytes spilled) 0.83 -> 0.62; RMSNorm's lost (12288 /
    16384: 0.96 / 0.95 -> 0.92 / 0.92)."""
    return 2 if layer and cfg.threads == MAX_THREADS // 2 and cfg.cluster == 2 and cfg.vectors <= 3 else None


# -- host entries ----------------------------------------------------------------------------------

def _rows(t: torch.Tensor | None, n: int, name: str) -> torch.Tensor | None:
    if t is None:
        return None
    if t.shape[-1] != n:
        raise ValueError(f"{name} has {t.shape[-1]} columns where the input has {n}")
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _vector(t: torch.Tensor | None, n: int, name: str) -> torch.Tensor | None:
    if t is None:
        return None
    if t.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
    return t.contiguous()


def _config(n: int, tensors, max_values: int, max_cluster: int = MAX_CLUSTER) -> object:
    present = [t for t in tensors if t is not None]
    size = max(t.element_size() for t in present)
    cfg = row_config(n, size, max_values=max_values, max_cluster=max_cluster)
    for t in present:
        c = row_config(n, size, t.stride(0) if t.dim() == 2 else 0, t.data_ptr(), max_values, max_cluster)
        cfg = c if c.vec < cfg.vec else cfg
    return cfg


def forward_config(n: int, tensors, values: int) -> RowConfig:
    """The forward's CTA shape for `values` per thread (forward_plan): _config's, or where that
    leaves some threads of a row a vector past N (padding: 128 threads x 3 vectors for 2560
    columns) and half or a quarter the threads per row cover it exactly with more values each,
    that, for 16-bit rows (LayerNorm over bf16 rows of 2560 / 5120 columns: 0.88 / 0.82 -> 0.96 /
    0.96 of copy on an H200, 0.97 / 0.98 -> 0.97 / 0.99 on an H100; Float32 rows not measured;
    the backward kept its shape, where more values per thread measured 0.75 -> 0.55), up to twice
    `values` a thread (12800 columns in 64 threads of 200 values, 255 registers: LayerNorm with
    weight and bias / RMSNorm with a weight 0.76 / 0.89 of copy, 0.95 / 0.99 in 256 threads, H200;
    H100 0.94 / 0.97 -> 1.00 / 1.01; at 13312, 104 values, 0.97 against 0.94; 2026-11-27)."""
    cfg = _config(n, tensors, values)
    sixteen_bit = all(t.element_size() == 2 for t in tensors if t is not None)
    if sixteen_bit and cfg.padding and cfg.cluster == 1:
        for per_row in (cfg.threads_per_row // 2, cfg.threads_per_row // 4):
            exact = replace(cfg, threads_per_row=per_row, threads=max(128, per_row))
            if per_row >= 8 and exact.padding == 0 and exact.vectors * exact.vec <= 2 * values:
                return exact
    return cfg


def forward_shape(args: tuple, tensors, rms: bool, device: int, options=None) -> tuple[RowConfig, int, int | None]:
    """(the CTA shape, forward_plan's walk, unwalked_ctas's bound) of the forward over `tensors` (x, residual, weight,
    bias, y, residual_out; None where absent) whose kernel arguments are `args` (eps last): where
    a cluster of 8 would hold more values a thread than planned (LayerNorm over 16-bit rows past
    131072 columns: 64 for 32; Float32 rows past 131072) and ptxas spills it, 16 CTAs holding
    the planned number (row_reduce.unless_it_spills)."""
    n, size = tensors[0].shape[-1], max(t.element_size() for t in tensors if t is not None)
    direct = direct_shape(n, tensors, rms)
    if direct is not None:
        return direct, DIRECT, None
    fast, residual, params = fast_memory(device), tensors[1] is not None, sum(t is not None for t in tensors[2:4])
    values, walk = forward_plan(n, size, rms, residual, fast, params)
    cfg = forward_config(n, tensors, values)
    wider = None
    if cfg.cluster == MAX_CLUSTER and cfg.vectors * cfg.vec > values:
        wider = _config(n, tensors, values, NON_PORTABLE_CLUSTER)
    cfg = unless_it_spills(lambda c: _forward.compile(*args, 1, c, rms, walk, options=options), cfg, wider)
    ctas = unwalked_ctas(cfg, walk, size, residual, params, fast)
    if ctas and spills(lambda: _forward.compile(*args, 1, cfg, rms, walk, ctas, options=options), UNWALKED_SPILL):
        ctas = None
    return cfg, walk, ctas


# Bytes a thread the unwalked forward bounded by unwalked_ctas may spill (accepted_spill_bytes;
# forward_shape drops a bound past it): LayerNorm's with weight and bias at 14000 spills 24.
UNWALKED_SPILL = 32


def unwalked_ctas(cfg: RowConfig, walk: int, size: int, residual: bool, params: int, fast: bool) -> int | None:
    """CTAs per SM the unwalked forward over 16-bit rows past 8192 columns, one 256-thread CTA a
    row, asks ptxas to fit (None: no bound): three where each thread holds at most 7 vectors
    (14336 columns), on fast memory; elsewhere LayerNorm's with weight and bias up to 6 (12288).
    Free, ptxas took 77-125 registers, two CTAs per SM. forward_shape drops a bound that makes
    ptxas spill past UNWALKED_SPILL (LayerNorm's with weight and bias at 14000 spills 24 bytes,
    accepted). bf16 fraction of copy, the shapes before (LayerNorm with weight and bias on fast
    memory walked 4 blocks) -> this (2026-11-27):

    | card | op | 10000 | 12288 | 14000 |
    |---|---|---|---|---|
    | H200 | LayerNorm, weight and bias | 0.85 -> 0.95 | 0.94 -> 0.96 | 0.89 -> 0.93-0.95 (24 bytes spilled) |
    | H200 | LayerNorm, weight | 0.99 -> 0.99 | 0.87 -> 0.97 | 0.94 -> 0.99 |
    | H200 | LayerNorm | 1.01 -> 1.01 | (direct_shape) | 0.98 -> 0.99 |
    | H200 | RMSNorm, weight | 1.01 -> 1.01 | (direct_shape) | 0.95 -> 0.98 |
    | H200 | RMSNorm | 1.01 -> 1.01 | 0.97 -> 0.97 | 1.00 -> 0.99 |
    | H100 | LayerNorm, weight and bias | 0.95 -> 1.00 | 0.98 -> 0.99 | (0.99 -> 0.98) |

    On the H100 the others lost 0.5-1.5 % bounded (LayerNorm with a weight at 12288 1.00 -> 0.99);
    at 16384 (8 vectors) RMSNorm's lost on both (H200 0.98 -> 0.95); bounded to four, 10000
    gained more on the H200 (LayerNorm with weight and bias 0.98) and every wider row lost."""
    if walk != 1 or size != 2 or residual or cfg.cluster != 1 or cfg.threads != 256 or cfg.n <= 8192:
        return None
    return 3 if cfg.vectors <= (7 if fast else 6 if params == 2 else 0) else None


def direct_shape(n: int, tensors, rms: bool) -> RowConfig | None:
    """quack's shape (row_reduce.direct_config) for the forward over 16-bit rows split over a
    cluster (16384 to 131072 columns) without a residual, its weight and bias 16-bit too
    (_direct_row), LayerNorm's where no thread holds padding and its parameters times the
    cluster's CTAs are at most 4; None elsewhere. RMSNorm, bf16 fraction of copy at 32768 /
    65536 / 131072 columns (2026-11-26), the shapes before it (forward_plan's) -> this: H200
    0.93 / 0.93 / 0.90 -> 0.97 / 0.96 / 0.96 (quack 0.2.2's 0.97 / 0.97 / 0.96), H100 0.98 /
    0.95 / 0.94 -> 0.99 / 0.99 / 0.98. LayerNorm, bf16, H200 (2026-11-27), without parameters:
    0.93 / 0.93 / 0.93 -> 0.97 / 0.97 / 0.97; with a weight: 0.93 / 0.91 / 0.91 -> 0.97 / 0.95
    / 0.92; with weight and bias: 0.92 / 0.90 / 0.90 -> 0.95 / 0.89 / 0.85 (fp16 0.92 / 0.90 /
    0.91 -> 0.95 / 0.92 / 0.88). Every row reads its weight and bias again (from L2), and the
    normalization after the exchange grows with them, where the walks hold them for many rows;
    a cluster's CTAs wait for the slowest at the exchange.
    Rows one 256-thread CTA holds, past 8192 columns (row_reduce.direct_config's `short`), go
    over two CTAs for RMSNorm with a weight and LayerNorm without parameters. bf16, H200
    (2026-11-27), forward_plan's shape -> this at 12288 / 16384: RMSNorm with a weight 0.93 /
    0.96 -> 0.99 / 0.98, LayerNorm 0.93 / 0.97 -> 0.98 / 0.98. RMSNorm without one measured
    0.97 / 0.98 -> 0.98 / 0.97 and keeps its plan; LayerNorm with weight and bias lost (0.83 /
    0.93 -> 0.70 / 0.80: forward_plan's walks stage them once per CTA)."""
    if tensors[1] is not None or any(t.element_size() != 2 for t in tensors if t is not None):
        return None
    parameters = sum(t is not None for t in tensors[2:4])
    short = parameters == 1 if rms else parameters == 0          # (as measured: RMSNorm's with a weight)
    cfg = direct_config(n, forward_config(n, tensors, FORWARD_VALUES).vec, short)
    if cfg is None or rms:
        return cfg
    return None if cfg.padding or parameters * cfg.cluster > 4 else cfg


def backward_config(n: int, tensors, layer: bool = False, fast: bool = False) -> RowConfig:
    """The backward's CTA shape: MAX_THREADS threads (several rows per CTA for short rows),
    each holding BACKWARD_BYTES of each staged row, half that at up to 1024 columns (two warps
    per row beat one: LayerNorm 0.90 of copy against 0.87 at 1024) unless only the full one
    covers the row without padding (768 bf16 columns: 0.56 of copy with 64 threads per row,
    one vector in two past N, H200), and where a full one would need a cluster of 4 (one of 8
    instead: 0.89 / 0.86 against 0.78 / 0.76 at 65536; H100, benchmarks/RESULTS.md). LayerNorm's
    over Float32 rows of 1024 keeps the full one (64 threads a row, four rows a CTA: 0.84 -> 0.99
    of copy on an H200; RMSNorm's measured the same either way, 0.99 / 0.98).
    Half the threads, and backward_ring half the shared memory, where that measured faster on
    both GPUs (RMSNorm's at 3072 and 6144 16-bit columns also with twice the values per thread;
    below): LayerNorm's (`layer`) over 16-bit rows of 2048, 4096 and 8192 columns (bf16
    fraction of copy, H200 / H100: 0.86 / 0.90 -> 0.92 / 0.95 at 2048, 0.89 / 0.93 -> 0.92 /
    0.99 at 4096, 0.89 / 0.95 -> 0.92 / 0.98 at 8192; RMSNorm's lost 1-2 % so): 512 threads cap
    ptxas at 128 registers, 256 let it take 229-231, one CTA per SM; and both norms over Float32
    rows of 768 to 1536 columns, where 82-122 registers let two such CTAs share an SM (RMSNorm /
    LayerNorm at 1024: H200 0.80 / 0.74 -> 0.98 / 0.83, H100 0.90 / 0.87 -> 0.95 / 0.93; at 768
    with the unpadded shape: H100 0.84 / 0.82 -> 0.97 / 0.97; shorter rows lost 1-5 %). (At
    3072 16-bit columns LayerNorm's 256-thread kernel takes 168 registers and measured 0.94 ->
    0.73 on the H100: the rule keeps to the powers of two measured.)
    On fast memory (`fast`: an H200) 16-bit rows past 8192 columns up to 16384 go over clusters
    of two 256-thread CTAs, pipelined (LayerNorm's; RMSNorm's over unpadded rows). bf16
    fraction of copy, 512 threads a row -> this (2026-11-27): LayerNorm 10000 / 12288 / 14000 /
    16384 0.69 / 0.75 / 0.66 / 0.87 -> 0.76 / 0.83 / 0.85 / 0.87, RMSNorm 12288 / 16384 0.91 /
    0.93 -> 0.96 / 0.96 (at 10000 0.99 -> 0.93, 14000 0.89 -> 0.92; 128-thread CTAs lost
    everywhere). LayerNorm's in 8-byte vectors, unbounded (paired_ctas), where they pad the row
    less (10000 columns: 10240 held, not 12288) or 16-byte ones pad it at four a thread: 0.81 ->
    0.94 at 10000, 0.83 -> 0.87 at 14000, 0.81 -> 0.87 at 15000, 0.88 -> 0.91 at 16000; they lost
    where 16-byte ones hold three unpadded or equally padded (12288 0.87 -> 0.83, 11264 0.89 ->
    0.82; 11000 0.78 -> 0.79; H200, 2026-11-27). The H100 was not measured."""
    size = max(t.element_size() for t in tensors if t is not None)
    cfg = _config(n, tensors, BACKWARD_BYTES // size)
    if fast and size == 2 and 8192 < n <= 16384 and cfg.vec == 8:
        pair = RowConfig(n, 8, MAX_THREADS // 2, MAX_THREADS // 2, 2)
        narrow = replace(pair, vec=4)
        if layer and (narrow.padding < pair.padding or (pair.padding and pair.vectors > 3)):
            return narrow
        if layer or not pair.padding:
            return pair
    if (n <= 1024 and not (layer and size == 4 and n == 1024)) or cfg.cluster == 4:
        halved = _config(n, tensors, BACKWARD_BYTES // 2 // size)
        cfg = cfg if halved.padding and not cfg.padding and cfg.cluster == 1 else halved
    if layer and tensors[0].element_size() == 2 and cfg.padding and cfg.cluster == 1 and cfg.vec > 1:
        # LayerNorm's over 16-bit rows where its vectors pad the row and vectors half as wide
        # cover it exactly (2560 / 5120 bf16 columns: 0.76 / 0.75 -> 0.96 / 0.92 of copy on an
        # H200; RMSNorm's did not gain, 0.98 -> 0.95 at 2560, nor unpadded rows, 3072: 0.83 ->
        # 0.69; Float32 rows not measured).
        narrow = replace(cfg, vec=cfg.vec // 2)
        if narrow.padding == 0 and narrow.vectors * narrow.vec <= BACKWARD_BYTES // size:
            cfg = narrow
    x_size = tensors[0].element_size()
    if not layer and x_size == 2 and n in (3072, 6144) and cfg.cluster == 1 and cfg.vec * size == 16:
        # RMSNorm's over 16-bit rows of 3 x 2^k columns: twice the values per thread (48, six
        # 16-byte vectors) in 256-thread CTAs (bf16 fraction of copy at 3072 / 6144, H200: 0.90 /
        # 0.90 -> 0.95 / 0.94; H100: 0.93 / 0.92 -> 0.93 / 0.92). At powers of two the same
        # doubling means 64 values, and lost on the H200 (0.94 -> 0.80-0.90); LayerNorm's
        # (its dbias accumulators too) did not gain at 3072 / 6144 on either GPU.
        wide = _config(n, tensors, 2 * BACKWARD_BYTES // size)
        if wide.padding == 0 and wide.cluster == 1 and wide.threads_per_row <= MAX_THREADS // 2:
            return replace(wide, threads=MAX_THREADS // 2)
    half_ctas = (layer and x_size == 2 and n in (2048, 4096, 8192)) or (x_size == 4 and 768 <= n <= 1536)
    half_ctas = half_ctas and cfg.cluster == 1 and cfg.threads_per_row <= MAX_THREADS // 2
    cfg = replace(cfg, threads=MAX_THREADS // 2 if half_ctas else MAX_THREADS)
    sizes = (size, size, size)                      # x, dy and the weight, at the widest
    if cfg.cluster == MAX_CLUSTER and not pipelined_backward(cfg, backward_ring(cfg, *sizes)[0]):
        # A cluster of 8 whose ring holds fewer than 3 blocks (Float32 rows of 131072 columns:
        # one, 192 KB with the weight) loads nothing while it sums a row (H200 LayerNorm / RMSNorm
        # 0.61 / 0.80 of copy, H100 0.76 / 0.87; LayerNorm's also spilled 64 bytes). Over 16 CTAs
        # each holds half as much: three blocks, pipelined, no spill. Float32 rows past 131072
        # still hold fewer than three, but half the registers a thread (spills 752-1548 -> 0-64 bytes).
        return replace(cfg, cluster=NON_PORTABLE_CLUSTER)
    if not layer and x_size == 2 and cfg.cluster == MAX_CLUSTER and cfg.vectors * cfg.vec == BACKWARD_BYTES // size \
            and cfg.padding == 0:
        # RMSNorm's over 16-bit rows that a cluster of 8 covers exactly at its full BACKWARD_BYTES a
        # thread (131072 columns): 16 CTAs holding half each, though 8's ring holds three blocks.
        # bf16 fraction of copy, 8 -> 16: H200 0.854 / 0.856 / 0.860 -> 0.900 / 0.921 / 0.928 (three
        # runs), H100 0.936 / 0.937 -> 0.944 / 0.950. Padded rows lost on the H200 (100000 / 120000:
        # 0.795 / 0.886 -> 0.71 / 0.84; the H100 gained, 0.95 -> 0.98), and LayerNorm's lost at
        # 131072 on both (H200 0.823 -> 0.741, H100 0.926 -> 0.911).
        return replace(cfg, cluster=NON_PORTABLE_CLUSTER)
    return cfg


def backward_ring(cfg, x_size: int, dy_size: int, w_size: int) -> tuple[int, int]:
    """(blocks of rows the backward's shared-memory ring holds, the bytes of dynamic shared memory
    it and the staged weight take), from the operands' element sizes (w_size 0: no weight). No
    ring (0) where one block does not fit."""
    block = cfg.rows * cfg.part * (x_size + dy_size)
    budget = BACKWARD_SMEM * cfg.threads // MAX_THREADS        # the same per thread at any CTA size
    stages = min(BACKWARD_STAGES, (budget - cfg.part * w_size) // block)
    if stages == 0:
        return 0, 0
    def padded(nbytes):
        return -(-nbytes // 16) * 16
    return stages, padded(stages * cfg.rows * cfg.part * x_size) + padded(stages * cfg.rows * cfg.part * dy_size) + \
        padded(cfg.part * w_size)


def norm_forward(x: torch.Tensor, weight=None, bias=None, residual=None, eps: float = 1e-6, rms: bool = True):
    """(y, residual_out or None, rstd, mean or None): RMSNorm (rms) or LayerNorm of x (+ residual)
    over the last dim; y in x's dtype, residual_out in the residual's, statistics Float32."""
    n = x.shape[-1]
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual has shape {tuple(residual.shape)} where x has {tuple(x.shape)}")
    x2, res2 = _rows(x, n, "x"), _rows(residual, n, "residual")
    w, b = _vector(weight, n, "weight"), _vector(bias, n, "bias")
    m = x2.shape[0]
    y = torch.empty_like(x2)
    res_out = None if residual is None else torch.empty_like(res2)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    mean = None if rms else torch.empty(m, dtype=torch.float32, device=x.device)
    if m:
        args = (dynamic_rows(x2), dynamic_rows(res2), w, b, dynamic_rows(y), dynamic_rows(res_out), dynamic_rows(rstd),
                dynamic_rows(mean), eps)
        cfg, walk, ctas = forward_shape(args, (x2, res2, w, b, y, res_out), rms, x.device.index)
        groups = 1                                  # (a grid of forward_plan's walks: not asked)
        if pipelined_forward(cfg, walk, 8 * x2.element_size(), rms, residual is not None):
            groups = walking_groups(_forward, args, (cfg, rms, walk, ctas), m, cfg, x.device.index)
        _forward(*args, groups, cfg, rms, walk, ctas)
    shape = x.shape
    return y.view(shape), None if res_out is None else res_out.view(shape), rstd, mean


def norm_backward(x: torch.Tensor, weight, dy: torch.Tensor, rstd: torch.Tensor, mean=None,
                  weight_grad: bool = True, bias_grad: bool = False):
    """(dx, dweight or None, dbias or None) of RMSNorm (mean None) or LayerNorm, from the
    forward's input (after the residual add), weight and statistics."""
    n = x.shape[-1]
    if dy.shape != x.shape or rstd.numel() != x.numel() // max(n, 1):
        raise ValueError(f"norm_backward: dy {tuple(dy.shape)} and rstd {tuple(rstd.shape)} do not match x "
                         f"{tuple(x.shape)}")
    x2, dy2 = _rows(x, n, "x"), _rows(dy, n, "dy")
    w = _vector(weight, n, "weight")
    m = x2.shape[0]
    dx = torch.empty_like(x2)
    cfg = backward_config(n, (x2, dy2, w, dx), mean is not None, fast_memory(x.device.index))
    partial = (lambda rows: torch.empty(rows, n, dtype=torch.float32, device=x.device))
    want_dw, want_db = weight_grad and weight is not None, bias_grad
    param = weight.dtype if weight is not None else x.dtype
    dw = torch.empty(n, dtype=param, device=x.device) if want_dw else None
    db = torch.empty(n, dtype=param, device=x.device) if want_db else None
    args = [dynamic_rows(x2), w, dynamic_rows(dy2), dynamic_rows(rstd), dynamic_rows(mean), dynamic_rows(dx),
            dynamic_rows(partial(1)) if want_dw else None, dynamic_rows(partial(1)) if want_db else None, dw, db]
    groups = 1
    if m:
        compiled = _backward.compile(*args, 1, cfg)
        sizes = tuple(0 if t is None else t.element_size() for t in (x2, dy2, w))
        groups = persistent_groups(m, cfg, resident_groups(compiled, cfg, x.device.index,
                                                           backward_ring(cfg, *sizes)[1]))
    dw_partial = partial(groups) if want_dw else None
    db_partial = partial(groups) if want_db else None
    if m:
        args[6:8] = [dynamic_rows(dw_partial), dynamic_rows(db_partial)]
        compiled(*args, groups, cfg)
    else:                       # no rows: zero gradients
        for t in (dw, db):
            if t is not None:
                t.zero_()
    return dx.view(x.shape), dw, db
