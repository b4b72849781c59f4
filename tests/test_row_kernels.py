"""The row kernels of kernels/softmax.py and kernels/norms.py.

CPU tier: their configurations and their PTX (16-byte accesses, a compiled kernel per N, not
per number of rows). GPU tier: every element against float64 references on fresh seeded inputs
(rows of large magnitude, N not a power of two, N = 1, strided rows), with the outputs' memory
poisoned first: the caching allocator hands out blocks just filled with NaN.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

import cute_torch as cute
from conftest import run_under_sanitizer
from row_checks import check_close, poison_allocator, rand_rows
from cute_torch.kernels import norm_shapes, norms, softmax
from cute_torch.kernels.row_reduce import MAX_N, dynamic_rows, resident_groups, row_config

needs_gpu = pytest.mark.gpu


def _accesses(ptx: str) -> set:
    return set(re.findall(r"(?:ld|st)\.global[.\w]*", ptx))


# -- CPU tier ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,size,vec,per_row", [(4096, 2, 8, 64), (4096, 4, 4, 64), (1000, 2, 8, 32),
                                                (1001, 2, 1, 32), (1, 4, 1, 8), (32768, 2, 8, 512)])
def test_row_config_picks_vectors_and_threads(n, size, vec, per_row):
    cfg = row_config(n, size)
    assert (cfg.vec, cfg.threads_per_row) == (vec, per_row)
    assert cfg.vectors * cfg.vec <= 64 and cfg.threads % cfg.threads_per_row == 0
    assert cfg.vectors * cfg.threads_per_row * cfg.vec >= n


def test_row_config_narrows_the_vector_for_unaligned_rows():
    assert row_config(4096, 2, row_stride=4100).vec == 4
    assert row_config(4096, 2, data_ptr=2).vec == 1
    with pytest.raises(ValueError, match="rows of 1 to"):
        row_config(MAX_N + 1, 2)


@pytest.mark.parametrize("n,max_values,cluster,per_row", [(8192, 16, 1, 512), (16384, 16, 2, 512),
                                                           (32768, 16, 4, 512), (32768, 32, 2, 512),
                                                           (262144, 32, 8, 512), (200000, 32, 8, 512)])
def test_rows_too_long_for_one_cta_are_split_over_a_cluster(n, max_values, cluster, per_row):
    cfg = row_config(n, 2, max_values=max_values, max_cluster=8)
    assert (cfg.cluster, cfg.threads_per_row) == (cluster, per_row)
    # At the largest cluster a thread may hold more than asked (up to a CTA's 32768 / 512).
    assert cfg.vectors * cfg.vec <= (max_values if cluster < 8 else MAX_N // 512)
    assert cfg.part * cfg.cluster >= n > cfg.part * (cfg.cluster // 2)   # the smallest cluster that holds it
    # The guards: a vector is predicated exactly when the last CTA's copy of it can pass N.
    last = [(cfg.cluster - 1) * cfg.part + (i + 1) * cfg.threads_per_row * cfg.vec > n for i in range(cfg.vectors)]
    assert [cfg.guarded(i) for i in range(cfg.vectors)] == last
    if n <= MAX_N:
        assert row_config(n, 2, max_values=max_values).cluster == 1   # only kernels written for clusters get one
    with pytest.raises(ValueError, match="rows of 1 to 262144"):
        row_config(262145, 2, max_cluster=8)


@pytest.mark.parametrize("rms", [True, False])
def test_cluster_norms_trade_partial_sums_through_distributed_shared_memory(rms):
    """A 65536-column row over two CTAs (eight backward): the kernels launch as clusters and
    store their partial sums into each CTA's shared memory with st.async, counted on the
    receiver's mbarrier; ptxas takes them (sm_90a) without spilling."""
    x, w = torch.empty(8, 65536, dtype=torch.bfloat16), torch.empty(65536, dtype=torch.bfloat16)
    stat = torch.empty(8)
    fwd_cfg = norm_shapes.config_for(65536, (x, w), norm_shapes.FORWARD_VALUES)
    bwd_cfg = norm_shapes.backward_config(65536, (x, w))
    assert (fwd_cfg.cluster, bwd_cfg.cluster) == (2, 8)
    mean = None if rms else dynamic_rows(stat)
    fwd = cute.compile(norms._forward, dynamic_rows(x), None, w, None if rms else w, dynamic_rows(x), None,
                       dynamic_rows(stat), mean, 1e-6, 1, fwd_cfg, rms, 1, options={"arch": "sm_90a"})
    part = torch.empty(4, 65536)
    bwd = cute.compile(norms._backward, dynamic_rows(x), w, dynamic_rows(x), dynamic_rows(stat), mean, dynamic_rows(x),
                       dynamic_rows(part), None if rms else dynamic_rows(part), w, None if rms else w, 1, bwd_cfg,
                       options={"arch": "sm_90a"})
    for kernel in (fwd, bwd):
        ptx = kernel.__ptx__
        assert "mapa.shared::cluster.u32" in ptx
        assert "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32" in ptx and "mbarrier.try_wait" in ptx
        # One cluster barrier, at the start: the reductions wait on their own mbarriers only.
        assert ptx.count("barrier.cluster.arrive") == 1 and ptx.count("barrier.cluster.wait") == 1
        assert "ld.global.v4.b32" in _accesses(ptx)
        assert all(k.get("spill_stores") == 0 for k in kernel.kernels), kernel.kernels
    # The backward stages x and dy in shared memory, 16 bytes per cp.async, blocks of rows ahead,
    # and sums each row a row ahead of finishing it (its exchange pipelined over four slot sets):
    # it waits for the ring's next row, not just this one.
    stages, _ = norm_shapes.backward_ring(bwd_cfg, 2, 2, 2)
    assert stages >= 3 and norm_shapes.pipelined_backward(bwd_cfg, stages)
    assert "cp.async.cg.shared.global" in bwd.__ptx__
    assert re.search(rf"cp\.async\.wait_group\s+{stages - 2};", bwd.__ptx__)
    assert bwd.__ptx__.count("mbarrier.init") == 4


