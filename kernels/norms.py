"""RMSNorm and LayerNorm over the last dimension, forward and backward, one pass over memory.

Forward (a thread's part of a row in registers, kernels/row_reduce.py), optionally after adding
a residual (the sum is written too: the next block's residual stream):

    RMSNorm:    rstd = rsqrt(mean(x^2) + eps);                    y = x * rstd * w
    LayerNorm:  mean = mean(x); rstd = rsqrt(mean((x - mean)^2) + eps);  y = (x - mean) * rstd * w + b

rstd (and mean) are saved per row in Float32 for the backward. LayerNorm's variance is the
two-pass form over registers (no cancellation), the columns past N that a thread holds masked
out of it; 16-bit rows without padding or a residual (in one CTA or over a cluster) take both
statistics in one trip, each thread's mean and squared deviations merged by Chan's formula
(one_trip_statistics). Short rows take one block of rows per CTA, and two or more CTAs per SM
overlap one's reductions with another's loads. Long rows (and rows with a residual) leave room
for one CTA per SM: there each CTA walks several blocks of rows and loads the next block's rows
into registers before the current block's reductions (forward_plan). Over a cluster, LayerNorm's
16-bit parts trade their (mean, M2) once per row, and that trip is pipelined behind the next
row's, on a grid of as many clusters as run at once (pipelined_forward). 16-bit rows past 16384
columns up to 131072 (RMSNorm's with a weight and LayerNorm's without parameters also at 12288
and 16384; LayerNorm's padded rows only where that measured faster), without a residual, go one
row per cluster of 256-thread CTAs instead, each warp's statistics sent straight to every CTA of
the cluster (quack's shape: norm_shapes.direct_shape, _direct_row; over padded rows each warp's
count of columns travels with its mean and M2).

Backward, with x_hat = (x - mean) * rstd and g = dy * w:

    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (RMSNorm: no mean(g) term)
    dw = sum over rows of dy * x_hat,   db = sum over rows of dy

The backward is a persistent grid (as many CTAs, or clusters, as run at once: the driver's
occupancy) whose CTAs walk blocks of rows. x and dy reach shared memory by cp.async, blocks
ahead of the math in a ring (each thread copies and reads its own vectors, so no barrier), and
each row is read from there twice, for its sums and then for dx: the loads stay in flight
through the reduction without holding registers. The weight is staged once per CTA. The
instruction issue, not memory, bounds it: a row's sums take g * (x - mean) by fma, rstd applied
once to the sum (except CTAs of 256 threads or fewer without a cluster, tight_schedule). Over a
cluster, a row's sums trade between the CTAs, a trip that waits for the slowest of them; each
CTA sums and sends the next row before it receives this row's and writes its dx
(_walk_cluster_rows_backward).

dw and db are reduced in two stages: each CTA sums its rows into Float32 partials in
registers, adds its rows' partials in shared memory (in a fixed order: deterministic) and
writes one partial row; the partial rows are then summed (kernels/column_sums.py's second
launch, a (CTAs x N) read, small next to the (M x N) tensors).

Rows too long for one CTA are split over a cluster of CTAs (kernels/row_reduce.py), up to 8 x
32768 columns: past forward_plan's values per thread (or direct_shape's) forward, past
BACKWARD_BYTES per thread per staged row backward, and backward also where norm_shapes measured
a split faster (PAIRED_LAYER_NORM, LAYER_NORM_CLUSTERS, RMSNorm's pairs on fast memory); up to
16 CTAs (NON_PORTABLE_CLUSTER) where 8 spill or lose. The limits are measured
(benchmarks/RESULTS.md): fewer, fuller CTAs win until registers spill (forward) or shared memory
runs out (backward). Which shape each row takes, and why, is kernels/norm_shapes.py.
"""

from __future__ import annotations

from dataclasses import replace

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .column_sums import launch_sum_partials
from .norm_shapes import (BOUNDED_SPILL, DIRECT, backward_config, backward_ctas, backward_ring, config_for,
                          direct_shape, forward_walk, one_trip_statistics, pipelined_backward,
                          pipelined_forward, unwalked_ctas, walking_ctas)
from .row_reduce import (MAX_CLUSTER, MAX_N, MAX_THREADS, NON_PORTABLE_CLUSTER, RowConfig, clamp_row, clear_staged,
                         cluster_merge_mean_m2, cluster_peers, cluster_reduce_received, cluster_send, column_mask,
                         cta_group, direct_exchange, direct_fold, dynamic_rows, fast_memory,
                         fetch_row, fold, fold_products, launch_cluster, launch_grid, load_row, merge_counted,
                         merge_mean_m2, open_direct, persistent_groups, resident_groups, row_mean_m2, row_reduce,
                         spills, stage_row, stage_vectors, start_staged_row, store_row, thread_place,
                         unless_it_spills, walk_cluster_rows, walking_groups, warp_mean_m2,
                         warp_mean_m2_counted)

