"""The CTA shapes of the norm kernels (kernels/norms.py): which shape, walk and bound each
forward and backward takes for a row length, dtype, residual, parameters and card, and the
measurements behind each rule. Host code only: norms.py's launches and entries ask these, and
so do the C++ ops' builds (cute_torch/ops/row_build.py).

Forward: forward_plan (values a thread and blocks of rows walked: FORWARD_WALKS, and on cards
with fast memory FAST_MEMORY_WALKS), forward_config (the CTA shape for them), forward_walk
(both, with exceptions for LayerNorm's padded rows), direct_shape (quack's one row per
cluster; float32_direct_shape for Float32 rows), unwalked_ctas and walking_ctas (CTAs per SM ptxas is asked to fit),
pipelined_forward. Backward: backward_config (PAIRED_LAYER_NORM: the widths LayerNorm's runs
over pairs of CTAs; LAYER_NORM_CLUSTERS: its 128-thread clusters), backward_ring (the
shared-memory ring), backward_ctas, pipelined_backward (norms.backward_shape: where it spills).
"""

from __future__ import annotations

from dataclasses import replace

from .row_reduce import (DIRECT_THREADS, MAX_CLUSTER, MAX_REGISTERS, MAX_THREADS, NON_PORTABLE_CLUSTER, RowConfig,
                         direct_cluster_config, direct_config, row_config)

# Row values a thread plans at most forward (forward_config may narrow a padded shape to NARROW_VALUES).
FORWARD_VALUES = 64
# Registers LayerNorm's forward with weight and bias takes a thread (unwalked_ctas).
LAYER_NORM_REGISTERS = 128
# forward_shape's walk for direct_shape's forwards: one row per cluster in quack's shape.
DIRECT = 0
# Backward: bytes of each staged tensor (x, dy) per thread (32 16-bit values, 16 Float32), in
# CTAs of MAX_THREADS; the ring takes up to BACKWARD_STAGES blocks of rows within the shared
# memory an H100 CTA may have (what row_reduce allocates statically kept aside).
BACKWARD_BYTES, BACKWARD_STAGES, BACKWARD_SMEM = 64, 4, 232448 - 2048


# LayerNorm's backward over a pair of CTAs, one row each (backward_config), where its 512-thread
# CTAs held the row at 3-7 vectors a thread (several rows a CTA at 3072): element size -> row
# length -> (vector, threads a row in each CTA) on fast memory and elsewhere (None: unpaired).
# Fraction of copy, 512 threads -> pairs (three runs each, 2026-11-27):
#
# | columns | H200 | H100 |
# |---|---|---|
# | bf16 3072 | 0.82 -> 0.97 | 0.94 -> 0.98 |
# | bf16 6144 | 0.80 -> 0.95 | 0.92 -> 0.98 |
# | bf16 7168 (8-byte vectors on both) | 0.85 -> 0.92 | 0.95 -> 1.00 |
# | Float32 5120 (padded to 6144) | 0.83 -> 0.96 | 0.93 -> 0.94, not taken |
# | Float32 6144 / 8192 | 0.86 / 0.96 -> 0.95 / 0.99 | 0.97 / 0.96 -> 0.94 / 0.97, not taken |
#
# Each card lost with the other's vectors at 3072 / 6144 (H200 8-byte 0.92 / 0.89, H100 16-byte
# 0.90 / 0.91); bf16 2048, 4096, 5120 and 8192 did not gain either way (within 1 % or lost 1-3 %).
PAIRED_LAYER_NORM = {
    2: {3072: ((8, 64), (4, 128)), 6144: ((8, 128), (4, 256)), 7168: ((4, 128), (4, 128))},
    4: {5120: ((4, 256), None), 6144: ((4, 256), None), 8192: ((4, 256), None)},
}

# LayerNorm's backward over 16-bit rows of 7169-16384 columns (16-byte vectors allowed) in
# 128-thread CTAs over clusters: fast memory or not -> [(past N columns, cluster, vector), ...],
# the last entry whose N is passed applies (backward_config). Off fast memory 8192 keeps one
# 256-thread CTA a row (0.98 of copy against 0.93 so). bf16 fraction of copy, the shapes before
# (on fast memory pairs of 256-thread CTAs, elsewhere one of 512; at 8192 one of 256) -> this
# (three runs each, 2026-11-27; the H200's at 8704-10000 lost 1-2 %):
#
# | columns | H200 | H100 |
# |---|---|---|
# | 7680 / 8192 | 0.78 / 0.93 -> 0.93 / 0.96 | 0.91 / 0.98 -> 0.97 / 0.98 |
# | 8704 / 9216 | 0.94 / 0.97 -> 0.93 / 0.96 | 0.82 / 0.85 -> 0.95 / 0.98 |
# | 9728 / 10000 | 1.00 / 0.99 -> 0.99 / 0.97 | 0.87 / 0.87 -> 0.99 / 0.98 |
# | 10240 / 10752 | 0.81 / 0.89 -> 0.93 / 0.95 | 0.88 / 0.90 -> 0.98 / 0.99 |
# | 11264 / 11776 | 0.89 / 0.90 -> 0.96 / 0.98 | 0.92 / 0.94 -> 1.00 / 1.00 |
# | 12288 / 12800 | 0.89 / 0.87 -> 0.97 / 0.97 | 0.91 / 0.81 -> 0.96 / 0.97 |
# | 13312 / 13824 | 0.87 / 0.90 -> 0.96 / 1.00 | 0.78 / 0.79 -> 0.97 / 0.99 |
# | 14336 / 14848 | 0.88 / 0.90 -> 0.95 / 0.91 | 0.82 / 0.79 -> 0.98 / 1.00 |
# | 15360 / 15872 | 0.89 / 0.90 -> 0.92 / 0.94 | 0.78 / 0.78 -> 0.98 / 0.99 |
# | 16384 | 0.91 -> 0.94 | 0.90 -> 0.99 |
#
# Each card's other entries lost (H200 in clusters of 8 up to 13824: 0.68-0.92; H100 in clusters
# of 4 of 4-element vectors at 11264-13824: 0.91-0.94); RMSNorm's did not gain (8192-12288 within
# 1.5 % on the H100, 2-9 % lost on the H200).
LAYER_NORM_CLUSTERS = {
    # 14336 exactly: a cluster of 7, 4 vectors a thread (0.89 -> 0.95 on the H200; the H100 lost, 0.98 -> 0.94).
    True: [(7168, 4, 4), (14335, 7, 4), (14336, 8, 4)],
    False: [(7168, 4, 8), (10240, 8, 4), (15360, 4, 4)],
}