@pytest.mark.parametrize("log", [False, True])
def test_softmax_keeps_rows_up_to_262144_in_registers_over_a_cluster(log):
    x = torch.empty(4, 131072, dtype=torch.bfloat16)
    cfg = softmax._config(x, x)
    assert cfg.cluster == 8 and cfg.vectors * cfg.vec == 32
    rows, hopper = dynamic_rows(x), {"arch": "sm_90a"}
    walk = softmax.forward_walk(cfg, 16, log, False)
    fwd = cute.compile(softmax._forward, rows, rows, 1, cfg, log, walk, options=hopper)
    for kernel in (fwd, cute.compile(softmax._backward, rows, rows, rows, 1, cfg, log, False, options=hopper)):
        ptx = kernel.__ptx__
        assert "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32" in ptx
        assert {a for a in _accesses(ptx) if ".v" in a} == {"ld.global.v4.b32", "st.global.v4.b32"}
        assert all(k.get("spill_stores") == 0 and k.get("cluster_dims") == [8, 1, 1] for k in kernel.kernels)
    # The forward's one trip through distributed shared memory per row (one mbarrier wait),
    # pipelined over a cluster of 8: sends run one row ahead of receives, over four sets of slots.
    assert fwd.__ptx__.count("mbarrier.try_wait") == 1
    assert fwd.__ptx__.count("mbarrier.init") == 4 and walk == "persistent"
    # Past 131072 columns a cluster of 8 holds 64 values a thread; where ptxas spills that kernel
    # a (non-portable) cluster of 16 holding 32 takes the row (row_reduce.unless_it_spills).
    # ptxas today (sm_90a): log_softmax's forward spills over 8 (92 bytes at 262144 bf16),
    # softmax's backward too (96), softmax's forward and log_softmax's backward not (softmax's
    # forward takes 16 anyway: only 16 walk); Float32 softmax at 200000 spills neither way,
    # log_softmax's forward does (204). At bf16 200000 16 CTAs would leave 31 % of the row as
    # padding: 8, spilled or not; at 163840 20 % where 8 leave none: no walk rule there.
    for dtype, n, log, clusters in ((torch.bfloat16, 262144, True, (16, 8)), (torch.bfloat16, 262144, False, (16, 16)),
                                    (torch.float32, 200000, False, (8, 8)), (torch.float32, 200000, True, (16, 8)),
                                    (torch.bfloat16, 200000, True, (8, 8)), (torch.bfloat16, 200000, False, (8, 8)),
                                    (torch.bfloat16, 163840, False, (8, 8))):
        wide = torch.empty(4, n, dtype=dtype)
        rows = dynamic_rows(wide)
        fwd_cfg, _ = softmax.forward_shape((rows, rows), (wide, wide), log, 0, hopper)
        bwd_cfg, _ = softmax.backward_shape((rows, rows, rows), (wide, wide, wide), log, 0, hopper)
        assert (fwd_cfg.cluster, bwd_cfg.cluster) == clusters, (dtype, n, log)
        assert all(c.vectors * c.vec <= 32 for c in (fwd_cfg, bwd_cfg) if c.cluster == 16)
    four = softmax._config(torch.empty(4, 65536, dtype=torch.bfloat16))     # a cluster of 4: one row per CTA
    assert four.cluster == 4 and softmax.forward_walk(four, 16, True, False) == "persistent"
    assert softmax.forward_walk(four, 16, False, False) is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_cluster_rows_pipeline_their_exchanges_within_the_register_budget(dtype):
    """Over a cluster, 16-bit log_softmax and the norm backward trade one row ahead (four slot
    sets and barriers) without spilling; fp32 log_softmax, whose two rows would spill, keeps
    one row per CTA (two sets)."""
    x, w, stat = torch.empty(8, 65536, dtype=dtype), torch.empty(65536, dtype=dtype), torch.empty(8)
    rows, hopper = dynamic_rows(x), {"arch": "sm_90a"}
    cfg = softmax._config(x, x)
    walk = softmax.forward_walk(cfg, x.element_size() * 8, True, False)
    fwd = cute.compile(softmax._forward, rows, rows, 1, cfg, True, walk, options=hopper)
    assert (walk is not None) == (dtype == torch.float16)
    assert fwd.__ptx__.count("mbarrier.init") == (4 if dtype == torch.float16 else 2)
    bwd_cfg = norm_shapes.backward_config(65536, (x, x, w, x))
    stages, _ = norm_shapes.backward_ring(bwd_cfg, x.element_size(), x.element_size(), w.element_size())
    assert norm_shapes.pipelined_backward(bwd_cfg, stages)
    part = dynamic_rows(torch.empty(4, 65536))
    bwd = cute.compile(norms._backward, rows, w, rows, dynamic_rows(stat), dynamic_rows(stat), rows, part, part, w, w,
                       1, bwd_cfg, options=hopper)
    assert bwd.__ptx__.count("mbarrier.init") == 4
    assert all(k.get("spill_stores") == 0 for k in fwd.kernels + bwd.kernels)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_softmax_and_norms_read_and_write_16_bytes_at_a_time(dtype):
    x = torch.empty(96, 4096, dtype=dtype)
    cfg = softmax._config(x, x)
    vec = "v4.b32" if dtype == torch.bfloat16 else "v4.f32"
    ptx = cute.compile(softmax._forward, dynamic_rows(x), dynamic_rows(x), 1, cfg, False, None).__ptx__
    assert {f"ld.global.{vec}", f"st.global.{vec}"} == {a for a in _accesses(ptx) if ".v" in a}
    assert "ex2.approx" in ptx and "max.f32" in ptx and "shfl.sync.bfly" in ptx
    w, rstd = torch.empty(4096, dtype=dtype), torch.empty(96)
    ptx = cute.compile(norms._forward, dynamic_rows(x), None, w, None, dynamic_rows(x), None, dynamic_rows(rstd),
                       None, 1e-6, 1, norm_shapes.config_for(4096, (x, w), norm_shapes.FORWARD_VALUES), True, 1).__ptx__
    assert f"ld.global.{vec}" in _accesses(ptx) and "rsqrt.approx" in ptx


@pytest.mark.parametrize("residual", [False, True])
def test_norm_forwards_at_16384_columns_fetch_rows_ahead(residual):
    """16384-column rows: LayerNorm's bf16 forward with a residual walks blocks of rows, each
    thread loading its part of the next row and residual into registers before the current
    row's reductions, so its rows are loaded twice in the code (before the loop and in it) and
    nothing goes through shared memory; without one it reads one row per CTA, its statistics in
    one trip (norm_shapes.one_trip_statistics); the fp32 one with a residual copies rows into a shared-memory ring by
    cp.async blocks ahead (forward_ring); the bf16 RMSNorm without a residual reads one row per
    CTA (two CTAs per SM)."""
    def compiled(dtype, rms):
        x, w = torch.empty(64, 16384, dtype=dtype), torch.empty(16384, dtype=dtype)
        stat = torch.empty(64)
        res = dynamic_rows(x) if residual else None
        values, walk = norm_shapes.forward_plan(16384, x.element_size(), rms, residual)
        cfg = norm_shapes.config_for(16384, (x, w), values)
        kernel = cute.compile(norms._forward, dynamic_rows(x), res, w, None if rms else w, dynamic_rows(x), res,
                              dynamic_rows(stat), None if rms else dynamic_rows(stat), 1e-6, 1, cfg, rms, walk,
                              options={"arch": "sm_90a"})
        assert all(k.get("spill_stores") == 0 for k in kernel.kernels)
        return cfg, walk, kernel.__ptx__
    inputs = 2 if residual else 1
    cfg, walk, ptx = compiled(torch.bfloat16, False)
    if residual:
        assert walk > 1 and "cp.async" not in ptx and "ld.shared.v4.b32" in ptx     # (the staged weight and bias)
        # (the weight and bias are read once, into shared memory)
        assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == (2 * inputs + 2) * cfg.vectors
    else:   # one row per CTA, its mean and variance in one trip through shared memory: one barrier
        assert walk == 1 and "cp.async" not in ptx and ptx.count("bar.sync") == 1
        assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == 3 * cfg.vectors   # x, then weight and bias
    cfg, walk, ptx = compiled(torch.bfloat16, True)
    assert (walk > 1) == residual and "cp.async" not in ptx
    assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == ((2 if residual else 1) * inputs + 1) * cfg.vectors