# Rows of up to this many elements: one CTA's registers, times the largest cluster.
MAX_NORM_N = 32768 * MAX_CLUSTER


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
        if cute.const_expr(mRes is not None):
            raise ValueError("the direct shape takes rows without a residual (norm_shapes.direct_shape)")
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
    squares; LayerNorm's mean and M2 about it, merged by Chan's formula as row_mean_m2's, over
    padded rows with each warp's count of columns: row_reduce.warp_mean_m2_counted), then
    x read again from shared memory, so that it is not live through the exchange (RMSNorm: 80
    registers, three CTAs per SM, no spills; four CTAs at 64 registers spilled 20 bytes and
    read 0.93 of copy)."""
    rows = mX.shape[0]
    slots, bar = open_direct(cfg, 1 if cute.const_expr(rms) else (3 if cute.const_expr(cfg.padding) else 2))
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
    elif cute.const_expr(cfg.padding):
        # Each warp's count of columns travels with its (mean, M2) (some hold padding).
        direct_exchange(warp_mean_m2_counted(x, cfg, lane), cfg, slots, bar)
        mean, square_sum, _ = direct_fold(cfg, slots, 3, lambda a, b, count_a, count_b: merge_counted(a, b),
                                          ordered=True)
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
    0.91 -> 0.95 when 4096 walked). Float32 ones measured slower staged (0.88 -> 0.77 at 131072)."""
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
    element in PTX, H200). CTAs of up to 256 threads without a cluster (tight_schedule) keep the
    sums of g * x_hat."""
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
    """Whether the backward runs in CTAs of 256 threads or fewer without a cluster
    (backward_config's smaller CTAs). LayerNorm's over 16-bit rows of 2048-8192 columns in 256
    threads took 225-231 registers, one CTA of 8 warps per SM: its speed hangs on ptxas's instruction
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
    an unwalked forward asks ptxas to fit (forward_shape's; None: no bound, but three for quack's
    shape, whose 80 registers hold it there: _direct_row). The spills accepted are those
    forward_shape checks: a bound's, and LayerNorm's padded rows in quack's shape."""
    grid = launch_grid(x.shape[0], cfg, max(walk, 1))
    checked = ctas or walk == DIRECT and cfg.padding and not rms        # (spills forward_shape accepts)
    if cute.const_expr(pipelined_forward(cfg, walk, x.element_type.width, rms, res is not None)):
        grid = (groups * cfg.cluster, 1, 1)
    _forward_kernel(x, res, w, b, y, res_out, rstd, mean, eps, cfg, rms, walk).launch(
        grid=grid, block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg),
        min_blocks_per_mp=(ctas or 3) if cute.const_expr(walk == DIRECT) else walking_ctas(cfg, walk) or ctas,
        accepted_spill_bytes=BOUNDED_SPILL if cute.const_expr(checked) else 0)