# Forwards that walk blocks of rows, each fetching the next block into registers ahead of its
# reductions: (element size, rms, residual) -> [(from N, values per thread, blocks walked),
# ...], the last entry whose N is reached applies. A thread that holds its part of a row and
# fetches the next keeps one CTA per SM busy through its reductions, where one row per CTA
# needs two CTAs per SM to overlap them, and long rows (or rows with a residual) leave no room
# for two. The faster the memory, the more it matters: measured fraction of copy, H200 / H100,
# before -> after (benchmarks/RESULTS.md); an entry that cost the H100 over 2 % for less than
# 10 % on the H200 was left out. Measured before direct_shape, which now takes 16-bit rows in
# 16-byte vectors without a residual up to 131072 columns: the entries without a residual apply
# where it does not (past 131072, narrower vectors, LayerNorm's padded rows or too many parameters).
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
# (norms._stages_parameters) instead of once per row through L2, two CTAs per SM (walking_ctas): 0.893 -> 0.924-0.929.
# Without them it lost (0.973 -> 0.940); at 32768 walking 4 blocks equals 8.
# At 32768 32 values a thread over clusters of 2, pipelined on the persistent grid as from 65536:
# 0.913 / 0.909 -> 0.921 / 0.923 (the H100 lost: 0.938 / 0.940 -> 0.923 / 0.921). (2026-11-26)
# direct_shape now takes 32768 itself (clusters of 2): this entry serves 32769-65535 and padded rows.
_LAYER_NORM_PARAMETER_WALKS = [(16384, 64, 4), (32768, 32, 8)]