def test_padded_layer_norm_rows_with_parameters_walk_in_their_measured_shapes():
    """norm_shapes.forward_walk: LayerNorm's padded 16-bit rows with a weight (and bias) planned
    at 32 values a thread (on fast memory at 32769-65535 columns over clusters of 4; from 65536 on
    every card over 8) walk at 64 where that shape pads the row too (over clusters of 2 and 4).
    Rows 64 values cover exactly, RMSNorm's, a residual, rows without parameters and rows past
    131072 keep forward_plan's."""
    def walk(n, params=2, fast=True, rms=False, residual=False):
        x = torch.empty(4, n, dtype=torch.bfloat16)
        w = x[0]
        tensors = (x, x if residual else None, w if params else None, w if params == 2 and not rms else None, x,
                   x if residual else None)
        cfg, values, blocks = norm_shapes.forward_walk(n, tensors, rms, fast)
        return (cfg.cluster, cfg.threads, values, blocks)
    for n in (36000, 40000, 50000, 60000):
        for params in (1, 2):
            for fast in (True, False):
                assert walk(n, params, fast) == (2, 512, 64, 8), (n, params, fast)
    assert walk(40960) == walk(49152) == walk(57344) == (4, 512, 32, 8)    # 64 values cover them: pipelined
    assert walk(40000, 0) == (2, 512, 64, 8)                               # (forward_plan's without parameters)
    for n in (70000, 80000, 100000, 120000, 131000):
        for params, fast in ((1, True), (2, True), (2, False), (1, False)):
            assert walk(n, params, fast) == (4, 512, 64, 8), (n, params, fast)
        assert walk(n, 0) == walk(n, residual=True) == (8, 512, 32, 8), n
        assert walk(n, 1, rms=True) == (4, 512, 64, 8), n                  # (RMSNorm's own plan)
    assert walk(131072) == walk(98304) == (8, 512, 32, 8)                  # unpadded: pipelined over 8
    assert walk(200000) == (8, 512, 32, 8)                                 # (64 values would need 8 too)
    assert walk(100001)[2:] == (32, 8)                                     # odd rows, narrower vectors: not measured
    assert walk(20000) == (1, 512, 64, 4)                                   # one CTA a row: unchanged


@pytest.mark.parametrize("key", sorted(set(norm_shapes.FORWARD_WALKS) | {k[:3] for k in norm_shapes.FAST_MEMORY_WALKS}),
                         ids=lambda k: f"{8 * k[0]}bit-{'rms' if k[1] else 'layer'}{'-residual' if k[2] else ''}")
def test_every_walking_forward_plan_compiles_without_spilling(key):
    """Each walk forward_plan ships (element size, RMSNorm, residual; on fast memory or not) from
    2048 to 131072 columns fits its registers: a walk holds the next rows beside the current
    ones, and a spill would cost more than the walk wins."""
    size, rms, residual = key
    dtype = {2: torch.bfloat16, 4: torch.float32}[size]
    plans = {norm_shapes.forward_plan(n, size, rms, residual, fast, params) + (n,)
             for n in (2048, 4096, 8192, 12288, 16384, 32768, 65536, 131072) for fast in (False, True)
             for params in (0, 1, 2)}
    for values, walk, n in sorted(plans):
        if walk == 1:
            continue
        x, w, stat = torch.empty(64, n, dtype=dtype), torch.empty(n, dtype=dtype), torch.empty(64)
        res = dynamic_rows(x) if residual else None
        kernel = cute.compile(norms._forward, dynamic_rows(x), res, w, None if rms else w, dynamic_rows(x), res,
                              dynamic_rows(stat), None if rms else dynamic_rows(stat), 1e-6, 1,
                              norm_shapes.config_for(n, (x, w), values), rms, walk, options={"arch": "sm_90a"})
        assert all(k.get("spill_stores") == 0 for k in kernel.kernels), (n, values, walk, kernel.kernels)


def test_pipelined_walks_take_persistent_grids_where_measured():
    """LayerNorm's 16-bit forward over a cluster (one exchange a row: one_trip_statistics) walks
    pipelined on a persistent grid, RMSNorm's and those with a residual or Float32 rows do not;
    softmax's pipelined walks are persistent over clusters of 4 and 8, not 2 (the H100 lost),
    except on fast memory (an H200), where every 16-bit cluster row walks persistent."""
    for n, want in ((32768, False), (65536, True), (131072, True)):
        values, walk = norm_shapes.forward_plan(n, 2, False, False)
        cfg = norm_shapes.config_for(n, (torch.empty(1, n, dtype=torch.bfloat16),), values)
        assert norm_shapes.pipelined_forward(cfg, walk, 16, False, False) == want, n
        assert not norm_shapes.pipelined_forward(cfg, walk, 16, True, False) and not norm_shapes.pipelined_forward(
            cfg, walk, 16, False, True)
    for n, log, want in ((16384, True, None), (32768, True, "groups"), (32768, False, None),
                         (65536, True, "persistent"), (131072, False, "persistent"), (65536, False, None)):
        x = torch.empty(1, n, dtype=torch.bfloat16)
        assert softmax.forward_walk(softmax._config(x, x), 16, log, False) == want, (n, log)
        fast = None if n == 16384 else "persistent"
        assert softmax.forward_walk(softmax._config(x, x), 16, log, True) == fast, (n, log)
    x = torch.empty(1, 65536)
    assert softmax.forward_walk(softmax._config(x, x), 32, True, True) is None


def test_forward_plans_walk_long_rows():
    """forward_plan: the last table entry reached applies; short rows keep one block per CTA."""
    assert norm_shapes.forward_plan(4096, 2, True, False) == (norm_shapes.FORWARD_VALUES, 1)
    assert norm_shapes.forward_plan(16384, 2, False, False) == (64, 1)      # one-trip statistics: one row per CTA
    assert norm_shapes.forward_plan(32768, 2, False, False) == (64, 8)
    assert norm_shapes.forward_plan(16384, 2, False, True) == (32, 4)
    assert norm_shapes.forward_plan(65536, 2, False, True) == (32, 8)
    assert norm_shapes.forward_plan(131072, 2, False, False) == (32, 8)
    assert norm_shapes.forward_plan(131072, 4, False, True) == (norm_shapes.forward_values(131072, False, True), 1)
    # Fast memory (an H200) adds its own walks, merged by N: RMSNorm at 32768 walks 4 blocks.
    assert norm_shapes.forward_plan(32768, 2, True, False) == (64, 1)
    assert norm_shapes.forward_plan(32768, 2, True, False, fast=True, params=1) == (64, 4)     # (its weight)
    assert norm_shapes.forward_plan(65536, 2, True, False, fast=True, params=1) == (64, 8)
    # LayerNorm at 16384 walks there only with a weight or bias (staged once per CTA),
    assert norm_shapes.forward_plan(16384, 2, False, False, fast=True) == (64, 4)
    # and at 32768 with them over clusters of 2 (its entry follows FORWARD_WALKS' of the same N).
    assert norm_shapes.forward_plan(32768, 2, False, False, fast=True) == (32, 8)
    assert norm_shapes.forward_plan(32768, 2, False, False, fast=True, params=0) == (64, 8)
    assert norm_shapes.forward_plan(16384, 2, False, False, fast=True, params=0) == (64, 1)
    # Below 16384 one row per CTA, with or without them (unwalked_ctas bounds those CTAs).
    assert norm_shapes.forward_plan(12288, 2, False, False, fast=True) == (64, 1)
    assert norm_shapes.forward_plan(14336, 2, False, False, fast=True) == (64, 1)
    assert norm_shapes.forward_plan(12288, 2, False, False, fast=True, params=1) == (64, 1)
    assert norm_shapes.forward_plan(8192, 2, False, False, fast=True) == (64, 1)


