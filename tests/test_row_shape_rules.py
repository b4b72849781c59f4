"""The shapes the row kernels take (kernels/softmax.py, norms.py, norm_shapes.py): quack's one row per
cluster where it was measured faster, softmax's walking backward, and what ptxas makes of each
(registers, spills, CTAs per SM, cp.async copies) compiled for sm_90a without a GPU. The kernels'
values are checked in test_row_kernels.py."""

from __future__ import annotations

import pytest
import torch

import cute_torch as cute
from row_checks import ctas_per_sm
from cute_torch.kernels import norm_shapes, norms, softmax
from cute_torch.kernels.row_reduce import dynamic_rows


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,cluster", [(12288, 2), (16384, 2), (16392, 2), (32768, 2), (40000, 4), (65536, 4),
                                       (100000, 8), (131072, 8)])
def test_softmax_forward_takes_quacks_shape_over_a_cluster(n, cluster, dtype):
    """softmax.direct_shape: 16-bit rows past 8192 columns (unpadded to 16384) up to 131072 go one row per cluster
    of 256-thread CTAs holding up to 64 values a thread, staged by 16-byte cp.async.ca copies,
    one exchange (one mbarrier wait), three CTAs per SM without spilling; log_softmax's from
    16384 columns on (one CTA holds them: its own shapes)."""
    x = torch.empty(4, n, dtype=dtype)
    rows, hopper = dynamic_rows(x), {"arch": "sm_90a"}
    for log in (False, True):
        if log and n <= 16384:
            assert softmax.forward_shape((rows, rows), (x, x), log, 0, hopper)[1] != "direct"
            continue
        cfg, walk = softmax.forward_shape((rows, rows), (x, x), log, 0, hopper)
        assert walk == "direct" and (cfg.threads, cfg.cluster, cfg.vec) == (256, cluster, 8)
        assert cfg.vectors * cfg.vec <= 64
        ptx = cute.compile(softmax._forward, rows, rows, 1, cfg, log, walk, options=hopper)
        text = ptx.__ptx__
        assert text.count("cp.async.ca.shared.global") == cfg.vectors and "cp.async.cg" not in text
        assert text.count("mbarrier.try_wait") == 1 and "st.async.shared::cluster" in text
        assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 3 for k in ptx.kernels), ptx.kernels


@pytest.mark.parametrize("n,cluster,rms,bias", [(12288, 2, True, False), (16384, 2, True, False),
                                                (16392, 2, True, False), (40000, 4, True, False),
                                                (131072, 8, True, False), (32768, 2, False, True),
                                                (12288, 2, False, False), (131072, 8, False, False)])
