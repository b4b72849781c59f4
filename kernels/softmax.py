"""Softmax and log-softmax over the last dimension, forward and backward, one pass over memory.

Forward: a thread holds its part of a row in registers (kernels/row_reduce.py), so the max and
the sum of exponentials are two reductions over registers, not two passes over memory:

    m = max(x);  e = exp(x - m);  s = sum(e)
    softmax = e / s;  log_softmax = x - (m + log(s))

(each exponential one fma and the hardware's ex2 about m log2(e) rounded once: row_chunks.exp_about).

Backward, from the forward's output y and the incoming gradient dy:

    softmax:      dx = y * (dy - sum(dy * y))
    log_softmax:  dx = dy - exp(y) * sum(dy)

Statistics are Float32 whatever the input type (bfloat16, float16, float32).

Rows past 16384 elements (values_per_thread), and softmax's unpadded 16-bit rows past 8192,
are split over a cluster of 2-8 CTAs (16 past 131072 where 8 would spill), up to REGISTER_N,
still one pass (kernels/row_reduce.py); the forward's CTAs trade their parts' max and sum of
exponentials once per row and combine them. The forward over 16-bit rows of up to 131072
columns in 16-byte vectors, and over Float32 rows of 65537-131072 columns, takes quack's shape
(direct_shape: 256-thread CTAs staged by cp.async, one exchange, three CTAs per SM). Where
direct_shape does not apply (rows past 131072 columns, narrower vectors), 16-bit log_softmax
(and softmax over clusters of 8, or any such row on a card with fast memory) walks several rows
per cluster with that trip pipelined (_walk_cluster_rows): on a persistent grid of as many
clusters as run at once, or CLUSTER_WALK rows a cluster (forward_walk). On fast memory the
backward over 16-bit clusters walks too, and on slow memory where the CTAs an SM runs would
hold too little of their rows (backward_walk).
Longer rows (and 16-bit rows past MAX_N whose length or stride would make the register path
read them in vectors narrower than 16 bytes: takes_chunks) are read in chunks (kernels/row_chunks.py), the
forward's log-sum-exp online in one pass and the output in a second (two reads and one write),
the backward's sum in one pass and dx in a second (four reads and one write).
"""

from __future__ import annotations

import math

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_chunks import (chunk_config, chunks, exp_about, load_chunk, load_edge, log_sum_exp, merge_max_sum_pairs,
                         online_logsumexp, rescale, scaled, store_chunk, store_edge)
from .row_reduce import (MAX_CLUSTER, MAX_N, MAX_SM_THREADS, NON_PORTABLE_CLUSTER, RowConfig, clamp_row,
                         cluster_peers, cluster_receive, cluster_send, cta_group, direct_cluster_config, direct_config,
                         direct_exchange, direct_fold, dynamic_rows, fast_memory, fetch_row, fold, launch_cluster,
                         launch_grid, load_row, load_row_staged, open_direct, register_ctas, row_config, row_reduce,
                         store_row, thread_place, unless_it_spills, walk_cluster_rows, walking_groups)
# Rows of up to this many elements stay in registers (over a cluster past MAX_N).
REGISTER_N = MAX_N * MAX_CLUSTER
# Rows each cluster walks forward where forward_walk says "groups" (clusters of 2 on an H100).
CLUSTER_WALK = 8


def values_per_thread(n: int) -> int:
    """64 values of a row per thread, 32 past 16384 columns: there the row spreads over twice
    the CTAs (512-thread CTAs in a cluster of 2 from 16385 on), measured faster both ways (and the backward's y and dy
    fit its registers)."""
    return 64 if n <= MAX_N // 2 else 32


# Bytes a thread the register path's forward and backward may spill where row_reduce.unless_it_spills
# keeps 8 CTAs holding more values a thread than values_per_thread because 16 would pad the row past a
# quarter (16-bit rows of about 131073-157286 and 196609-209715 columns), measured the faster of the two
# at 200000 (its docstring). The launch accepts them: no SpillWarning for a shape measured and kept.
# ptxas, sm_90a, bf16 and fp16 (2026-11-27): at 200000-209000 log_softmax's forward spills 60-68 bytes
# and softmax's backward 28-32; nothing else spills at 133000-262144 (13 widths).
KEPT_SPILL = 72


def kept_spilling(cfg: RowConfig) -> bool:
    """Whether `cfg` is a cluster of 8 holding more values a thread than planned: the shape _wider
    offers 16 CTAs for, and unless_it_spills keeps where 16 would pad too much (its spill, up to
    KEPT_SPILL, accepted)."""
    return cfg.cluster == MAX_CLUSTER and cfg.vectors * cfg.vec > values_per_thread(cfg.n)