def test_rows_too_long_for_registers_are_read_in_chunks_16_bytes_at_a_time():
    from cute_torch.kernels.row_chunks import chunk_config
    x = torch.empty(4, 131072, dtype=torch.bfloat16)
    ptx = cute.compile(softmax._long_forward, dynamic_rows(x), dynamic_rows(x), *chunk_config(x, x), False).__ptx__
    assert {a for a in _accesses(ptx) if ".v" in a} == {"ld.global.v4.b32", "st.global.v4.b32"}
    # Rows of an odd length: peeled (16-byte vectors from each row's first 16-byte boundary on)
    # when the operands split at the same columns, else the vector divides the row length.
    odd = x[:, :130001]
    cfg, exact = chunk_config(odd, odd)
    assert (cfg.vec, cfg.peeled, exact) == (8, True, False)
    ptx = cute.compile(softmax._long_forward, dynamic_rows(odd), dynamic_rows(odd), cfg, exact, False).__ptx__
    assert {a for a in _accesses(ptx) if ".v" in a} == {"ld.global.v4.b32", "st.global.v4.b32"}
    assert chunk_config(odd, torch.empty(4, 130001, dtype=torch.bfloat16))[0].vec == 1    # other row strides
    assert chunk_config(x[:, 1:130002], x[:, 1:130002])[0].vec == 1                       # unaligned starts


def test_one_kernel_serves_every_number_of_rows():
    a, b = torch.empty(7, 512), torch.empty(70000, 512)
    ka = cute.compile(softmax._forward, dynamic_rows(a), dynamic_rows(a), 1, softmax._config(a, a), False, None)
    kb = cute.compile(softmax._forward, dynamic_rows(b), dynamic_rows(b), 1, softmax._config(b, b), False, None)
    assert ka.__ptx__ == kb.__ptx__


# -- GPU tier ----------------------------------------------------------------------------------------

# Past 32768 the rows split over clusters (40000: the last CTA's part runs past N; past 131072
# over 16 CTAs), past 262144 they take the chunked path (300001: not a multiple of the chunk),
# and so do 16-bit rows past 32768 of an odd length (50257: peeled chunks; Float32 ones stay in
# registers).
SHAPES = [(1, 1), (5, 7), (300, 256), (129, 1000), (64, 4096), (3, 6000), (17, 32768), (3, 40000), (3, 50257),
          (2, 131072), (3, 200000), (2, 262144), (2, 300001)]


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("m,n", SHAPES)
def test_softmax_forward_and_backward(m, n, log, dtype):
    seed = m * 7 + n
    x = rand_rows((m, n), seed, dtype, scale=30.0)           # large logits: the max subtraction matters
    dy = rand_rows((m, n), seed + 1, dtype)
    ref = torch.log_softmax if log else torch.softmax
    poison_allocator()
    y = softmax.softmax(x, log=log)
    check_close(y, ref(x.double(), -1), dtype, "forward")
    poison_allocator()
    dx = softmax.softmax_backward(y, dy, log=log)
    yd = y.double().requires_grad_()
    # The reference gradient at our y (the backward reads y), in float64.
    want = (dy.double() - torch.exp(yd) * dy.double().sum(-1, keepdim=True)) if log else \
        yd * (dy.double() - (dy.double() * yd).sum(-1, keepdim=True))
    check_close(dx, want.detach(), dtype, "backward")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("m,n", [(900, 12288), (300, 16384), (700, 32768), (300, 65536), (60, 131072),
                                 (40, 262144)])
def test_softmax_forward_over_cluster_rows_many_rows(m, n, log, dtype):
    """16-bit rows over a cluster, many rows: one row per cluster in quack's shape from 8192 up
    to 131072 columns (softmax.direct_shape, many waves of clusters) and the pipelined walk on a grid of
    the clusters that run at once past it (262144: softmax.forward_walk, each cluster walking
    several rows, both slot sets and the walk's last rows), every element against float64."""
    x = rand_rows((m, n), m + n, dtype, scale=30.0)
    poison_allocator()
    y = softmax.softmax(x, log=log)
    check_close(y, (torch.log_softmax if log else torch.softmax)(x.double(), -1), dtype, "forward")


@needs_gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("m,n", [(300, 70000), (200, 100000), (150, 110000), (120, 131072)])
def test_softmax_forward_over_float32_cluster_rows_in_quacks_shape(m, n, log):
    """Float32 rows one per cluster of 8 or 16 CTAs (softmax.float32_direct_shape; padded rows at
    70000, 100000 and 110000), many waves of clusters, every element against float64."""
    x = rand_rows((m, n), m + n, torch.float32, scale=30.0)
    poison_allocator()
    y = softmax.softmax(x, log=log)
    check_close(y, (torch.log_softmax if log else torch.softmax)(x.double(), -1), torch.float32, "forward")


@needs_gpu
@pytest.mark.parametrize("log", [False, True])
def test_softmax_walks_16bit_cluster_rows_of_narrower_vectors(log):
    """16-bit rows whose stride rules out 16-byte vectors (32772 elements apart) keep
    forward_walk's shapes over a cluster (not direct_shape's), every element against float64."""
    x = rand_rows((300, 32772), 11, torch.bfloat16, scale=30.0)[:, :32768]
    assert softmax.direct_shape((x, x)) is None and softmax._config(x, x).cluster == 2
    poison_allocator()
    y = softmax.softmax(x, log=log)
    check_close(y, (torch.log_softmax if log else torch.softmax)(x.double(), -1), torch.bfloat16, "forward")


@needs_gpu
def test_fast_memory_tells_an_h200_from_an_h100():
    """row_reduce.fast_memory (softmax.forward_walk's `fast`) from the device's memory clock and
    bus width: an H200 (4.8 TB/s over 132 SMs) has it, an H100 SXM (3.35 TB/s) does not."""
    from cute_torch.kernels.row_reduce import fast_memory
    name = torch.cuda.get_device_name()
    if "H200" not in name and "H100" not in name:
        pytest.skip(f"no measured expectation for {name}")
    assert fast_memory(torch.cuda.current_device()) == ("H200" in name), name