def test_norm_forward_takes_quacks_shape_over_a_cluster(n, cluster, rms, bias):
    """norm_shapes.direct_shape: 16-bit rows over a cluster without a residual (LayerNorm's padded
    rows as measured, and with weight and bias only over two CTAs), three CTAs per SM without spilling,
    from 8192 columns, unpadded, for RMSNorm with a weight and LayerNorm without parameters; a
    residual, LayerNorm's padded rows over clusters of 4, its weight and bias over more CTAs or over rows one CTA
    holds, and rows up to 8192 keep their plans (Float32 rows: the next test)."""
    x, w, st = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16), torch.empty(4)
    mean = None if rms else dynamic_rows(st)
    wb = (w if rms or bias else None, w if bias else None)      # (LayerNorm past 16384 columns w/o bias: neither)
    args = (dynamic_rows(x), None, *wb, dynamic_rows(x), None, dynamic_rows(st), mean, 1e-5)
    cfg, walk, ctas = norms.forward_shape(args, (x, None, *wb, x, None), rms, 0, {"arch": "sm_90a"})
    assert walk == norm_shapes.DIRECT and ctas is None and (cfg.threads, cfg.cluster, cfg.vec) == (256, cluster, 8)
    fwd = norms._forward.compile(*args, 1, cfg, rms, walk, options={"arch": "sm_90a"})
    assert fwd.__ptx__.count("cp.async.ca.shared.global") == cfg.vectors
    assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 3 for k in fwd.kernels), fwd.kernels
    odd, mixed = torch.empty(4, 40000, dtype=torch.bfloat16), torch.empty(4, n)
    wide = torch.empty(4, 65536, dtype=torch.bfloat16)
    for tensors, rms in (((x, x, w, None, x, x), True), ((x, x, w, w, x, x), False),
                         ((mixed, None, w, None, mixed, None), True), ((odd, None, None, None, odd, None), False),
                         ((wide, None, wide[0], wide[0], wide, None), False)):
        assert norm_shapes.direct_shape(tensors[0].shape[1], tensors, rms, fast=True) is None
    short, shorter = torch.empty(4, 16384, dtype=torch.bfloat16), torch.empty(4, 8192, dtype=torch.bfloat16)
    assert norm_shapes.direct_shape(16384, (short, None, short[0], short[0], short, None), False, fast=True) is None
    assert norm_shapes.direct_shape(16384, (short, None, short[0], None, short, None), False, fast=True) is None
    assert norm_shapes.direct_shape(8192, (shorter, None, shorter[0], None, shorter, None), True, fast=True) is None
    assert norm_shapes.direct_shape(16384, (short, None, None, None, short, None), True, fast=True) is None  # no weight
    padded = torch.empty(4, 14000, dtype=torch.bfloat16)
    assert norm_shapes.direct_shape(14000, (padded, None, padded[0], None, padded, None), True, fast=True) is None
    # LayerNorm's padded rows: without parameters over 8 CTAs only (with them they walk: forward_walk).
    for width, cluster in ((40000, None), (50000, None), (70000, 8), (100000, 8), (120000, 8)):
        rows = torch.empty(4, width, dtype=torch.bfloat16)
        got = norm_shapes.direct_shape(width, (rows, None, None, None, rows, None), False, fast=True)
        assert (got and got.cluster) == cluster and (got is None or got.padding), (width, got)
        assert norm_shapes.direct_shape(width, (rows, None, rows[0], None, rows, None), False, fast=True) is None, width


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_norm_parameters_take_quacks_shape_on_slow_memory(dtype):
    """norm_shapes.direct_shape: on a card without fast memory (the H100) LayerNorm's unpadded 16-bit
    rows take quack's shape with a weight, or weight and bias, over any cluster (65536: 4 CTAs, 131072:
    8), three CTAs per SM without spilling; on fast memory only where parameters x CTAs <= 4, and
    padded rows with parameters walk on both."""
    hopper, st = {"arch": "sm_90a"}, torch.empty(4)
    for n, cluster in ((65536, 4), (131072, 8), (100000, None)):
        x, w = torch.empty(4, n, dtype=dtype), torch.empty(n, dtype=dtype)
        for wb in ((w, None), (w, w)):
            tensors = (x, None, *wb, x, None)
            got = norm_shapes.direct_shape(n, tensors, False, fast=False)
            assert (got and got.cluster) == cluster, (n, wb[1] is not None)
            fast = norm_shapes.direct_shape(n, tensors, False, fast=True)
            assert fast == (got if cluster and cluster * (1 + (wb[1] is not None)) <= 4 else None)
            if got is None:
                continue
            args = (dynamic_rows(x), None, *wb, dynamic_rows(x), None, dynamic_rows(st), dynamic_rows(st), 1e-5)
            assert norms.forward_shape(args, tensors, False, 0, hopper) == (got, norm_shapes.DIRECT, None)
            kernels = norms._forward.compile(*args, 1, got, False, norm_shapes.DIRECT, options=hopper).kernels
            assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 3 for k in kernels), kernels


@pytest.mark.parametrize("bound,direct", [(norm_shapes.BOUNDED_SPILL, True), (0, False)])
def test_padded_layer_norm_rows_take_quacks_shape_unless_it_spills(bound, direct, monkeypatch):
    """norms.forward_shape: LayerNorm's padded rows that direct_shape gives quack's shape take it
    where its kernel spills at most BOUNDED_SPILL bytes a thread (120000 without parameters: 4,
    accepted by its launch), and walk where it spills more (here: the bound lowered to none)."""
    monkeypatch.setattr(norms, "BOUNDED_SPILL", bound)
    n = 120000
    x, st = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(4)
    args = (dynamic_rows(x), None, None, None, dynamic_rows(x), None, dynamic_rows(st), dynamic_rows(st), 1e-5)
    cfg, walk, _ = norms.forward_shape(args, (x, None, None, None, x, None), False, 0, {"arch": "sm_90a"})
    assert (walk == norm_shapes.DIRECT) == direct and cfg.padding, (cfg, walk)
    kernels = norms._forward.compile(*args, 1, cfg, False, walk, options={"arch": "sm_90a"}).kernels
    assert all(k["spill_stores"] <= bound for k in kernels), kernels