@cute.jit
def _backward(x, w, dy, rstd, mean, dx, dw_partial, db_partial, dw, db, groups: cute.Int32, cfg: Constexpr):
    """dx, and dw and db (None: not wanted) through `groups` partial rows."""
    stages, smem = backward_ring(cfg, *(0 if t is None else t.element_type.width // 8 for t in (x, dy, w)))
    ctas = backward_ctas(cfg, mean is not None, x.element_type.width)
    _backward_kernel(x, w, dy, rstd, mean, dx, dw_partial, db_partial, cfg, stages).launch(
        grid=(groups * cfg.cluster, 1, 1), block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg), smem=smem,
        min_blocks_per_mp=ctas, accepted_spill_bytes=BOUNDED_SPILL if cute.const_expr(ctas) else 0)
    if cute.const_expr(dw is not None or db is not None):
        launch_sum_partials(dw_partial, db_partial, dw, db, groups)


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


def forward_shape(args: tuple, tensors, rms: bool, device: int, options=None) -> tuple[RowConfig, int, int | None]:
    """(the CTA shape, forward_plan's walk, unwalked_ctas's bound) of the forward over `tensors` (x,
    residual, weight, bias, y, residual_out; None where absent) whose kernel arguments are `args`
    (eps last): direct_shape's where it applies (walk DIRECT, no bound; LayerNorm's padded rows
    only where its kernel spills at most BOUNDED_SPILL bytes, accepted: 4 at 120000), else
    forward_walk's; where a cluster of 8 would hold more values a thread than planned (16-bit rows
    planned at 32 values past 131072 columns, LayerNorm's or RMSNorm's with a residual; Float32
    rows past 131072; up to 64 for 32) and ptxas spills it, 16 CTAs holding the planned number
    (row_reduce.unless_it_spills)."""
    n, size = tensors[0].shape[-1], max(t.element_size() for t in tensors if t is not None)
    fast, residual, params = fast_memory(device), tensors[1] is not None, sum(t is not None for t in tensors[2:4])
    direct = direct_shape(n, tensors, rms, fast=fast)
    if direct is not None and not (direct.padding and not rms and spills(
            lambda: _forward.compile(*args, 1, direct, rms, DIRECT, options=options), BOUNDED_SPILL)):
        return direct, DIRECT, None
    cfg, values, walk = forward_walk(n, tensors, rms, fast)
    wider = None
    if cfg.cluster == MAX_CLUSTER and cfg.vectors * cfg.vec > values:
        wider = config_for(n, tensors, values, NON_PORTABLE_CLUSTER)
    cfg = unless_it_spills(lambda c: _forward.compile(*args, 1, c, rms, walk, options=options), cfg, wider)
    ctas = unwalked_ctas(cfg, walk, size, residual, params, fast)
    if ctas and spills(lambda: _forward.compile(*args, 1, cfg, rms, walk, ctas, options=options), BOUNDED_SPILL):
        ctas = None
    return cfg, walk, ctas


def backward_shape(n: int, args: tuple, tensors, layer: bool, device: int, options=None) -> RowConfig:
    """The backward's CTA shape over `tensors` (x, weight, dy, dx) whose kernel arguments are `args`:
    backward_config's, but where LayerNorm's over clusters of 8 512-thread CTAs spills (16-bit rows
    with weight and bias gradients where 4 vectors a thread pad the row: 124 / 112 / 56 bytes at
    100000 / 120000 / 131000 columns, 128 registers), 16 CTAs of 256 threads holding as much each
    (168-231 registers, no spill) unless they spill too. bf16 fraction of copy, H200 (2026-11-27,
    two runs of three): 100000 / 120000 / 131000 0.51 / 0.50 / 0.58 -> 0.67-0.68 / 0.78-0.80 /
    0.79. Where it did not spill the 16 CTAs lost (with weight and bias at 70000 / 131072 0.69 /
    0.84 -> 0.62 / 0.81, with a weight at 100000 0.77 -> 0.68). fp16 rows spill the same (124
    bytes at 100000) and take it too, not timed; nor the H100, past runs that mixed up the spill
    counts (benchmarks/RESULTS.md, thirty-seventh).
    On slow memory (row_reduce.fast_memory: the H100) the 16 CTAs also take 16-bit rows with a
    weight that 8 leave unpadded, up to 131072 columns, where they do not spill. bf16 fraction
    of copy, H100 (2026-11-27), 8 -> 16: with weight and bias 65536 0.96 -> 0.97, 131072 0.91 ->
    0.93 (fp16 0.915 -> 0.945); with a weight 0.97 -> 0.99 and 0.95 -> 0.97. Padded rows lost
    there (with weight and bias 40000 0.79 -> 0.78, 70000 0.86 -> 0.82; with a weight 100000
    0.93 -> 0.88)."""
    fast = fast_memory(device)
    cfg = backward_config(n, tensors, layer, fast)
    if not (layer and cfg.cluster == MAX_CLUSTER and cfg.threads == MAX_THREADS):
        return cfg
    spread = replace(cfg, threads=MAX_THREADS // 2, threads_per_row=MAX_THREADS // 2, cluster=NON_PORTABLE_CLUSTER)
    weighted = tensors[0].element_size() == 2 and tensors[1] is not None
    unpadded = weighted and not fast and not cfg.padding and n <= 4 * MAX_N
    if (unpadded or spills(lambda: _backward.compile(*args, 1, cfg, options=options))) and not spills(
            lambda: _backward.compile(*args, 1, spread, options=options)):
        return spread
    return cfg


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
    partial = (lambda rows: torch.empty(rows, n, dtype=torch.float32, device=x.device))
    want_dw, want_db = weight_grad and weight is not None, bias_grad
    param = weight.dtype if weight is not None else x.dtype
    dw = torch.empty(n, dtype=param, device=x.device) if want_dw else None
    db = torch.empty(n, dtype=param, device=x.device) if want_db else None
    args = [dynamic_rows(x2), w, dynamic_rows(dy2), dynamic_rows(rstd), dynamic_rows(mean), dynamic_rows(dx),
            dynamic_rows(partial(1)) if want_dw else None, dynamic_rows(partial(1)) if want_db else None, dw, db]
    groups = 1
    if m:
        cfg = backward_shape(n, tuple(args), (x2, w, dy2, dx), mean is not None, x.device.index)
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