@needs_gpu
@pytest.mark.parametrize("n", [40000, 131072])
def test_softmax_over_a_cluster_masks_whole_parts_of_rows(n):
    """A causal-style mask over rows split across a cluster: some CTAs' parts are all -inf,
    others partly; the parts' (max, sum) combine to torch's softmax, the masked columns
    exactly 0 (log_softmax: -inf), also in a row whose values are all near -1000."""
    m = 6
    x = rand_rows((m, n), n, torch.bfloat16, scale=30.0)
    x[0] -= 1000.0                                          # exp(0 - max) of a masked part would overflow
    for r in range(m):
        x[r, (r + 1) * n // (m + 1):] = -math.inf         # row r keeps its first (r + 1) / (m + 1)
    for log in (False, True):
        poison_allocator()
        y = softmax.softmax(x, log=log)
        want = (torch.log_softmax if log else torch.softmax)(x.double(), -1)
        masked = torch.isinf(x.cpu())
        got = y.double().cpu()
        assert (got[masked] == (-math.inf if log else 0.0)).all()
        check_close(got.masked_fill(masked, 0.0), want.cpu().masked_fill(masked, 0.0), torch.bfloat16, "unmasked")


@needs_gpu
def test_softmax_reads_strided_rows_and_any_leading_shape():
    wide = rand_rows((4, 50, 1024), 3, torch.bfloat16)
    x = wide[..., :1000]                                  # rows 2048 bytes apart, 2000 bytes long
    poison_allocator()
    check_close(softmax.softmax(x), torch.softmax(x.double(), -1), torch.bfloat16, "strided")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("rms", [True, False])
@pytest.mark.parametrize("m,n", [(900, 12288), (300, 16384), (300, 32768), (7, 40000), (3, 100000), (9, 131072)])
def test_norm_forward_in_quacks_shape(m, n, rms, weight, dtype):
    """norm_shapes.direct_shape's forward (one row per cluster, x staged and read again from shared
    memory, the weight and bias held in registers): many rows, a last CTA's part past N (40000,
    100000: RMSNorm's; LayerNorm's keep their walks there, and with weight and bias past two
    CTAs), with and without weight and bias; y, rstd and mean against float64."""
    x = rand_rows((m, n), m + n, dtype, scale=3.0) + 1.5
    w = rand_rows((n,), n, dtype) if weight else None
    b = rand_rows((n,), n + 1, dtype) if weight and not rms else None
    poison_allocator()
    y, _, rstd, mean = norms.norm_forward(x, w, b, None, eps=1e-5, rms=rms)
    xd = x.double()
    wd, bd = (None if t is None else t.double() for t in (w, b))
    want = F.rms_norm(xd, (n,), wd, 1e-5) if rms else F.layer_norm(xd, (n,), wd, bd, 1e-5)
    check_close(y, want, dtype, "y")
    var = xd.pow(2).mean(-1) if rms else xd.var(-1, unbiased=False)
    check_close(rstd, torch.rsqrt(var + 1e-5), torch.float32, "rstd")
    if not rms:
        check_close(mean, xd.mean(-1), torch.float32, "mean")


NORM_CASES = [(True, True, False, False), (True, False, False, True), (False, True, True, False),
              (False, True, True, True), (False, False, False, False)]


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rms,weight,bias,residual", NORM_CASES)
# Long rows split over clusters (kernels/row_reduce.py); 300 rows of 16384 walk the forward's
# blocks (fetching rows ahead) and the backward's shared-memory ring over several blocks (both
# slot sets; 30000's backward over clusters of 8 256-thread CTAs); at 200000 the eighth CTA holds
# only columns past N; 2560 takes 8-byte vectors backward (RMSNorm's 14000 and 16384 over
# clusters of 4 on fast memory), 3072 RMSNorm's 48 values
# per thread, 1024 Float32 LayerNorm's 16 (four rows a CTA); Float32 RMSNorm's backward at
# 3072-8192 bounded to two 512-thread CTAs per SM (on fast memory 256-thread CTAs up to 4096);
# LayerNorm's over pairs of CTAs at 3072, 6144 and 7168 (Float32 5120-8192 on fast memory);
# Float32 rows of 1280 and 2560 at 5 vectors a thread on fast memory; Float32 LayerNorm's
# forward at 12288 bounded to two CTAs per SM; RMSNorm's backward at 768 unbounded; 16-bit
# forwards at 1536 and 3072 in twice the threads a row; LayerNorm's 16-bit backward at 768 (1536
# on fast memory) four rows a 128-thread CTA, at 7680-16384 over 128-thread clusters of 4, 7 and 8
# (LAYER_NORM_CLUSTERS: 16-byte or 8-byte vectors per card); 16-bit LayerNorm's padded rows past
# 32768 (50000 and 100000; without parameters at 100000 in the direct shape).
@pytest.mark.parametrize("m,n", [(1, 1), (60, 768), (77, 1000), (101, 1024), (50, 1280), (45, 1536), (40, 2560),
                                 (33, 3072), (256, 4096), (25, 5120), (20, 6144), (30, 7168), (30, 7680), (9, 8192),
                                 (20, 9216), (7, 10000), (20, 10240), (90, 12288), (25, 12800), (5, 14000), (11, 14336),
                                 (10, 15360), (3, 32768), (70, 30000), (300, 16384), (5, 65536), (3, 131072),
                                 (2, 200000), (150, 100000), (64, 50000)])
def test_norm_forward_and_backward(m, n, rms, weight, bias, residual, dtype):
    if rms and bias:
        pytest.skip("RMSNorm has no bias")
    seed = m + n * 3 + rms
    x = rand_rows((m, n), seed, dtype, scale=3.0) + 1.5       # an offset: LayerNorm's mean matters
    w = rand_rows((n,), seed + 1, dtype) if weight else None
    b = rand_rows((n,), seed + 2, dtype) if bias else None
    # A float32 residual stream (mixed dtypes): the sum the forward normalizes is the residual
    # out exactly, which the backward reads back.
    r = rand_rows((m, n), seed + 3, torch.float32) if residual else None
    dy = rand_rows((m, n), seed + 4, dtype)
    eps = 1e-5
    poison_allocator()
    y, r_out, rstd, mean = norms.norm_forward(x, w, b, r, eps=eps, rms=rms)
    xs = x.double() + (r.double() if residual else 0)
    leaves = [xs.clone().requires_grad_()] + [t.double().requires_grad_() for t in (w, b) if t is not None]
    wd = leaves[1] if weight else None
    bd = leaves[-1] if bias else None
    want = (F.rms_norm(leaves[0], (n,), wd, eps) if rms else F.layer_norm(leaves[0], (n,), wd, bd, eps))
    check_close(y, want.detach(), dtype, "y")
    if residual:
        check_close(r_out, xs, torch.float32, "residual out")
    var = xs.pow(2).mean(-1) if rms else xs.var(-1, unbiased=False)
    check_close(rstd, torch.rsqrt(var + eps), torch.float32, "rstd")
    want.backward(dy.double())
    poison_allocator()
    x_in = r_out if residual else x
    dx, dw, db = norms.norm_backward(x_in, w, dy, rstd, mean, weight_grad=weight, bias_grad=bias)
    check_close(dx, leaves[0].grad, dtype, "dx")
    if weight:
        check_close(dw, leaves[1].grad, dtype, "dweight")
    if bias:
        check_close(db, leaves[-1].grad, dtype, "dbias")


@needs_gpu
@pytest.mark.parametrize("n", [65536, 200000])
def test_layer_norm_over_a_cluster_keeps_rows_far_from_zero_exact(n):
    """Rows at 1000 + N(0, 1) (fp32) split over 2 and 8 CTAs: the two-pass variance (the mean
    traded first, then the squares about it) keeps fp32 precision (E[x^2] - mean^2 would lose
    it: 1e6 - 1e6)."""
    x = rand_rows((3, n), n, torch.float32) + 1000.0
    poison_allocator()
    y, _, rstd, mean = norms.norm_forward(x, None, None, None, eps=1e-5, rms=False)
    xd = x.double()
    check_close(mean, xd.mean(-1), torch.float32, "mean")
    check_close(rstd, torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5), torch.float32, "rstd")
    # y = (x - mean) * rstd inherits x's own rounding at 1000 (an ulp of 6e-5), whatever the sums.
    torch.testing.assert_close(y.double().cpu(), F.layer_norm(xd, (n,), eps=1e-5).cpu(), rtol=0, atol=2e-4)