@pytest.mark.parametrize("n,cluster", [(69000, 8), (70000, 8), (80000, 8), (100000, 8), (110000, 16), (131072, 16)])
def test_softmax_forward_takes_quacks_shape_over_float32_rows(n, cluster):
    """softmax.float32_direct_shape: Float32 rows of 65537-131072 columns go one row per cluster of 8
    256-thread CTAs, or 16 where 8 would hold more than 13 vectors a thread, padded at most 7 %,
    three CTAs per SM without spilling (softmax and log_softmax)."""
    x = torch.empty(4, n)
    rows, hopper = dynamic_rows(x), {"arch": "sm_90a"}
    for log in (False, True):
        cfg, walk = softmax.forward_shape((rows, rows), (x, x), log, 0, hopper)
        assert walk == "direct" and (cfg.threads, cfg.cluster, cfg.vec) == (256, cluster, 4), cfg
        assert cfg.vectors <= softmax.FLOAT32_DIRECT_VECTORS and cfg.padding <= 0.07 * n
        kernels = cute.compile(softmax._forward, rows, rows, 1, cfg, log, walk, options=hopper).kernels
        assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 3 for k in kernels), kernels


def test_softmax_direct_shape_only_where_measured():
    """Rows one CTA holds, rows past 131072, 16-bit rows without 16-byte vectors and Float32 rows
    up to 65536 or padded past 7 % keep the register path's other shapes."""
    for n in (65536, 66000, 115000, 131076, 200000):               # (66000 and 115000 padded 12 / 14 %)
        assert softmax.float32_direct_shape(n, 4) is None, n
    assert softmax.float32_direct_shape(100000, 2) is None                     # (8-byte vectors)
    x = torch.empty(2, 100000)
    assert softmax.direct_shape((x, x)) is None                # (cross-entropy's Float32 logits: chunks)
    for dtype, n in ((torch.bfloat16, 16384), (torch.bfloat16, 262144)):
        x = torch.empty(2, n, dtype=dtype)
        assert softmax.direct_shape((x, x)) is None, (dtype, n)
    for dtype, n in ((torch.float32, 16384), (torch.bfloat16, 8192), (torch.bfloat16, 14000)):   # (unpadded only)
        x = torch.empty(2, n, dtype=dtype)
        assert softmax.direct_shape((x, x), short=True) is None, (dtype, n)
    odd = torch.empty(2, 32776, dtype=torch.bfloat16)[:, :32772]      # rows 4 elements off 16 bytes
    assert softmax.direct_shape((odd, odd)) is None


def test_float32_norm_forward_takes_quacks_shape_at_32_values_a_thread():
    """norm_shapes.float32_direct_shape: Float32 rows of 16385-131072 columns over 4, 8 or 16
    256-thread CTAs holding up to 32 values each, three CTAs per SM without spilling; LayerNorm's
    padded rows with parameters, and its weight and bias over 16 CTAs, a residual, rows up to 16384
    and narrower vectors keep their plans."""
    hopper, st = {"arch": "sm_90a"}, torch.empty(4)
    expected = {  # n: clusters for RMSNorm, RMSNorm with a weight, LayerNorm, with a weight, with both
        16384: (None,) * 5, 17000: (4, 4, 4, None, None), 32768: (4,) * 5, 50000: (8, 8, 8, None, None),
        65536: (8,) * 5, 100000: (16, 16, 16, None, None), 131072: (16, 16, 16, 16, None), 131080: (None,) * 5}
    for n, clusters in expected.items():
        x, w = torch.empty(4, n), torch.empty(n)
        for (rms, params), cluster in zip(((True, 0), (True, 1), (False, 0), (False, 1), (False, 2)), clusters):
            tensors = (x, None, w if params else None, w if params == 2 else None, x, None)
            cfg = norm_shapes.direct_shape(n, tensors, rms, fast=True)
            assert (cfg and cfg.cluster) == cluster, (n, rms, params)
            if cfg is None or n not in (17000, 131072):
                continue
            assert (cfg.threads, cfg.vec) == (256, 4) and cfg.vectors * cfg.vec <= 32
            args = (dynamic_rows(x), None, *tensors[2:4], dynamic_rows(x), None, dynamic_rows(st),
                    None if rms else dynamic_rows(st), 1e-5)
            got, walk, ctas = norms.forward_shape(args, tensors, rms, 0, hopper)
            assert (got, walk, ctas) == (cfg, norm_shapes.DIRECT, None)
            fwd = norms._forward.compile(*args, 1, cfg, rms, walk, options=hopper)
            assert fwd.__ptx__.count("cp.async.ca.shared.global") == cfg.vectors
            assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 3 for k in fwd.kernels), fwd.kernels
    x, w = torch.empty(4, 65536), torch.empty(65536)
    assert norm_shapes.direct_shape(65536, (x, x, w, None, x, x), True, fast=True) is None          # residual
    odd = torch.empty(4, 65540)[:, :65538]                                                             # 8-byte rows
    assert norm_shapes.direct_shape(65538, (odd, None, None, None, odd, None), True, fast=True) is None