FAST_MEMORY_WALKS = {
    # RMSNorm at 32768 with a weight, one 512-thread CTA per SM unwalked: 0.903 -> 0.944 walking 4 blocks
    # (0.936 walking 8), measured before direct_shape, which now takes its rows in 16-byte vectors.
    (2, True, False, 1): [(32768, 64, 4)],
    (2, False, False, 1): _LAYER_NORM_PARAMETER_WALKS,
    # With weight and bias past 8192 they walked 4 blocks too (10000 / 12288 / 14000: 0.77 / 0.83 / 0.88 ->
    # 0.85 / 0.93 / 0.90); one row per CTA bounded to three CTAs per SM (unwalked_ctas) measured 0.95 / 0.96 /
    # 0.93-0.95 (2026-11-27; at 14000 spilling 24 bytes, BOUNDED_SPILL), and keeps them there.
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


def pipelined_forward(cfg: RowConfig, walk: int, bits: int, rms: bool, residual: bool) -> bool:
    """Whether the forward walks rows over a cluster with its exchanges pipelined
    (norms._walk_cluster_rows) on a persistent grid (row_reduce.persistent_groups): LayerNorm's walking forwards
    over clusters whose statistics take one trip (one_trip_statistics: 16-bit rows without
    padding or a residual). bf16 with weight and bias, fraction of copy at 65536 / 131072
    columns, H200: two exchanges a row -> one 0.80 / 0.77 -> 0.81 / 0.77; pipelined 0.82 /
    0.80; on the persistent grid 0.90 / 0.90 (without weight and bias 0.85 / 0.83 -> 0.93 /
    0.93). H100: 0.917 / 0.898 -> 0.915 / 0.929 (0.937 / 0.924 -> 0.927 / 0.929). The
    persistent grid cost the other walks on the H200 (one CTA a block at 32768 columns 0.91 ->
    0.86, RMSNorm over clusters of 2 at 65536 0.94 -> 0.91): they keep forward_plan's groups of
    `walk` blocks."""
    return walk > 1 and cfg.cluster > 1 and not rms and one_trip_statistics(bits, cfg, residual)


def pipelined_backward(cfg, stages: int) -> bool:
    """Whether the backward walks rows over a cluster with each row's exchange pipelined
    (norms._walk_cluster_rows_backward): rows split over a cluster, with a ring of 3 blocks or more
    (the row being finished, the next one being summed, one landing)."""
    return cfg.cluster > 1 and stages >= 3


def walking_ctas(cfg: RowConfig, walk: int):
    """CTAs per SM a walking forward of 256 threads or fewer asks ptxas to fit (None: no bound):
    the next row fetched ahead beside this one took LayerNorm's at 16384 bf16 columns to 150
    registers, one CTA per SM (0.896-0.900 of copy on an H200); bounded, 127 and no spills, two."""
    return 2 if walk > 1 and cfg.threads <= 256 else None


def backward_ctas(cfg: RowConfig, layer: bool, bits: int) -> int | None:
    """CTAs per SM the backward asks ptxas to fit (None: no bound).
    LayerNorm's over pairs of 256-thread CTAs (now PAIRED_LAYER_NORM's Float32 5120 and 6144 on
    fast memory, and bf16 6144 elsewhere): two where each thread holds at most 3 vectors of x and of dy. Measured where
    16-bit rows took such pairs (until LAYER_NORM_CLUSTERS): free, ptxas took 152-231
    registers, one CTA per SM. bf16 fraction of copy, H200 (2026-11-27), free -> two: 10000 /
    12288 0.75 / 0.83 -> 0.80 / 0.88; at 16384 0.87 -> 0.88, at 14000 (4 vectors, 80 bytes
    spilled) 0.83 -> 0.62; RMSNorm's lost (12288 / 16384: 0.96 / 0.95 -> 0.92 / 0.92).
    RMSNorm's over 16-bit rows of up to 1024 columns (512-thread CTAs of 16 values a thread):
    two, where ptxas took 96 registers free, one CTA per SM; bounded, 64 and no spills. bf16
    fraction of copy at 256 / 512 / 1024 (three runs each, 2026-11-27), free -> two: H200 0.93 /
    0.94 / 0.93 -> 0.99 / 0.96 / 0.98, H100 0.93 / 0.93 / 0.94 -> 0.93 / 0.93 / 0.94. LayerNorm's
    lost (1024: H200 0.96 -> 0.76), and so did RMSNorm's at 2048 (0.92 -> 0.63), and at 768 (24
    values a thread) bounded spilled 28 bytes (H200 0.95 -> 0.79, H100 0.95 -> 0.91).
    RMSNorm's over Float32 rows of 2048 to 8192 columns in one 512-thread CTA: two, where ptxas
    took 104-114 registers free; bounded, 64 (4 bytes spilled at 8192, BOUNDED_SPILL). Fraction
    of copy, free -> two (three runs each, 2026-11-27), H200 / H100: 2048 0.96 / 0.96 -> 0.97 /
    0.97, 3072 0.95 / 0.95 -> 0.95 / 0.95, 6144 0.96 / 0.95 -> 0.96 / 0.95, 8192 0.96 / 0.96 ->
    1.01 / 0.96 (on the H200 rows up to 4096 take 256-thread CTAs instead: backward_config).
    LayerNorm's spilled 24-136 bytes so and lost (4096: 0.97 -> 0.94 / 0.97 -> 0.92)."""
    if layer and cfg.threads == MAX_THREADS // 2 and cfg.cluster == 2 and cfg.vectors <= 3:
        return 2
    if not layer and bits == 16 and cfg.threads == MAX_THREADS and cfg.n <= 1024 and cfg.vectors * cfg.vec <= 16:
        return 2
    if not layer and bits == 32 and cfg.threads == MAX_THREADS and cfg.cluster == 1 and cfg.n >= 2048:
        return 2
    return None


def config_for(n: int, tensors, max_values: int, max_cluster: int = MAX_CLUSTER) -> RowConfig:
    """row_config's shape for rows of `n` elements that every tensor of `tensors` (None where
    absent) allows: the narrowest vector any one's row stride or alignment permits."""
    present = [t for t in tensors if t is not None]
    size = max(t.element_size() for t in present)
    cfg = row_config(n, size, max_values=max_values, max_cluster=max_cluster)
    for t in present:
        c = row_config(n, size, t.stride(0) if t.dim() == 2 else 0, t.data_ptr(), max_values, max_cluster)
        cfg = c if c.vec < cfg.vec else cfg
    return cfg


# forward_config narrows a padded shape to at most this many values a thread (12 16-byte vectors).
NARROW_VALUES = 96


def forward_config(n: int, tensors, values: int) -> RowConfig:
    """The forward's CTA shape for `values` per thread (forward_plan): config_for's; for 16-bit
    rows it holds at 6 16-byte vectors a thread in 32 or 64 threads, 3 in twice the threads
    (measured below, in the body); or where config_for's leaves some threads of a row a vector
    past N (padding: 128 threads x 3 vectors for 2560 columns at 32 values) and half or a quarter
    the threads per row cover it exactly with more values each, that, for 16-bit rows (measured when
    the forward planned 32 values at 2560 / 5120 columns, where it now plans 64 and config_for's
    shape is exact: LayerNorm over bf16 rows 0.88 / 0.82 -> 0.96 / 0.96 of copy on an H200, 0.97 /
    0.98 -> 0.97 / 0.99 on an H100; Float32 rows not measured;
    the backward kept its shape, where more values per thread measured 0.75 -> 0.55), up to twice
    `values` a thread and NARROW_VALUES (12800 columns in 64 threads of 200 values, 255 registers:
    LayerNorm with weight and bias / RMSNorm with a weight 0.76 / 0.89 of copy, 0.95 / 0.99 in 256
    threads, H200; 2026-11-27).
    NARROW_VALUES: since bf16 lanes widen in integer operations (DeviceCodegen.cpp's
    widenBf16Lanes), 13 and 15 vectors a thread lost to the padded shape, 9 and 11 did not. bf16
    fraction of copy on an H200, narrowed -> padded (2026-11-27, three runs each; LayerNorm with
    weight and bias / with a weight / RMSNorm with a weight): 13 vectors at 3328 0.92 / 0.99 /
    0.99 -> 0.97 / 1.00 / 1.00, 6656 0.89 / 0.90 / 0.97 -> 0.95 / 0.98 / 0.98, 13312 0.87 / 0.96 /
    0.97 -> 0.96 / 0.97 / 0.97, 26624 0.46 / 0.53 / 0.97 -> 0.92 / 0.93 / 0.97 (LayerNorm without
    parameters lost there, 0.86 -> 0.82); 15 at 3840 0.92 / 0.94 / 0.86 -> 0.97 / 0.98 / 0.98,
    7680 0.91 / 0.93 / 0.85 -> 0.97 / 0.98 / 0.98, 15360 0.91 / 0.93 / 0.85 -> 0.90 / 0.94 /
    0.96. At 9 vectors (2304, 4608, 9216, 18432) and 11 (11264) narrowed LayerNorm with weight
    and bias read 1-2 % ahead, without parameters at 18432 0.98 against 0.70 padded, the others
    within 1.5 % either way; with a residual (32 values planned) 5 vectors at 10240 0.99 against
    0.76-0.79 (LayerNorm with a weight / without), 7 at 14336 within 1.5 %. H100 at 11264 / 13312
    / 15360: within 1 % either way, padded mostly ahead."""
    cfg = config_for(n, tensors, values)
    sixteen_bit = all(t.element_size() == 2 for t in tensors if t is not None)
    if sixteen_bit and cfg.vec == 8 and cfg.vectors == 6 and not cfg.padding and cfg.cluster == 1 \
            and 32 <= cfg.threads_per_row <= MAX_THREADS // 8:
        # 16-bit rows of 6 16-byte vectors a thread in 32 or 64 threads (1536, 3072 columns): 3 in
        # twice the threads, still 128-thread CTAs. bf16 fraction of copy, H200 (2026-11-27, three
        # runs each), LayerNorm with weight and bias / with a weight / RMSNorm with a weight: 3072
        # 0.94 / 0.98 / 0.97 -> 0.98 / 0.99 / 0.98 (with a residual 0.98 / - / 0.98 -> 0.99 / - /
        # 0.99), 1536 0.98 / 1.00 / 1.00 -> 1.00 / 1.01 / 1.01; the H100 within 0.4 % either way.
        # Twice the threads again lost: at 768 (already 3 vectors in 32 threads) LayerNorm's with
        # weight and bias 0.98 -> 0.86, at 6144 (256-thread CTAs) 0.95 -> 0.82.
        return replace(cfg, threads_per_row=2 * cfg.threads_per_row, threads=MAX_THREADS // 4)
    if sixteen_bit and cfg.padding and cfg.cluster == 1:
        for per_row in (cfg.threads_per_row // 2, cfg.threads_per_row // 4):
            exact = replace(cfg, threads_per_row=per_row, threads=max(128, per_row))
            if per_row >= 8 and exact.padding == 0 and exact.vectors * exact.vec <= min(2 * values, NARROW_VALUES):
                return exact
    return cfg


def forward_walk(n: int, tensors, rms: bool, fast: bool = False) -> tuple[RowConfig, int, int]:
    """(CTA shape, values per thread, blocks walked) of the forward that does not take direct_shape:
    forward_plan's plan in forward_config's shape, but LayerNorm's padded 16-bit rows with a weight
    (and bias), without a residual, planned at fewer than FORWARD_VALUES values a thread (32: on
    fast memory at 32769-65535 columns, FAST_MEMORY_WALKS' 32768 entry over clusters of 4; on every
    card from 65536, FORWARD_WALKS' over clusters of 8) walk at FORWARD_VALUES (over clusters of 2
    and 4) where that shape pads the row too. Padded rows walk without pipelining
    (pipelined_forward), and those entries were measured pipelined. bf16 fraction of copy
    (2026-11-27, three runs each), weight and bias / weight, the plan's shape -> this:

    | card | 36000 | 40000 | 50000 | 60000 |
    |---|---|---|---|---|
    | H200 | - / 0.71 | 0.46 / 0.77 | 0.49 / 0.53 | 0.75 / 0.77 |
    | -> | - / 0.84 | 0.89 / 0.90 | 0.83 / 0.86 | 0.88 / 0.88 |

    | card | 70000 | 80000 | 100000 | 120000 | 131000 |
    |---|---|---|---|---|---|
    | H200 | 0.40 / 0.42 | 0.44 / 0.46 | 0.47 / 0.52 | 0.55 / 0.57 | 0.75 / 0.78 |
    | -> | 0.63 / 0.66 | 0.88 / 0.90 | 0.85 / 0.88 | 0.89 / 0.92 | 0.83 / 0.85 |
    | H100 | 0.52 / 0.54 | - | 0.59 / 0.66 | 0.68 / - | - |
    | -> | 0.79 / 0.82 | 0.95 / 0.96 | 0.93 / 0.95 | 0.94 / 0.94 | 0.90 / 0.90 |

    (On the H200 with a weight up to about 49999 the shape before was direct_shape's.) Over 16
    CTAs of 256 threads at 32 values (walking 8) they read less: H200 0.54-0.76 / 0.60-0.78, H100
    0.65-0.87 / 0.71-0.88. Where FORWARD_VALUES cover the row exactly the walk pipelines and lost
    (49152 / 57344 with weight and bias on the H200: 0.84 / 0.74 -> 0.60 / 0.51). Rows past
    131072, which FORWARD_VALUES would hold only over clusters of 8, keep their plan, and so do rows
    in narrower vectors (not measured). Measured in bf16; fp16 rows take it too, not timed."""
    size = max(t.element_size() for t in tensors if t is not None)
    residual, params = tensors[1] is not None, sum(t is not None for t in tensors[2:4])
    values, walk = forward_plan(n, size, rms, residual, fast, params)
    cfg = forward_config(n, tensors, values)
    if rms or residual or not params or size != 2 or cfg.vec * size != 16 or not cfg.padding \
            or values >= FORWARD_VALUES:
        return cfg, values, walk
    wide = forward_config(n, tensors, FORWARD_VALUES)
    if wide.padding and wide.cluster < MAX_CLUSTER:
        return wide, FORWARD_VALUES, walk
    return cfg, values, walk


# Bytes a thread a kernel bounded to more CTAs per SM may spill (accepted_spill_bytes): the
# unwalked forward bounded by unwalked_ctas (forward_shape drops a bound past it; LayerNorm's with
# weight and bias at 14000 spills 24), the backward bounded by backward_ctas (RMSNorm's over
# Float32 rows of 8192 spills 4).
BOUNDED_SPILL = 32


def unwalked_ctas(cfg: RowConfig, walk: int, size: int, residual: bool, params: int, fast: bool) -> int | None:
    """CTAs per SM the unwalked forward over 16-bit rows past 8192 columns, one 256-thread CTA a
    row, asks ptxas to fit (None: no bound): three where each thread holds at most 7 vectors
    (14336 columns), on fast memory; elsewhere forwards with weight and bias (LayerNorm's) up to
    6 (12288).
    Free, ptxas took 77-125 registers, two CTAs per SM. forward_shape drops a bound that makes
    ptxas spill past BOUNDED_SPILL (LayerNorm's with weight and bias at 14000 spills 24 bytes,
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
    gained more on the H200 (LayerNorm with weight and bias 0.98) and every wider row lost.
    LayerNorm's with weight and bias at 8 vectors a thread (2048-8192 columns in 128 threads,
    16384 in 256) keeps to LAYER_NORM_REGISTERS: ptxas took 128 free until bf16 lanes widened in
    integer operations (DeviceCodegen.cpp's widenBf16Lanes), then 141, a CTA per SM fewer (H200
    at 4096 / 8192: 0.97 -> 0.91); bounded, 126-127 and no spill.
    Float32 rows of 8193-16383 columns (one 256-thread CTA a row): LayerNorm's with weight and
    bias bounded to two, where ptxas took 165 / 234 registers free at 12288 / 14336 (128 bounded,
    no spill). Fraction of copy, free -> two (2026-11-27): H200 0.80 / 0.85 -> 0.97 / 0.97, H100
    0.97 / 0.99 -> 0.99 / 0.99 (pairs of CTAs, 512 threads, or walking 8 blocks read 0.77-0.93 on
    the H200)."""
    if walk != 1 or residual or cfg.cluster != 1:
        return None
    if size == 4:
        return 2 if params == 2 and cfg.threads == 256 and cfg.n > 8192 else None
    if cfg.threads == 256 and cfg.n > 8192 and cfg.vectors <= (7 if fast else 6 if params == 2 else 0):
        return 3
    if params == 2 and cfg.vectors == 8:
        return MAX_REGISTERS // (LAYER_NORM_REGISTERS * cfg.threads)
    return None


def direct_shape(n: int, tensors, rms: bool, *, fast: bool) -> RowConfig | None:
    """quack's shape (row_reduce.direct_config) for the forward over 16-bit rows split over a
    cluster (past 16384 columns, up to 131072) without a residual, its weight and bias 16-bit too
    (norms._direct_row), LayerNorm's where its parameters times the cluster's CTAs are at most 4
    (padded rows: below); None elsewhere. RMSNorm, bf16 fraction of copy at 32768 /
    65536 / 131072 columns (2026-11-26), the shapes before it (forward_plan's) -> this: H200
    0.93 / 0.93 / 0.90 -> 0.97 / 0.96 / 0.96 (quack 0.2.2's 0.97 / 0.97 / 0.96), H100 0.98 /
    0.95 / 0.94 -> 0.99 / 0.99 / 0.98. LayerNorm, bf16, H200 (2026-11-27), without parameters:
    0.93 / 0.93 / 0.93 -> 0.97 / 0.97 / 0.97; with a weight: 0.93 / 0.91 / 0.91 -> 0.97 / 0.95
    / 0.92; with weight and bias: 0.92 / 0.90 / 0.90 -> 0.95 / 0.89 / 0.85 (fp16 0.92 / 0.90 /
    0.91 -> 0.95 / 0.92 / 0.88). Every row reads its weight and bias again (from L2), and the
    normalization after the exchange grows with them, where the walks hold them for many rows;
    a cluster's CTAs wait for the slowest at the exchange. On slow memory (not `fast`:
    row_reduce.fast_memory, the H100) LayerNorm's unpadded rows take it with any parameters
    (H100, 2026-11-27, the walks -> this: bf16 with weight and bias 65536 0.91 -> 0.98, 131072
    0.92 -> 0.97; with a weight 131072 0.92 -> 0.99; fp16 with both 0.91 -> 0.98 at each).
    Rows one 256-thread CTA holds, past 8192 columns (row_reduce.direct_config's `short`), go
    over two CTAs for RMSNorm with a weight and LayerNorm without parameters. bf16, H200
    (2026-11-27), forward_plan's shape -> this at 12288 / 16384: RMSNorm with a weight 0.93 /
    0.96 -> 0.99 / 0.98, LayerNorm 0.93 / 0.97 -> 0.98 / 0.98. RMSNorm without one measured
    0.97 / 0.98 -> 0.98 / 0.97 and keeps its plan; LayerNorm with weight and bias lost (0.83 /
    0.93 -> 0.70 / 0.80: forward_plan's walks stage them once per CTA).
    LayerNorm's padded rows (some threads hold columns past N: each warp's count of columns
    travels with its (mean, M2), row_reduce.warp_mean_m2_counted) take it without parameters
    over clusters of 8 (MAX_CLUSTER) only. bf16, forward_plan's walks -> this (2026-11-27):
    70000 / 100000 / 120000: H200 0.45 / 0.54 / 0.61 -> 0.62 / 0.75 / 0.87, H100 0.57 / 0.67 /
    0.75 -> 0.80 / 0.95 / 0.98; over clusters of 4 (40000 / 50000) H200 0.90 / 0.88 -> 0.78 /
    0.83, H100 the same. With a weight (no bias) over clusters of 4, 36000 / 40000 / 50000 on the
    H200: 0.71 / 0.77 / 0.67 (50000 spilling 84 bytes) against 0.84 / 0.90 / 0.86 walking
    (forward_walk); on the H100 0.96 / 0.71 at 40000 / 50000 against 0.96 / 0.95. norms.forward_shape
    keeps the walks where the kernel spills past BOUNDED_SPILL. Float32 rows: float32_direct_shape."""
    sizes = {t.element_size() for t in tensors if t is not None}
    if tensors[1] is not None or sizes not in ({2}, {4}):
        return None
    parameters = sum(t is not None for t in tensors[2:4])
    if sizes == {4}:
        return float32_direct_shape(n, tensors, rms, parameters)
    short = parameters == 1 if rms else parameters == 0          # (as measured: RMSNorm's with a weight)
    cfg = direct_config(n, forward_config(n, tensors, FORWARD_VALUES).vec, short)
    if cfg is None or rms:
        return cfg
    if not cfg.padding:
        return None if fast and parameters * cfg.cluster > 4 else cfg
    return cfg if cfg.cluster == MAX_CLUSTER and not parameters else None


# Float32 rows in quack's shape (float32_direct_shape): 32 values a thread, its 16-bit rows' 128 bytes.
FLOAT32_DIRECT_VALUES = 32


def float32_direct_shape(n: int, tensors, rms: bool, parameters: int) -> RowConfig | None:
    """quack's shape (norms._direct_row) for the forward over Float32 rows of 16385-131072 columns
    without a residual, every tensor Float32: one row per cluster of 4, 8 or 16 (NON_PORTABLE_CLUSTER)
    256-thread CTAs holding up to FLOAT32_DIRECT_VALUES values each in 16-byte vectors, staged by
    cp.async, three CTAs per SM; None elsewhere. LayerNorm's with a weight over unpadded rows only,
    with weight and bias also over 8 CTAs at most. Past 16384 columns the forward had walked
    Float32 rows over clusters of 512-thread CTAs at 32 values a thread, one CTA per SM; here
    three 256-thread CTAs an SM hold as many each. Fraction of copy (2026-11-27), that walk ->
    this:
    - H100, RMSNorm with a weight: 20000 1.00 -> 1.01, 32768 0.99 -> 0.99, 65536 0.96 -> 1.00,
      100000 0.95 -> 1.00, 131072 0.96 -> 1.00; without: 17000 0.99 -> 1.00, 100000 0.97 -> 1.00.
    - H100, LayerNorm without parameters: 17000 0.96 -> 1.01, 32768 0.96 -> 1.00, 50000 0.96 ->
      1.00, 65536 0.96 -> 1.00, 100000 0.95 -> 1.01, 131072 0.96 -> 1.00; with a weight: 32768
      0.96 -> 1.00, 65536 0.96 -> 1.00, 131072 0.95 -> 1.01 (padded, not taken: 50000 0.94 ->
      0.98, 100000 0.94 -> 0.90); with both: 32768 0.96 -> 1.00, 65536 0.96 -> 0.99 (padded,
      not taken: 17000 0.92 -> 0.94, 50000 0.93 -> 0.77).
    - H200, RMSNorm with a weight: 20000 0.99 -> 0.99, 32768 0.98 -> 0.99, 65536 0.95 -> 0.99,
      100000 0.89 -> 0.98, 131072 0.93 -> 0.98; without: 65536 0.96 -> 0.98, 131072 0.95 -> 0.98.
    - H200, LayerNorm without parameters: 32768 0.95 -> 0.98, 65536 0.95 -> 0.98, 131072 0.93 ->
      0.99; with a weight: 32768 0.94 -> 0.99, 65536 0.94 -> 1.00, 131072 0.91 -> 0.95; with
      both: 32768 0.95 -> 0.98, 65536 0.90 -> 0.95 (not taken: 100000 0.79 -> 0.56, 131072 0.88
      -> 0.78 over 16 CTAs).
    Clusters holding more a thread lost (8 CTAs at 131072, 64 values: RMSNorm 0.93 / 0.86,
    LayerNorm with a weight 0.94 / 0.85), fewer too (16 CTAs at 17000-32768: 0.35-0.81).
    Padded LayerNorm rows without parameters were measured on the H100 only."""
    vec = forward_config(n, tensors, FORWARD_VALUES).vec
    per_cta = DIRECT_THREADS * FLOAT32_DIRECT_VALUES
    if vec != 4 or not 2 * per_cta < n <= per_cta * NON_PORTABLE_CLUSTER:
        return None
    cfg = direct_cluster_config(n, vec, FLOAT32_DIRECT_VALUES, 4)
    if not rms and parameters and (cfg.padding or parameters == 2 and cfg.cluster > MAX_CLUSTER):
        return None
    return cfg


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
    below): LayerNorm's (`layer`) over 16-bit rows of 2048, 4096 and 8192 (off fast memory; on
    it LAYER_NORM_CLUSTERS takes 8192) columns (bf16
    fraction of copy, H200 / H100: 0.86 / 0.90 -> 0.92 / 0.95 at 2048, 0.89 / 0.93 -> 0.92 /
    0.99 at 4096, 0.89 / 0.95 -> 0.92 / 0.98 at 8192; RMSNorm's lost 1-2 % so): 512 threads cap
    ptxas at 128 registers, 256 let it take 229-231, one CTA per SM; and both norms over Float32
    rows of 768 to 1536 columns, where 82-122 registers let two such CTAs share an SM (RMSNorm /
    LayerNorm at 1024: H200 0.80 / 0.74 -> 0.98 / 0.83, H100 0.90 / 0.87 -> 0.95 / 0.93; at 768
    with the unpadded shape: H100 0.84 / 0.82 -> 0.97 / 0.97; shorter rows lost 1-5 %), and on
    fast memory up to 4096 (RMSNorm / LayerNorm, H200, 2026-11-27: 2048 0.96 / 0.96 -> 0.99 /
    0.98, 3072 0.95 / 0.86 -> 0.96 / 0.95, 4096 0.97 / 0.97 -> 0.99 / 1.00; the H100 lost 0.5-1.5
    % at 2048 and 4096; at 6144 and 8192 a row takes more than 256 threads). (At
    3072 16-bit columns LayerNorm's 256-thread kernel takes 168 registers and measured 0.94 ->
    0.73 on the H100: the rule keeps to the powers of two measured.)
    LayerNorm's over 16-bit rows of 7169-16384 columns (off fast memory from 8193): 128-thread
    CTAs over clusters of 4, 7 or 8 by card (LAYER_NORM_CLUSTERS); over 16-bit rows of 3072,
    6144 and 7168 columns and, on fast memory, Float32 rows of 5120, 6144 and 8192, pairs of CTAs
    (PAIRED_LAYER_NORM); at 768 (and 1536 on fast memory) four rows a 128-thread CTA (below).
    On fast memory (`fast`: an H200) RMSNorm's over unpadded 16-bit rows of 8193-12288 columns
    goes over clusters of two 256-thread CTAs, pipelined (bf16 fraction of
    copy, 512 threads a row -> this, 2026-11-27: 12288 / 16384 0.91 / 0.93 -> 0.96 / 0.96; at
    10000 0.99 -> 0.93, 14000 0.89 -> 0.92; 128-thread CTAs lost everywhere), and past 12288
    rows a multiple of 32 bytes, padded or not, over clusters of 4 (below)."""
    size = max(t.element_size() for t in tensors if t is not None)
    cfg = config_for(n, tensors, BACKWARD_BYTES // size)
    rows = [t for t in tensors if t is not None and t.dim() == 2]
    if fast and not layer and size == 2 and 12288 < n <= 16384 and cfg.vec == 8 \
            and all(t.stride(0) * t.element_size() % 32 == 0 for t in rows):
        # RMSNorm's over 16-bit rows of 12289-16384 columns, each a multiple of 32 bytes: 16
        # values a thread in 256-thread CTAs over clusters of 4 (92 registers, two CTAs per SM),
        # not 32 in one 512-thread CTA (pairs at 16384). bf16 fraction of copy, H200 (2026-11-27,
        # three runs each): 12800 0.89 -> 0.93, 13040 0.89 -> 0.95, 13312 0.88 -> 0.95, 14000 0.91
        # -> 0.99, 14336 0.92 -> 0.99, 15008 0.95 -> 0.97, 15104 0.96 -> 1.01, 15360 0.94 -> 0.97,
        # 16000 0.97 -> 1.00, 16384 0.97 -> 0.99. Rows of an odd multiple of 16 bytes lost (13000
        # 0.85 -> 0.84, 14024 0.88 -> 0.84, 15000 0.90 -> 0.80; not understood), so did 12288
        # (pairs, 0.96 -> 0.94), and the H100 everywhere (12800 0.98 -> 0.93, 16384 0.93 -> 0.93).
        return RowConfig(n, 8, MAX_THREADS // 2, MAX_THREADS // 2, MAX_CLUSTER // 2)
    paired = PAIRED_LAYER_NORM.get(size, {}).get(n, (None, None))[0 if fast else 1]
    if layer and paired and cfg.cluster == 1 and cfg.vec * size == 16:
        return RowConfig(n, *paired, paired[1], 2)
    if layer and size == 2 and 7168 < n <= 16384 and cfg.vec == 8 and (fast or n != 8192):
        _, cluster, vec = [entry for entry in LAYER_NORM_CLUSTERS[fast] if n > entry[0]][-1]
        return RowConfig(n, vec, MAX_THREADS // 4, MAX_THREADS // 4, cluster)
    if fast and not layer and size == 2 and 8192 < n <= 16384 and cfg.vec == 8:
        pair = RowConfig(n, 8, MAX_THREADS // 2, MAX_THREADS // 2, 2)
        if not pair.padding:
            return pair
    if (layer or fast) and size == 2 and cfg.cluster == 2 and cfg.vec == 8 and cfg.threads == MAX_THREADS:
        # 16-bit rows that pairs of 512-thread CTAs hold at 32 values a thread (24577-32768
        # columns): 16 values a thread in 256-thread CTAs over clusters of 8 (a ring of 4 blocks in
        # 72 KB, not 3 in 224 KB; LayerNorm's 128 registers, RMSNorm's 96: two CTAs per SM, not
        # one). bf16 fraction of copy, LayerNorm / RMSNorm (2026-11-27, three runs each): H200
        # 32768 0.86 / 0.91 -> 0.91 / 0.97; H100 32768 0.92 / 0.95 -> 0.98 / 0.90, 28000 0.69-0.72
        # / 0.92 -> 0.97 / 0.93: RMSNorm's keeps the pairs off fast memory. Bounded to three CTAs
        # (80 registers) they read 0.89 / 0.91 on the H200; at 16384 (clusters of 4) and 65536
        # (of 16) the shape lost 1 % to the library's.
        spread = RowConfig(n, 8, MAX_THREADS // 2, MAX_THREADS // 2, MAX_CLUSTER)
        if spread.padding <= cfg.padding:
            return spread
    if (n <= 1024 and not (layer and size == 4 and n == 1024)) or cfg.cluster == 4:
        halved = config_for(n, tensors, BACKWARD_BYTES // 2 // size)
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
        wide = config_for(n, tensors, 2 * BACKWARD_BYTES // size)
        if wide.padding == 0 and wide.cluster == 1 and wide.threads_per_row <= MAX_THREADS // 2:
            return replace(wide, threads=MAX_THREADS // 2)
    if fast and x_size == 4 and n in (1280, 2560) and cfg.cluster == 1 and cfg.vec == 4:
        # Float32 rows of 5 x 2^k columns that 4 vectors a thread padded: half the threads a row,
        # 5 vectors each, the row exactly; LayerNorm's in 512-thread CTAs, RMSNorm's in 256
        # (half_ctas). Fraction of copy, RMSNorm / LayerNorm (H200, 2026-11-27, three runs each):
        # 1280 0.92 / 0.91 -> 0.98 / 1.00, 2560 0.90 / 0.89 -> 0.95 / 0.93 (LayerNorm's in
        # 256-thread CTAs: 0.81 at 1280). The H100 lost at 1280 (0.98 / 0.97 -> 0.97 / 0.95).
        cfg = replace(cfg, threads_per_row=cfg.threads_per_row // 2)
        if layer:
            return replace(cfg, threads=MAX_THREADS)
    half_ctas = (layer and x_size == 2 and n in (2048, 4096, 8192)) or \
        (x_size == 4 and 768 <= n <= (4096 if fast else 1536))
    half_ctas = half_ctas and cfg.cluster == 1 and cfg.threads_per_row <= MAX_THREADS // 2
    cfg = replace(cfg, threads=MAX_THREADS // 2 if half_ctas else MAX_THREADS)
    if layer and x_size == 2 and cfg.cluster == 1 and cfg.vec * size == 16 and cfg.vectors == 3 and not cfg.padding \
            and (cfg.threads_per_row == 32 or fast and cfg.threads_per_row == 64):
        # LayerNorm's over 16-bit rows of 3 16-byte vectors a thread: at 768 columns (32 threads a
        # row) four rows a 128-thread CTA, not sixteen a 512-thread one; at 1536 (64 threads), on
        # fast memory, 6 vectors in 32 threads, four rows a 128-thread CTA too (240 registers, a
        # ring of 2 blocks). bf16 fraction of copy (2026-11-27, three runs each): 768 H200 0.92 ->
        # 0.95, H100 0.93 -> 0.94 (256 threads lost on the H200: 0.83); 1536 H200 0.93 -> 0.99,
        # the H100 lost (0.95 -> 0.94; 256-thread CTAs so 0.92 / 0.95). 128 threads lost at 1280
        # (H200 0.98 -> 0.80, H100 0.94 -> 0.90), and at 2560 on the H200 (0.97 -> 0.84; the H100
        # gained, 0.92 -> 0.95).
        cfg = replace(cfg, threads_per_row=32, threads=MAX_THREADS // 4)
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