@needs_gpu
@pytest.mark.parametrize("n", [1024, 2048, 8192, 16384, 65536, 131072, 50000, 100000, 200000])
def test_layer_norm_statistics_in_one_trip_keep_rows_far_from_zero_exact(n):
    """bf16 rows at 1000 + 8 N(0, 1) (one_trip_statistics: each thread's mean and squared
    deviations merged by Chan's formula, over a cluster's parts too; padded rows: 100000 by the
    direct shape, each warp's count of columns with its partials; 50000 and 200000 by walks):
    mean and rstd to fp32 precision against float64 over the same bf16 values (E[x^2] - mean^2
    would lose them: 1e6 - 1e6)."""
    x = (rand_rows((40, n), n, torch.float32) * 8.0 + 1000.0).bfloat16()
    poison_allocator()
    y, _, rstd, mean = norms.norm_forward(x, None, None, None, eps=1e-5, rms=False)
    xd = x.double()
    check_close(mean, xd.mean(-1), torch.float32, "mean")
    check_close(rstd, torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5), torch.float32, "rstd")
    check_close(y, F.layer_norm(xd, (n,), eps=1e-5), torch.bfloat16, "y")


@needs_gpu
@pytest.mark.parametrize("n,params,fast", [(70000, 0, None), (100000, 0, None), (120000, 0, None), (34000, 1, True),
                                          (40000, 2, True), (50000, 2, False), (80000, 1, None), (100000, 2, None)])
def test_layer_norm_padded_rows(n, params, fast, monkeypatch):
    """LayerNorm's forward over rows some threads hold padding of: without parameters in quack's
    shape (norm_shapes.direct_shape, clusters of 8: each warp's count of columns travels with its
    (mean, M2)); with a weight (and bias) walking (norm_shapes.forward_walk: 64 values a thread
    over clusters of 2 on fast memory or not, 34000's last vectors mostly past N; past 65536 over
    clusters of 4), 33 rows: a walk's last group short. y, mean and rstd against float64, rows
    offset from zero."""
    if fast is not None:
        monkeypatch.setattr(norms, "fast_memory", lambda device: fast)
    x = rand_rows((33, n), n + 5, torch.bfloat16, scale=3.0) + 1.5
    w, b = (rand_rows((n,), n + 6 + i, torch.bfloat16) if params > i else None for i in range(2))
    cfg = norm_shapes.direct_shape(n, (x, None, w, b, x, None), False, fast=True)
    assert bool(cfg is not None and cfg.padding) == (params == 0), cfg
    poison_allocator()
    y, _, rstd, mean = norms.norm_forward(x, w, b, None, eps=1e-5, rms=False)
    xd = x.double()
    wd, bd = (None if t is None else t.double() for t in (w, b))
    check_close(y, F.layer_norm(xd, (n,), wd, bd, eps=1e-5), torch.bfloat16, "y")
    check_close(mean, xd.mean(-1), torch.float32, "mean")
    check_close(rstd, torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5), torch.float32, "rstd")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rms", [True, False])
@pytest.mark.parametrize("m,n", [(300, 16384), (130, 20000), (130, 32768), (70, 40000), (9, 65536), (200, 65536),
                                 (5, 131072), (70, 131072)])
def test_norm_forwards_walking_rows_with_a_residual_of_their_dtype(m, n, rms, dtype):
    """forward_plan's walks (the next rows fetched ahead; one CTA or a cluster per block; 300
    rows: each of 38 groups walks 8 blocks, both slot sets; bf16 RMSNorm at 32768 on fast memory
    walks 4; bf16 LayerNorm past 32768 columns pipelined on a persistent grid: 200 rows of 65536
    and 70 of 131072 walk several rows per cluster), with and without a residual of the input's
    dtype, every element against float64."""
    seed = m + n * 7 + rms
    x = rand_rows((m, n), seed, dtype, scale=3.0) + 1.5
    w, b = rand_rows((n,), seed + 1, dtype), None if rms else rand_rows((n,), seed + 2, dtype)
    r = rand_rows((m, n), seed + 3, dtype)
    for residual in (None, r):
        poison_allocator()
        y, r_out, rstd, mean = norms.norm_forward(x, w, b, residual, eps=1e-5, rms=rms)
        xs = x.double() + (0 if residual is None else r.double())
        if residual is not None:
            check_close(r_out, xs, dtype, "residual out")
        want = F.rms_norm(xs, (n,), w.double(), 1e-5) if rms else F.layer_norm(xs, (n,), w.double(), b.double(), 1e-5)
        check_close(y, want, dtype, "y")
        var = xs.pow(2).mean(-1) if rms else xs.var(-1, unbiased=False)
        check_close(rstd, torch.rsqrt(var + 1e-5), torch.float32, "rstd")
        if not rms:
            check_close(mean, xs.mean(-1), torch.float32, "mean")