@pytest.mark.parametrize("n", [40000, 65536, 131072])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_softmax_backward_walks_cluster_rows_on_fast_memory_without_spilling(n, dtype):
    """softmax.backward_walk: 16-bit rows over a cluster walk on fast memory only, the next
    row's y and dy loading in 16 bits beside this row's, without spilling; Float32 rows do not
    walk."""
    x = torch.empty(8, n, dtype=dtype)
    cfg, rows = softmax._config(x, x, x), dynamic_rows(x)
    assert not softmax.backward_walk(cfg, 8 * x.element_size(), False)
    walk = softmax.backward_walk(cfg, 8 * x.element_size(), True)
    assert walk == (dtype != torch.float32)
    for log in (False, True):
        bwd = cute.compile(softmax._backward, rows, rows, rows, 1, cfg, log, walk, options={"arch": "sm_90a"})
        assert all(k.get("spill_stores") == 0 for k in bwd.kernels), bwd.kernels


def test_softmax_backward_walks_on_slow_memory_where_its_ctas_hold_too_little():
    """softmax.backward_shape off fast memory (no device: compiled for sm_90a): one row per
    cluster where the CTAs an SM runs hold at least WALK_BELOW_BYTES of y and dy, else the walk;
    the widths measured on the H100 (backward_walk's table). 16-bit rows only."""
    hopper = {"arch": "sm_90a"}
    walks = {(False, 20000): True, (False, 40000): True, (False, 70000): True, (False, 100000): True,
             (False, 30000): False, (False, 60000): False, (False, 120000): False, (False, 131072): False,
             (True, 50000): True, (True, 100000): True, (True, 20000): False, (True, 70000): False}
    for (log, n), walk in walks.items():
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.empty(4, n, dtype=dtype)
            args = (dynamic_rows(x),) * 3
            cfg, got = softmax.backward_shape(args, (x, x, x), log, -1, hopper)
            assert got == (walk and dtype == torch.bfloat16), (log, n, dtype)
    cfg = softmax._config(*(torch.empty(4, 100000, dtype=torch.bfloat16),) * 3)
    assert (cfg.cluster, cfg.threads) == (8, 512)
    assert softmax.held_bytes(cfg, 16, 92) == 50000           # one CTA an SM at 96 registers a thread
    assert softmax.held_bytes(cfg, 16, 64) == 100000          # two at 64
    assert softmax.held_bytes(cfg, 16, 32) == 200000          # four: 2048 threads an SM


def test_the_one_phase_exchange_refuses_a_cluster_whose_warps_are_not_a_power_of_two():
    """row_reduce._require_direct: direct_fold merges every 32nd entry the same number of times in
    each lane, so 7 CTAs of 8 warps (56 entries) would drop entries 32-55 from the row's sums; the
    shape is refused at compile time, before any launch."""
    from cute_torch.kernels.row_reduce import RowConfig
    x = torch.empty(4, 100000, dtype=torch.bfloat16)
    rows = dynamic_rows(x)
    seven = RowConfig(100000, 8, 256, 256, 7)
    with pytest.raises(ValueError, match="power of two of warps"):
        cute.compile(softmax._forward, rows, rows, 1, seven, False, "direct", options={"arch": "sm_90a"})