@cute.kernel
def _forward_kernel(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, log: Constexpr, walk: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    if cute.const_expr(walk in ("groups", "persistent")):
        _walk_cluster_rows(mX, mY, cfg, log, lane)
    elif cute.const_expr(walk == "direct"):
        _direct_row(mX, mY, cfg, log, row, lane, row_in_cta)
    else:
        peers = cluster_peers(cfg)
        rows = mX.shape[0]
        x = load_row(mX, clamp_row(row, rows), lane, cfg, fill=-math.inf)
        if cute.const_expr(peers is not None):      # one exchange: each part's max and sum
            local, e, total = _part_statistics(x, cfg, lane, peers, 0)
            cluster_send((local, total), cfg, lane, 0, 0, peers)
            m, s = _combine_parts(cfg, peers, 0)
            y = _output(x if cute.const_expr(log) else e, local, m, s, log)
        else:
            m = row_reduce(fold(x, "max"), "max", cfg, lane, row_in_cta)
            e = exp_about(x, scaled(m))
            s = row_reduce(fold(e, "sum"), "sum", cfg, lane, row_in_cta)
            y = _output(x if cute.const_expr(log) else e, m, m, s, log)
        if row < rows:
            store_row(mY, row, lane, cfg, y)


def forward_walk(cfg: RowConfig, bits: int, log: bool, fast: bool) -> str | None:
    """How the forward walks 16-bit rows split over a cluster whose threads hold up to 32
    values each with their exchanges pipelined (_walk_cluster_rows):
    None (one row per cluster, no walk), "groups" (each cluster walks CLUSTER_WALK rows) or
    "persistent" (a grid of as many clusters as run at once, each walking every groups-th row:
    row_reduce.persistent_groups). Longer rows, or Float32 ones, would spill the two rows'
    registers. `fast`: the device's memory outruns one row in flight per CTA
    (row_reduce.fast_memory); there every such row walks on the persistent grid. Since
    direct_shape, the rows it takes (16-byte vectors, up to 131072 columns) no longer come here:
    the walks serve rows past 131072 over 16 CTAs and 16-bit rows of 16385-32768 columns in
    narrower vectors (longer ones take chunks: takes_chunks).

    Measured before direct_shape, bf16 fraction of copy (2026-11-26):
    - log_softmax, whose x and exponentials both live, runs one CTA per SM: walking is 1.4-1.7x
      one row per CTA (H200 0.86 / 0.80 / 0.78 against 0.54 / 0.49 / 0.47 at 32768 / 65536 /
      131072 walking groups; H100 0.96 / 0.93 / 0.91 against 0.69 / 0.62 / 0.60).
    - softmax keeps two CTAs per SM one row each: on the H100 walking cost 3 % at 32768 and
      65536, so only its clusters of 8 walk there (131072: 0.911 -> 0.944 persistent).
    - The persistent grid over clusters of 4 and 8: clusters of 8 for 1024 rows of 131072
      columns made 9 waves of the 15 that fit at once, the last half full, and the walk fills
      again at every cluster's start. H200 / H100: softmax 131072 0.765 -> 0.877 / 0.911 ->
      0.944; log_softmax 65536 0.805 -> 0.884 / 0.928 -> 0.926, 131072 0.781 -> 0.877 / 0.918
      -> 0.947. Over clusters of 2 it cost the H100 (log_softmax 32768 0.953 -> 0.917): there
      clusters walk CLUSTER_WALK rows.
    - The H200 (fast memory) gains from every walk on the persistent grid: softmax 32768 0.867
      -> 0.908, 65536 0.782 -> 0.883; log_softmax 32768 0.862 -> 0.909."""
    if not (cfg.cluster > 1 and cfg.vectors * cfg.vec <= 32 and bits <= 16):
        return None
    if fast:
        return "persistent"
    if not (log or cfg.cluster >= MAX_CLUSTER):
        return None
    return "persistent" if cfg.cluster >= 4 else "groups"


@cute.jit
def _walk_cluster_rows(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, log: Constexpr, lane):
    """Rows split over a cluster, walked pipelined (row_reduce.walk_cluster_rows): a row's parts
    trade their max and sum of exponentials once; `held` keeps x for log_softmax, the
    exponentials about the part's max for softmax."""
    peers = cluster_peers(cfg, sets=4)      # (sends one exchange ahead of receives)

    def start(x, held, step, context):
        local, e, total = _part_statistics(x, cfg, lane, peers, step)
        held.store(x if cute.const_expr(log) else e)
        cluster_send((local, total), cfg, lane, 0, step, peers)
        return local

    def finish(held, local, row, step, context):
        m, s = _combine_parts(cfg, peers, step)
        store_row(mY, row, lane, cfg, _output(held, local, m, s, log))

    walk_cluster_rows(mX, cfg, lane, start, finish, -math.inf)


@cute.jit
def _direct_row(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, log: Constexpr, row, lane, row_in_cta):
    """One row per cluster in quack's shape (direct_shape): the CTA's part of the row staged by
    cp.async while the cluster starts, then one exchange, each warp's (max, sum) straight to
    every CTA (_direct_statistics). Holds the exponentials about the warp's max for softmax, x
    for log_softmax."""
    rows = mX.shape[0]
    slots, bar = open_direct(cfg, 2)
    x = load_row_staged(mX, clamp_row(row, rows), lane, row_in_cta, cfg, fill=-math.inf)
    e, warp_max, m, s = _direct_statistics(x, cfg, slots, bar)
    if row < rows:
        store_row(mY, row, lane, cfg, _output(x if cute.const_expr(log) else e, warp_max, m, s, log))


@cute.jit
def _direct_statistics(x, cfg: Constexpr, slots, bar):
    """(exponentials of x about its warp's max, that max, the row's max, the row's sum of
    exponentials about it) of a row over a cluster in one exchange, quack's way
    (row_reduce.direct_exchange: each warp's (max, sum) straight to every CTA, then
    row_reduce.direct_fold; every thread gets the same result: the merge commutes)."""
    warp_max = cute.arch.warp_reduction(fold(x, "max"), cute.arch.fmax, 32)
    e = exp_about(x, scaled(cute.where(warp_max == -math.inf, 0.0, warp_max)))
    warp_sum = cute.arch.warp_reduction(fold(e, "sum"), lambda a, b: a + b, 32)
    direct_exchange((warp_max, warp_sum), cfg, slots, bar)
    m, s = direct_fold(cfg, slots, 2, merge_max_sum_pairs)
    return e, warp_max, m, s


@cute.jit
def _part_statistics(x, cfg: Constexpr, lane, peers, step):
    """(max, exponentials about it, their sum) of this CTA's part of a row (row_reduce steps
    2 step and 2 step + 1). A part whose columns are all -inf takes its exponentials about 0
    (all 0) and keeps its max -inf, which weighs its sum (0) by 0 whatever the row's max."""
    local = row_reduce(fold(x, "max"), "max", cfg, lane, 0, 2 * step, peers, cluster_wide=False)
    e = exp_about(x, scaled(cute.where(local == -math.inf, 0.0, local)))
    total = row_reduce(fold(e, "sum"), "sum", cfg, lane, 0, 2 * step + 1, peers, cluster_wide=False)
    return local, e, total


@cute.jit
def _combine_parts(cfg: Constexpr, peers, step):
    """Receives exchange `step`, every part's (max, sum), and combines them: the row's max m
    and s = sum of s_r * exp(m_r - m)."""
    slots, at = cluster_receive(cfg, step, peers)
    parts = [r for r in range(cfg.cluster) if cfg.n - r * cfg.part > 0]     # the CTAs holding columns
    m = slots[(0, parts[0], 0, at)]
    for r in cute.range_constexpr(1, len(parts)):
        m = cute.arch.fmax(m, slots[(0, parts[r], 0, at)])
    shift = scaled(m)
    s = 0.0
    for r in cute.range_constexpr(len(parts)):
        s = s + slots[(0, parts[r], 1, at)] * rescale(slots[(0, parts[r], 0, at)], shift)
    return m, s


def _output(held, local, m, s, log: bool):
    """The row's output from `held` (x for log_softmax: x - lse; for softmax the exponentials
    about `local`, rescaled by exp(local - m) / s). 1 / s by rcp.approx: IEEE rcp.rn.f32 is a
    subroutine call in SASS, and a call waits for every load in flight (the next rows' too:
    0.48 of copy against 0.78 at 131072 columns, H200)."""
    if log:
        return held - log_sum_exp(m, scaled(m), s)
    return held * (rescale(local, scaled(m)) * cute.arch.rcp_approx(s))


@cute.kernel
def _backward_kernel(mY: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, cfg: Constexpr, log: Constexpr,
                     walk: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    if cute.const_expr(walk):
        _walk_cluster_rows_backward(mY, mDY, mDX, cfg, log, lane)
    else:
        peers = cluster_peers(cfg)
        step = 0 if cute.const_expr(peers is not None) else None
        rows = mY.shape[0]
        src = clamp_row(row, rows)
        y = load_row(mY, src, lane, cfg)
        dy = load_row(mDY, src, lane, cfg)
        total = row_reduce(fold(_summed(y, dy, log), "sum"), "sum", cfg, lane, row_in_cta, step, peers)
        if row < rows:
            store_row(mDX, row, lane, cfg, _input_gradient(y, dy, total, log))


def _summed(y, dy, log: bool):
    """What the backward sums over a row: dy (log_softmax) or dy * y (softmax)."""
    return dy if log else dy * y


def _input_gradient(y, dy, total, log: bool):
    """dx from y, dy and the row's sum of _summed."""
    if log:
        return cute.math.fma(exp_about(y, 0.0), -total, dy)
    return y * (dy - total)


@cute.jit
def _walk_cluster_rows_backward(mY: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, cfg: Constexpr,
                                log: Constexpr, lane):
    """The backward's walk over rows split across a cluster (backward_walk), each cluster
    walking every groups-th row with the next row's y and dy loading (in their 16-bit type)
    through this row's exchange and output. (Pipelining the exchange too, as the forward's
    walk does, would hold a third row: 80 bytes of spills at 512 threads.)"""
    peers = cluster_peers(cfg)
    group, groups = cta_group(cfg)
    rows = mY.shape[0]
    ahead = [cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type) for t in (mY, mDY)]
    fetch_row(mY, group, lane, cfg, ahead[0])
    fetch_row(mDY, group, lane, cfg, ahead[1])
    k = 0                                           # rows done: their exchanges' steps
    for row in range(group, rows, groups):
        y, dy = ahead[0].load().to(cute.Float32), ahead[1].load().to(cute.Float32)
        following = clamp_row(row + groups, rows)
        fetch_row(mY, following, lane, cfg, ahead[0])
        fetch_row(mDY, following, lane, cfg, ahead[1])
        total = row_reduce(fold(_summed(y, dy, log), "sum"), "sum", cfg, lane, 0, k, peers)
        store_row(mDX, row, lane, cfg, _input_gradient(y, dy, total, log))
        k = k + 1


@cute.kernel
def _long_forward_kernel(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, exact: Constexpr, log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    rows = mX.shape[0]
    src = clamp_row(row, rows)
    lse = online_logsumexp(mX, src, lane, row_in_cta, cfg, exact)
    for chunk in range(chunks(mX, cfg)):
        x = load_chunk(mX, src, lane, chunk, cfg, exact, 0.0)
        y = x - lse if cute.const_expr(log) else exp_about(x, scaled(lse))
        if row < rows:
            store_chunk(mY, row, lane, chunk, cfg, exact, y)
    if cute.const_expr(cfg.peeled):                 # the row's edges (kernels/row_chunks.py)
        x, _ = load_edge(mX, src, lane, cfg, 0.0)
        y = x - lse if cute.const_expr(log) else exp_about(x, scaled(lse))
        if row < rows:
            store_edge(mY, row, lane, cfg, y)


@cute.kernel
def _long_backward_kernel(mY: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, cfg: Constexpr, exact: Constexpr,
                          log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    rows = mY.shape[0]
    src = clamp_row(row, rows)
    total = 0.0
    for chunk in range(chunks(mY, cfg)):
        dy = load_chunk(mDY, src, lane, chunk, cfg, exact, 0.0)
        if cute.const_expr(log):
            total = total + fold(dy, "sum")
        else:
            total = total + fold(dy * load_chunk(mY, src, lane, chunk, cfg, exact, 0.0), "sum")
    if cute.const_expr(cfg.peeled):
        dy_edge, _ = load_edge(mDY, src, lane, cfg, 0.0)
        y_edge, _ = load_edge(mY, src, lane, cfg, 0.0)
        total = total + _summed(y_edge, dy_edge, log)
    total = row_reduce(total, "sum", cfg, lane, row_in_cta)
    for chunk in range(chunks(mY, cfg)):
        y = load_chunk(mY, src, lane, chunk, cfg, exact, 0.0)
        dy = load_chunk(mDY, src, lane, chunk, cfg, exact, 0.0)
        dx = _input_gradient(y, dy, total, log)
        if row < rows:
            store_chunk(mDX, row, lane, chunk, cfg, exact, dx)
    if cute.const_expr(cfg.peeled):
        dx = _input_gradient(y_edge, dy_edge, total, log)
        if row < rows:
            store_edge(mDX, row, lane, cfg, dx)


@cute.jit
def _long_forward(x: cute.Tensor, y: cute.Tensor, cfg: Constexpr, exact: Constexpr, log: Constexpr):
    _long_forward_kernel(x, y, cfg, exact, log).launch(grid=launch_grid(x.shape[0], cfg), block=(cfg.threads, 1, 1))


@cute.jit
def _long_backward(y: cute.Tensor, dy: cute.Tensor, dx: cute.Tensor, cfg: Constexpr, exact: Constexpr,
                   log: Constexpr):
    _long_backward_kernel(y, dy, dx, cfg, exact, log).launch(grid=launch_grid(y.shape[0], cfg),
                                                             block=(cfg.threads, 1, 1))


@cute.jit
def _forward(x: cute.Tensor, y: cute.Tensor, groups: cute.Int32, cfg: Constexpr, log: Constexpr, walk: Constexpr):
    """`walk`: forward_walk's; `groups`: a persistent walk's grid (row_reduce.persistent_groups),
    unused by the others."""
    grid = launch_grid(x.shape[0], cfg, CLUSTER_WALK if cute.const_expr(walk == "groups") else 1)
    if cute.const_expr(walk == "persistent"):
        grid = (groups * cfg.cluster, 1, 1)
    kept = KEPT_SPILL if cute.const_expr(kept_spilling(cfg)) else 0
    _forward_kernel(x, y, cfg, log, walk).launch(grid=grid, block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg),
                                                 min_blocks_per_mp=resident_ctas(cfg, log, walk),
                                                 accepted_spill_bytes=kept)


def resident_ctas(cfg: RowConfig, log: bool, walk: str | None):
    """CTAs per SM the forward asks ptxas to fit (None: no bound). log_softmax holds x through
    both reductions, and ptxas makes every exponential of the sum live beside it: 124-141
    registers per thread from 4096 columns, so one CTA per SM where softmax (which holds the
    exponentials instead of x) takes 94-96 and runs two; over clusters of 512-thread CTAs
    (Float32 rows past 16384 columns) 76 against 59. Bounded to two CTAs per SM (or four of 128
    threads: 128 registers), no spills. H200 fraction of copy, unbounded -> bounded: bf16 4096
    0.90 -> 0.99, 8192 0.89 -> 0.98, 16384 0.59 -> 0.94; Float32 16384 0.90 -> 0.98, 32768
    0.82 -> 1.00. The pipelined walks keep theirs: bounded, they spill (240 bytes). The direct
    shape asks for three 256-thread CTAs (64-80 registers, no spills): quack's softmax runs so (79)."""
    if walk == "direct":
        return 3
    if not log or walk:
        return None
    return max(2, 65536 // (128 * cfg.threads))


@cute.jit
def _backward(y: cute.Tensor, dy: cute.Tensor, dx: cute.Tensor, groups: cute.Int32, cfg: Constexpr, log: Constexpr,
              walk: Constexpr):
    """`walk`: backward_walk's; `groups`: its persistent grid (row_reduce.persistent_groups),
    unused without the walk."""
    grid = (groups * cfg.cluster, 1, 1) if cute.const_expr(walk) else launch_grid(y.shape[0], cfg)
    resident = None if cute.const_expr(walk) else backward_resident_ctas(cfg, log, y.element_type.width)
    kept = KEPT_SPILL if cute.const_expr(kept_spilling(cfg)) else 0
    _backward_kernel(y, dy, dx, cfg, log, walk).launch(grid=grid, block=(cfg.threads, 1, 1),
                                                       cluster=launch_cluster(cfg), min_blocks_per_mp=resident,
                                                       accepted_spill_bytes=kept)


# Bytes of y and dy an SM's CTAs hold at once, one row per cluster, below which the backward
# walks on slow memory too (backward_walk): between the 49 KB where one row per cluster lost
# to the walk and the 59 where it won, H100.
WALK_BELOW_BYTES = 56 * 1024


def backward_walk(cfg: RowConfig, bits: int, fast: bool, held: int | None = None) -> bool:
    """Whether the backward walks rows split over a cluster on a persistent grid, the next row
    loading through each row's exchange (_walk_cluster_rows_backward): 16-bit rows whose
    threads hold up to 32 values, on a card with fast memory (row_reduce.fast_memory), or where
    the CTAs an SM runs one row per cluster hold fewer than WALK_BELOW_BYTES of y and dy
    (`held`: held_bytes; None where not known).

    bf16 fraction of copy, softmax / log_softmax, one row per cluster -> walking (2026-11-26):
    H200 32768 0.92 / 0.92 -> 0.98 / 0.96, 65536 0.86 / 0.84 -> 0.99 / 1.00, 131072 0.84 /
    0.80 -> 1.01 / 1.01. On the H100 (slow memory) it lost over whole rows (0.99 / 0.99 -> 0.93
    / 0.93 at 65536, 1.02 -> 0.96 at 32768) and won over padded ones, whose threads hold less
    than their registers could: one row per cluster, a thread holds 3 or 4 vectors whatever its
    share of the row, and one 512-thread CTA runs per SM at 72-92 registers (log_softmax's 3
    vectors take 62: two). H100, 2026-11-27, KB held -> fraction of copy, one row per cluster
    -> walking:

    | op | N | KB held | one row | walking |
    |---|---:|---:|---:|---:|
    | softmax | 20000 / 40000 | 39 | 0.92 / 0.83 | 0.95 / 0.98 |
    | softmax | 70000 / 90000 | 34 / 44 | 0.72 / 0.87 | 1.00 / 0.98 |
    | softmax | 50000 / 100000 | 49 | 0.90 / 0.86 | 0.95 / 0.97 |
    | log_softmax | 50000 / 100000 | 49 | 0.90 / 0.87 | 0.95 / 0.97 |
    | softmax | 30000 / 60000 / 120000 | 59 | 1.02 / 0.99 / 0.96 | 0.96 / 0.95 / 0.98 |
    | softmax | 131000 | 64 | 0.98 | 0.96 |
    | log_softmax | 120000 | 59 | 0.96 | 0.98 |
    | log_softmax | 20000 / 70000 | 78 / 68 | 1.03 / 1.03 | 0.95 / 0.98 |
    """
    if not (cfg.cluster > 1 and cfg.vectors * cfg.vec <= 32 and bits <= 16):
        return False
    return fast or (held is not None and held < WALK_BELOW_BYTES)


def held_bytes(cfg: RowConfig, bits: int, registers: int) -> int:
    """Bytes of y and dy (`bits` each) the CTAs an SM runs of a kernel of `registers` a thread
    hold, one row per cluster: each its share of the row (padding holds nothing)."""
    ctas = min(register_ctas(cfg.threads, registers), MAX_SM_THREADS // cfg.threads)
    return ctas * cfg.n // cfg.cluster * 2 * bits // 8


def backward_resident_ctas(cfg: RowConfig, log: bool, bits: int):
    """CTAs per SM the backward asks ptxas to fit (None: no bound): log_softmax's over 16-bit
    rows in 256-thread CTAs (16384 columns), where 144 registers ran one CTA per SM (bf16 0.77
    of copy on an H200, slower than eager's 1.00) and 128 fit two without spilling (bf16 / fp16
    1.02 of copy). Float32 rows spill 44-52 bytes bounded so, softmax's backward 84 (155
    registers; it reads 0.96 of copy unbounded)."""
    return 2 if log and bits <= 16 and cfg.threads == 256 and cfg.cluster == 1 else None


def _rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """`t` as (M, N) with unit column stride, the last dim being N (a copy only if needed)."""
    if t.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension")
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _config(*tensors, max_cluster: int = MAX_CLUSTER) -> RowConfig:
    n = tensors[0].shape[-1]
    size = max(t.element_size() for t in tensors)
    values = values_per_thread(n)
    cfg = row_config(n, size, max_values=values, max_cluster=max_cluster)
    # The vector must suit every tensor's rows and address.
    for t in tensors:
        c = row_config(n, size, t.stride(0), t.data_ptr(), values, max_cluster)
        if c.vec < cfg.vec:
            cfg = c
    return cfg


def _wider(cfg: RowConfig, *tensors) -> RowConfig | None:
    """The shape over a non-portable cluster where `cfg`'s cluster of 8 holds more values a thread
    than values_per_thread (rows past 131072 columns: 64 where 16 CTAs hold 32), else None; the
    kernel takes it where ptxas spills `cfg`'s (row_reduce.unless_it_spills)."""
    if not kept_spilling(cfg):
        return None
    return _config(*tensors, max_cluster=NON_PORTABLE_CLUSTER)


def direct_shape(tensors: tuple, short: bool = False) -> RowConfig | None:
    """quack's shape for the forward over 16-bit rows split over a cluster (past 16384 columns
    up to 131072, 2 to 8 CTAs; with `short`, softmax's, also unpadded rows past 8192), or None:
    256-thread CTAs whose threads hold 64 values in 16-byte vectors, one row per cluster,
    staged by cp.async, one exchange (_direct_row), three CTAs per SM. Fraction of copy, bf16
    (fp16 the same within 0.01), 2026-11-26, against the shapes before it (forward_walk's;
    ours-before -> direct):

    | card | op | 20000 | 32768 | 40000 | 65536 | 100000 | 131072 |
    |---|---|---|---|---|---|---|---|
    | H200 | softmax | 0.63 -> 1.00 | 0.91 -> 0.98 | 0.56 -> 1.00 | 0.88 -> 0.97 | 0.59 -> 0.89 | 0.88 -> 0.97 |
    | H200 | log_softmax | 0.59 -> 0.95 | 0.91 -> 0.98 | 0.54 -> 0.89 | 0.88 -> 0.97 | 0.58 -> 0.88 | 0.88 -> 0.96 |
    | H100 | softmax | 0.87 -> 1.01 | 0.99 -> 0.98 | 0.78 -> 1.01 | 0.97 -> 0.98 | 0.73 -> 1.01 | 0.96 -> 0.99 |
    | H100 | log_softmax | 0.77 -> 1.01 | 0.96 -> 0.98 | 0.68 -> 1.01 | 0.92 -> 0.98 | 0.73 -> 1.01 | 0.94 -> 0.99 |

    quack 0.2.2's softmax on the H200 (benchmarks/reductions.py): ours/quack 1.00 / 1.00 /
    1.01 at 32768 / 65536 / 131072. The copies are `.ca` (load_row_staged); the same kernel
    over `.cg` copies read 0.92 at 32768 and 65536 and 0.91 at 131072.

    Rows one 256-thread CTA holds, past 8192 columns, over two of them (`short`; 32 values a
    thread at 16384) for softmax, H200 (2026-11-27), the shape before (one CTA a row, 64 values
    in registers) -> this: 12288 0.97 -> 0.99, 16384 0.94 -> 0.98 (quack 0.97 at both); at
    8192 0.97 -> 0.94 (128-thread CTAs 0.97); padded, 14000 0.93 -> 0.95 but 10000 0.99 ->
    0.93. log_softmax lost at 16384 (0.93 -> 0.88) and at 8192 (0.97 -> 0.83) and keeps its
    shapes. Float32 rows: float32_direct_shape (the softmax forward's only, not cross-entropy's)."""
    if max(t.element_size() for t in tensors) != 2:
        return None
    return direct_config(tensors[0].shape[-1], _config(*tensors).vec, short)


# Float32 rows in quack's shape (float32_direct_shape): at most 13 16-byte vectors a thread, and
# rows padded by at most 7 % (as measured there).
FLOAT32_DIRECT_VECTORS, FLOAT32_DIRECT_PADDING = 13, 0.07


def float32_direct_shape(n: int, vec: int) -> RowConfig | None:
    """quack's shape (_direct_row) for the forward over Float32 rows of 65537-131072 columns in
    16-byte vectors: one row per cluster of 8, or 16 (NON_PORTABLE_CLUSTER) where 8 would hold
    more than FLOAT32_DIRECT_VECTORS vectors a thread (at 131072 they would hold 16 and spill 12
    bytes), 256-thread CTAs (56-80 registers, no spill), three per SM; None elsewhere and where the
    row would be padded past FLOAT32_DIRECT_PADDING. The library had run these rows one per
    cluster of 8 512-thread CTAs, in registers without staging. Fraction of copy (row_shapes.py,
    2026-11-27), that -> this, H200 / H100:

    - softmax: 70000 (8 CTAs, padded 5 %) 0.82 -> 0.98 / 0.98 -> 1.00, 80000 (8) 0.89 -> 0.98 /
      1.00 -> 1.00, 100000 (8, padded 6.5 %) 0.93 -> 0.98 / 1.00 -> 1.00, 131072 (16) 0.97 -> 0.99 /
      1.00 -> 1.00;
    - log_softmax: 70000 0.79 -> 0.99 / 0.97 -> 1.00, 100000 0.93 -> 0.98 / 1.00 -> 1.00, 131072
      0.97 -> 0.98 / 1.00 -> 1.00.

    Not taken: 115000 columns (8 CTAs would hold 15 vectors a thread, 16 pad the row 14 %): softmax
    over 8 0.94 -> 0.84 / 0.99 -> 0.87, over 16 0.94 -> 0.90 / 0.99 -> 1.00. At 65536 the
    library's shape and 8 CTAs measured the same (0.99 / 0.98 on the H200)."""
    if vec != 4 or not 2 * MAX_N < n <= 4 * MAX_N:
        return None
    cfg = direct_cluster_config(n, vec, FLOAT32_DIRECT_VECTORS * vec, MAX_CLUSTER)
    if cfg.cluster > NON_PORTABLE_CLUSTER or cfg.padding > FLOAT32_DIRECT_PADDING * n:
        return None
    return cfg


def forward_shape(args: tuple, tensors: tuple, log: bool, device: int, options=None) -> tuple[RowConfig, str | None]:
    """(the CTA shape, its walk: "direct" or forward_walk's) of the register path's forward over
    `tensors` (x, y) whose kernel arguments are `args`: direct_shape (Float32 rows:
    float32_direct_shape) where it applies. Past
    131072 columns 16 CTAs also where only they walk (32 values a thread; 8 hold 64 and cannot)
    and they pad the row no more than 8 do: softmax over bf16 rows of 262144, 0.64 -> 0.84 of
    copy on an H200 (the H100 not measured)."""
    direct = direct_shape(tensors, short=not log)
    if direct is None and max(t.element_size() for t in tensors) == 4:
        direct = float32_direct_shape(tensors[0].shape[-1], _config(*tensors).vec)
    if direct is not None:
        return direct, "direct"
    fast = fast_memory(device)
    return _shape(_forward, lambda cfg, width: forward_walk(cfg, width, log, fast), args, tensors, log, options,
                  walking_gains=True)


def backward_shape(args: tuple, tensors: tuple, log: bool, device: int, options=None) -> tuple[RowConfig, bool]:
    """(the CTA shape, backward_walk's walk) of the register path's backward over `tensors` (y,
    dy, dx) whose kernel arguments are `args`; on slow memory the kernel that does not walk is
    compiled (a memory-cache hit after the first call) for the bytes its CTAs hold."""
    fast = fast_memory(device)

    def walk_of(cfg: RowConfig, width: int) -> bool:
        if fast or not backward_walk(cfg, width, True):
            return backward_walk(cfg, width, fast)
        registers = _backward.compile(*args, 1, cfg, log, False, options=options).kernels[0].get("registers")
        return backward_walk(cfg, width, fast, held_bytes(cfg, width, registers) if registers else None)
    return _shape(_backward, walk_of, args, tensors, log, options)


def _shape(host, walk_of, args: tuple, tensors: tuple, log: bool, options, walking_gains: bool = False):
    width = 8 * max(t.element_size() for t in tensors)
    cfg = _config(*tensors)
    wider = _wider(cfg, *tensors)
    # (only where 16 CTAs pad the row no more than 8: that was measured, padding was not)
    gains = walking_gains and wider is not None and wider.padding <= cfg.padding and bool(walk_of(wider, width)) \
        and not walk_of(cfg, width)
    compiled = (lambda c: host.compile(*args, 1, c, log, walk_of(c, width), options=options))
    cfg = unless_it_spills(compiled, cfg, wider, gains)
    return cfg, walk_of(cfg, width)


def takes_chunks(*tensors) -> bool:
    """Whether rows take the chunked path (kernels/row_chunks.py): past REGISTER_N, and 16-bit
    rows past one CTA's registers (MAX_N) that the register path would read in vectors narrower
    than 16 bytes (a length or stride not a multiple of 8) where the chunked path reads them in
    16-byte vectors
    (peeled), though it reads each row twice. H200, bf16 fraction of copy, softmax /
    log_softmax, register path -> chunks: 33001 columns fwd 0.48 / 0.42 -> 0.64 / 0.69, bwd
    0.65 / 0.65 -> 0.62 / 0.75; 50257 fwd 0.60 / 0.50 -> 0.59 / 0.64, bwd 0.51 / 0.58 -> 0.60 /
    0.71; 100003 fwd 0.54 / 0.44 -> 0.56 / 0.59, bwd 0.50 / 0.53 -> 0.58 / 0.66. Float32 rows
    lost (50257: fwd 0.92 -> 0.62, bwd 0.76 -> 0.59): their single elements are 4 bytes."""
    n = tensors[0].shape[-1]
    if n > REGISTER_N:
        return True
    size = max(t.element_size() for t in tensors)
    return n > MAX_N and size == 2 and _config(*tensors).vec * size < 16 and chunk_config(*tensors)[0].peeled


def softmax(x: torch.Tensor, log: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax (or log_softmax) over the last dim of a CUDA tensor, in its dtype; any row length."""
    x2 = _rows(x, "x")
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device) if out is None else out.view(x2.shape)
    if x2.numel() and takes_chunks(x2, y):
        _long_forward(dynamic_rows(x2), dynamic_rows(y), *chunk_config(x2, y), log)
    elif x2.numel():
        args = (dynamic_rows(x2), dynamic_rows(y))
        cfg, walk = forward_shape(args, (x2, y), log, x.device.index)
        groups = walking_groups(_forward, args, (cfg, log, walk), x2.shape[0], cfg, x.device.index) \
            if walk == "persistent" else 1
        _forward(*args, groups, cfg, log, walk)
    return y.view(x.shape)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, log: bool = False) -> torch.Tensor:
    """The gradient of softmax (or log_softmax) from its output `y` and the gradient `dy`."""
    if y.shape != dy.shape:
        raise ValueError(f"softmax_backward: y {tuple(y.shape)} and dy {tuple(dy.shape)} differ in shape")
    y2, dy2 = _rows(y, "y"), _rows(dy, "dy")
    dx = torch.empty(y2.shape, dtype=dy.dtype, device=y.device)
    if y2.numel() and takes_chunks(y2, dy2, dx):
        _long_backward(dynamic_rows(y2), dynamic_rows(dy2), dynamic_rows(dx), *chunk_config(y2, dy2, dx), log)
    elif y2.numel():
        args = (dynamic_rows(y2), dynamic_rows(dy2), dynamic_rows(dx))
        cfg, walk = backward_shape(args, (y2, dy2, dx), log, y.device.index)
        groups = walking_groups(_backward, args, (cfg, log, walk), y2.shape[0], cfg, y.device.index) if walk else 1
        _backward(*args, groups, cfg, log, walk)
    return dx.view(y.shape)