def run_small():
    """Each row kernel once on shapes that take every path (several warps per row, persistent
    loops of several iterations, guarded tail vectors, chunked vocabularies; the column sums'
    slabs), for the sanitizers."""
    from cute_torch.kernels import cross_entropy
    x = rand_rows((300, 4000), 1, torch.bfloat16)
    w, b = rand_rows((4000,), 2, torch.bfloat16), rand_rows((4000,), 3, torch.bfloat16)
    y = softmax.softmax(x)
    softmax.softmax_backward(y, x)
    long = rand_rows((70, 40000), 6, torch.bfloat16)           # clusters of 2 CTAs forward, 8 backward
    softmax.softmax_backward(softmax.softmax(long), long)   # (softmax: clusters of 4)
    wl = rand_rows((40000,), 7, torch.bfloat16)
    for rms in (True, False):
        out, _, rstd, mean = norms.norm_forward(x, w, None if rms else b, eps=1e-5, rms=rms)
        norms.norm_backward(x, w, out, rstd, mean, weight_grad=True, bias_grad=not rms)
        out, _, rstd, mean = norms.norm_forward(long, wl, None if rms else wl, eps=1e-5, rms=rms)
        norms.norm_forward(long, wl, None if rms else wl, residual=out, eps=1e-5, rms=rms)
        norms.norm_backward(long, wl, out, rstd, mean, weight_grad=True, bias_grad=not rms)
    # The backward's other CTA shapes: 256 threads (LayerNorm over 2048 16-bit columns, either
    # norm over 1024 Float32 ones, RMSNorm's 48 values over 3072 16-bit ones, clusters of 8 at
    # 30000) and 8-byte vectors where 16-byte ones pad (2560 columns).
    for m, n, dtype in ((300, 2048, torch.bfloat16), (300, 2560, torch.bfloat16), (300, 1024, torch.float32),
                        (300, 3072, torch.bfloat16), (70, 30000, torch.bfloat16)):
        xs, ws = rand_rows((m, n), 11, dtype), rand_rows((n,), 12, dtype)
        for rms in (True, False):
            out, _, rstd, mean = norms.norm_forward(xs, ws, None if rms else ws, eps=1e-5, rms=rms)
            norms.norm_backward(xs, ws, out, rstd, mean, weight_grad=True, bias_grad=not rms)
    widest = rand_rows((3, 262144), 17, torch.bfloat16)         # forwards over clusters of 16 too
    softmax.softmax_backward(softmax.softmax(widest, log=True), widest, log=True)
    norms.norm_forward(widest, widest[0], widest[1], eps=1e-5, rms=False)
    # Float32 forwards in quack's shape over 16 CTAs, padded (LayerNorm without parameters) and not
    # (RMSNorm with a weight, below)
    norms.norm_forward(rand_rows((3, 100000), 19, torch.float32), None, None, eps=1e-5, rms=False)
    f32_wide = rand_rows((3, 131072), 16, torch.float32)        # backwards over non-portable clusters of 16
    for rms in (True, False):
        out, _, rstd, mean = norms.norm_forward(f32_wide, f32_wide[0], None if rms else f32_wide[1], eps=1e-5, rms=rms)
        norms.norm_backward(f32_wide, f32_wide[0], out, rstd, mean, weight_grad=True, bias_grad=not rms)
    # Float32 softmax in quack's shape: over 16 CTAs (131072) and over 8, padded (100000)
    for f32_rows in (f32_wide, rand_rows((3, 100000), 25, torch.float32)):
        softmax.softmax(f32_rows)
        softmax.softmax(f32_rows, log=True)
    rms_wide = rand_rows((3, 131072), 18, torch.bfloat16)       # RMSNorm's 16-bit backward over 16 CTAs
    out, _, rstd, _ = norms.norm_forward(rms_wide, rms_wide[0], None, eps=1e-5, rms=True)
    norms.norm_backward(rms_wide, rms_wide[0], out, rstd, None, weight_grad=True, bias_grad=False)
    # Off fast memory LayerNorm's weight and bias in quack's shape forward, its backward over 16 CTAs
    out, _, rstd, mean = norms.norm_forward(rms_wide, rms_wide[0], rms_wide[1], eps=1e-5, rms=False)
    norms.norm_backward(rms_wide, rms_wide[0], out, rstd, mean, weight_grad=True, bias_grad=True)
    half = rand_rows((5, 32768), 19, torch.bfloat16)            # LayerNorm in quack's shape: 16 and 64 entries
    norms.norm_forward(half, half[0], half[1], eps=1e-5, rms=False)
    norms.norm_forward(rms_wide, None, None, eps=1e-5, rms=False)
    padded = rand_rows((5, 100000), 24, torch.bfloat16)        # LayerNorm's padded rows in quack's shape:
    norms.norm_forward(padded, None, None, eps=1e-5, rms=False)       # counts exchanged, clusters of 8
    # With weight and bias they walk at 64 values a thread over clusters of 4 (forward_walk), and
    # backward over 16 256-thread CTAs where 8 of 512 spill (norms.backward_shape); at 40000 with
    # a weight over clusters of 2.
    out, _, rstd, mean = norms.norm_forward(padded, padded[1], padded[2], eps=1e-5, rms=False)
    norms.norm_backward(padded, padded[1], out, rstd, mean, weight_grad=True, bias_grad=True)
    norms.norm_forward(padded[:, :40000], padded[0, :40000], None, eps=1e-5, rms=False)
    odd_long = rand_rows((6, 50257), 13, torch.bfloat16)        # long odd rows: softmax in peeled chunks
    softmax.softmax_backward(softmax.softmax(odd_long), odd_long)
    wide = rand_rows((20, 131072), 14, torch.bfloat16)          # clusters of 8 walking rows, exchanges pipelined
    softmax.softmax(wide)
    softmax.softmax(wide, log=True)
    softmax.softmax_backward(wide, wide, log=True)          # on fast memory: walking rows, the next loading
    rms_walk = rand_rows((40, 32768), 15, torch.bfloat16)       # on fast memory: RMSNorm walking 4 blocks
    norms.norm_forward(rms_walk, rms_walk[0], None, eps=1e-5, rms=True)
    norms.norm_forward(rms_walk, rms_walk[0], rms_walk[1], eps=1e-5, rms=False)  # fast memory: clusters of 2
    norms.norm_forward(wide, None, None, eps=1e-5, rms=False)   # one exchange a row: (mean, M2)
    ahead = rand_rows((300, 20000), 8, torch.bfloat16)          # forwards walking rows, one CTA per block
    for rms in (True, False):
        norms.norm_forward(ahead, None, None, residual=ahead, eps=1e-5, rms=rms)
    norms.norm_forward(ahead[:40].float(), None, None, eps=1e-5, rms=False)
    # Rows one CTA could hold over two (12288: softmax, RMSNorm with a weight, LayerNorm without);
    # on fast memory RMSNorm's backward over pairs of CTAs, LayerNorm's over 128-thread clusters
    # of 4 (of 8 elsewhere), and LayerNorm's forward with weight and bias bounded to three
    # (unwalked_ctas).
    pairs = rand_rows((40, 12288), 20, torch.bfloat16)
    softmax.softmax(pairs)
    norms.norm_forward(pairs, None, None, eps=1e-5, rms=False)
    for rms in (True, False):
        out, _, rstd, mean = norms.norm_forward(pairs, pairs[0], None if rms else pairs[1], eps=1e-5, rms=rms)
        norms.norm_backward(pairs, pairs[0], out, rstd, mean, weight_grad=True, bias_grad=not rms)
    # One 256-thread CTA a row bounded to three CTAs per SM (unwalked_ctas: LayerNorm with weight
    # and bias at 10000 on any card, with a weight at 14000 on fast memory).
    bounded = rand_rows((40, 14000), 21, torch.bfloat16)
    norms.norm_forward(bounded[:, :10000], bounded[0, :10000], bounded[1, :10000], eps=1e-5, rms=False)
    norms.norm_forward(bounded, bounded[0], None, eps=1e-5, rms=False)
    # With weight and bias at 14000 (on fast memory: bounded, a 24-byte spill accepted), and its
    # backward over 128-thread clusters in 8-byte vectors.
    out, _, rstd, mean = norms.norm_forward(bounded, bounded[0], bounded[1], eps=1e-5, rms=False)
    norms.norm_backward(bounded, bounded[0], out, rstd, mean, weight_grad=True, bias_grad=True)
    # LayerNorm's backward over pairs of CTAs, one row each (PAIRED_LAYER_NORM: 16-bit 3072 and 7168
    # on any card, Float32 5120 on fast memory), Float32 rows at 5 vectors a thread (1280, fast
    # memory), RMSNorm's over clusters of 4 (14336, fast memory) and unbounded at 768; Float32
    # LayerNorm's forward with weight and bias at 12288 bounded to two CTAs per SM; LayerNorm's
    # 16-bit backward over 128-thread clusters of 4 in 16-byte vectors (10240 off fast memory)
    # and of 8 (16384 on fast memory); LayerNorm's 16-bit backward in 32 threads a row at 1536 (fast
    # memory: 6 vectors a thread) and over clusters of 7 at 14336 (fast memory).
    for n, dtype in ((3072, torch.bfloat16), (7168, torch.bfloat16), (5120, torch.float32), (1280, torch.float32),
                     (14336, torch.bfloat16), (768, torch.bfloat16), (12288, torch.float32), (10240, torch.bfloat16),
                     (16384, torch.bfloat16), (1536, torch.bfloat16)):
        xs, ws = rand_rows((40, n), 22, dtype), rand_rows((n,), 23, dtype)
        for rms in (True, False):
            out, _, rstd, mean = norms.norm_forward(xs, ws, None if rms else ws, eps=1e-5, rms=rms)
            norms.norm_backward(xs, ws, out, rstd, mean, weight_grad=True, bias_grad=not rms)
    target = torch.randint(0, 9000, (40,), generator=torch.Generator().manual_seed(4)).cuda()
    for rows in (pairs, bounded):                               # cross-entropy's one chunk bounded to 4 / 3
        cross_entropy.cross_entropy_forward(rows, target)
    logits = rand_rows((40, 9000), 5, torch.bfloat16)           # forward: one chunk over the row
    _, lse = cross_entropy.cross_entropy_forward(logits, target)
    cross_entropy.cross_entropy_backward(logits, target, lse, torch.ones(40, device="cuda"), inplace=True)
    _, lse = cross_entropy.cross_entropy_forward(logits.float(), target)   # Float32: 256 threads backward too
    cross_entropy.cross_entropy_forward(logits[:, :256].float(), target % 256)  # fast memory: 4 vectors a thread
    cross_entropy.cross_entropy_forward(logits[:, :256], target % 256)  # short 16-bit rows: half the threads
    cross_entropy.cross_entropy_backward(logits.float(), target, lse, torch.ones(40, device="cuda"))
    _, lse = cross_entropy.cross_entropy_forward(logits, target, label_smoothing=0.1)   # the row's sum too
    cross_entropy.cross_entropy_backward(logits, target, lse, torch.ones(40, device="cuda"), label_smoothing=0.1)
    odd = rand_rows((40, 9001), 10, torch.bfloat16)              # peeled rows: vectors between scalar edges
    _, lse = cross_entropy.cross_entropy_forward(odd, target)
    cross_entropy.cross_entropy_forward(long, torch.randint(0, 40000, (70,), generator=torch.Generator().manual_seed(9))
                                        .cuda())                        # softmax's quack shape
    cross_entropy.cross_entropy_backward(odd, target, lse, torch.ones(40, device="cuda"))
    _, lse = cross_entropy.cross_entropy_forward(logits[:, :3000], target % 3000)   # four rows a CTA
    cross_entropy.cross_entropy_backward(logits[:, :3000], target % 3000, lse, torch.ones(40, device="cuda"))
    from cute_torch.kernels.column_sums import column_sum
    column_sum(ahead)                                       # many slabs of 16-byte vectors, a tail tile
    column_sum(rand_rows((257, 37), 9, torch.float16))          # single elements, a short last slab
    torch.cuda.synchronize()


@needs_gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_the_row_kernels_are_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_row_kernels as t; t.run_small()")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]


@needs_gpu
def test_the_norm_backward_grid_is_what_runs_at_once():
    """The persistent backward's groups: as many clusters as the device runs at once (its GPCs
    may leave SMs a cluster cannot use: fewer than SMs / cluster size), asked of the driver."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n in (4096, 65536):
        x, w = rand_rows((64, n), 81, torch.bfloat16), rand_rows((n,), 82, torch.bfloat16)
        cfg = norm_shapes.backward_config(n, (x, w))
        probe = dynamic_rows(torch.empty(1, n, device="cuda"))
        compiled = norms._backward.compile(dynamic_rows(x), w, dynamic_rows(x), dynamic_rows(x[:, 0].float()), None,
                                           dynamic_rows(x), probe, None, w, None, 1, cfg)
        resident = resident_groups(compiled, cfg, 0, norm_shapes.backward_ring(cfg, 2, 2, 2)[1])
        assert 1 <= resident <= sms // cfg.cluster, (n, cfg, resident)


@needs_gpu
def test_norm_backward_sums_weight_gradients_over_many_rows_per_cta():
    """4096 rows: every CTA of the persistent backward loops over several, accumulating dweight
    and dbias in registers across iterations (the smaller cases give each CTA one row)."""
    x = rand_rows((4096, 4096), 61, torch.bfloat16)
    w, b = rand_rows((4096,), 62, torch.bfloat16), rand_rows((4096,), 63, torch.bfloat16)
    dy = rand_rows((4096, 4096), 64, torch.bfloat16)
    leaves = [t.double().requires_grad_() for t in (x, w, b)]
    F.layer_norm(leaves[0], (4096,), leaves[1], leaves[2], 1e-5).backward(dy.double())
    _, _, rstd, mean = norms.norm_forward(x, w, b, eps=1e-5, rms=False)
    dx, dw, db = norms.norm_backward(x, w, dy, rstd, mean, weight_grad=True, bias_grad=True)
    for got, want, what in ((dx, leaves[0].grad, "dx"), (dw, leaves[1].grad, "dweight"), (db, leaves[2].grad, "dbias")):
        check_close(got, want, torch.bfloat16, what)


def test_a_residual_of_another_shape_is_an_error_before_any_launch():
    x = torch.zeros(8, 512)
    with pytest.raises(ValueError, match=r"residual has shape \(512,\) where x has \(8, 512\)"):
        norms.norm_forward(x, None, None, torch.zeros(512), rms=True)
    with pytest.raises(ValueError, match="norm_backward: dy"):
        norms.norm_backward(x, None, torch.zeros(4, 512), torch.zeros(8))


def test_long_odd_softmax_rows_take_the_peeled_chunks():
    """Past one CTA's registers, rows the register path would read one element at a time take
    the chunked path, which reads them in 16-byte vectors (kernels/softmax.takes_chunks)."""
    def rows(n, dtype=torch.bfloat16):
        return torch.empty(4, n, dtype=dtype)
    assert softmax.takes_chunks(rows(50257), rows(50257))
    assert not softmax.takes_chunks(rows(40000), rows(40000))        # 16-byte vectors in registers
    assert not softmax.takes_chunks(rows(1001), rows(1001))          # one CTA's registers
    assert softmax.takes_chunks(rows(300000), rows(300000))          # past REGISTER_N
    assert not softmax.takes_chunks(rows(50257, torch.float32), rows(50257, torch.float32))   # 4-byte elements
    big = torch.empty(4, 50264, dtype=torch.bfloat16)
    assert not softmax.takes_chunks(big[:, 1:50258], rows(50257))   # unaligned starts: not peelable
