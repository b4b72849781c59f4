"""The norm kernels' CTA shapes and launch bounds (kernels/norm_shapes.py), CPU tier: which shape
each forward and backward takes for a row length, dtype, parameters and card, and that the bounded
kernels compile for sm_90a within their registers. The kernels' results are tests/test_row_kernels.py's."""

from __future__ import annotations

import pytest
import torch

from cute_torch.kernels import norm_shapes, norms
from cute_torch.kernels.row_reduce import dynamic_rows
from row_checks import ctas_per_sm, norm_backward_args


def _compile_backward(x, w, cfg, layer: bool):
    """The norm backward over rows like `x` (weight `w`) in shape `cfg`, compiled for sm_90a."""
    return norms._backward.compile(*norm_backward_args(x, w, layer, layer), 1, cfg, options={"arch": "sm_90a"})


def test_the_norm_backward_halves_its_ctas_where_that_measured_faster():
    """16-bit LayerNorm rows of 2048, 4096 and 8192 columns, 16-bit RMSNorm rows of 3072 and 6144
    (with 48 values per thread) and Float32 rows of 768 to 1536: 256-thread CTAs with half the
    shared memory each; others keep 512 threads. The 256-thread ones keep the arithmetic they
    were tuned with (tight_schedule: one CTA of 8 warps per SM hangs on its schedule).
    Short rows take the unpadded one of the two thread counts per row where only one is."""
    for n, layer, dtype, threads in ((4096, True, torch.bfloat16, 256), (2048, True, torch.float16, 256),
                                     (1024, False, torch.float32, 256),
                                     (768, True, torch.float32, 256), (2048, True, torch.float32, 512),
                                     (8192, True, torch.bfloat16, 256), (4096, False, torch.bfloat16, 512),
                                     (4096, True, torch.float32, 512), (1024, True, torch.bfloat16, 512),
                                     (16400, True, torch.bfloat16, 512), (3072, False, torch.bfloat16, 256),
                                     (6144, False, torch.float16, 256), (3072, False, torch.float32, 512)):
        x = torch.empty(4, n, dtype=dtype)
        cfg = norm_shapes.backward_config(n, (x, x, torch.empty(n, dtype=dtype), x), layer)
        assert cfg.threads == threads, (n, layer, dtype)
        assert norms.tight_schedule(cfg) == (threads == 256), (n, layer, dtype)
        stages, smem = norm_shapes.backward_ring(cfg, x.element_size(), x.element_size(), x.element_size())
        assert stages >= 2 and smem <= norm_shapes.BACKWARD_SMEM * threads // 512
    for n, dtype, per_row in ((768, torch.bfloat16, 32), (1024, torch.bfloat16, 64), (768, torch.float32, 64),
                              (3072, torch.bfloat16, 64), (6144, torch.bfloat16, 128)):   # RMSNorm's 48 values
        x = torch.empty(4, n, dtype=dtype)
        cfg = norm_shapes.backward_config(n, (x, x, torch.empty(n, dtype=dtype), x))
        assert (cfg.threads_per_row, cfg.padding) == (per_row, 0), (n, dtype)
    # Clusters of 8 whose ring would hold fewer than 3 blocks take 16 CTAs (non-portable) where
    # those hold 3: Float32 rows of 131072, 16-bit ones of 200000; not 16-bit 131072 (3 already).
    # RMSNorm's over 16-bit rows that 8 cover exactly with 32 values a thread (131072) takes 16
    # too; not padded rows (100000, 98304) nor 8 holding the halved 16 values (65536).
    for n, dtype, cluster, rms_cluster in ((131072, torch.float32, 16, 16), (200000, torch.bfloat16, 16, 16),
                                           (131072, torch.bfloat16, 8, 16), (100000, torch.bfloat16, 8, 8),
                                           (98304, torch.bfloat16, 8, 8), (65536, torch.bfloat16, 8, 8),
                                           (65536, torch.float32, 8, 8)):
        x = torch.empty(4, n, dtype=dtype)
        for layer in (True, False):
            cfg = norm_shapes.backward_config(n, (x, x, torch.empty(n, dtype=dtype), x), layer)
            assert cfg.cluster == (cluster if layer else rms_cluster), (n, dtype, layer)
            assert norm_shapes.pipelined_backward(cfg, norm_shapes.backward_ring(cfg, *[x.element_size()] * 3)[0])
    # Float32 rows of 262144: 16 CTAs hold fewer than 3 blocks too, but take half the registers
    x = torch.empty(4, 262144)
    assert norm_shapes.backward_config(262144, (x, x, torch.empty(262144), x), True).cluster == 16
    # The forward takes 16 where a cluster of 8 would hold more values a thread than planned and
    # ptxas spills it (LayerNorm over bf16 rows of 262144: 64 for 32, 456 bytes, 0.30 of copy),
    # not at 200000 (8 holds 56 without spilling); RMSNorm's plans 64 there and keeps 8.
    stat = dynamic_rows(torch.empty(4))
    for n, rms, cluster in ((262144, False, 16), (200000, False, 8), (262144, True, 8)):
        x = torch.empty(4, n, dtype=torch.bfloat16)
        rows = dynamic_rows(x)
        args = (rows, None, None, None, rows, None, stat, None if rms else stat, 1e-5)
        cfg, *_ = norms.forward_shape(args, (x, None, None, None, x, None), rms, 0, {"arch": "sm_90a"})
        assert cfg.cluster == cluster, (n, rms)
    # LayerNorm's over Float32 rows of 1024: 16 values a thread, not 8 (0.84 -> 0.99 of copy, H200)
    x = torch.empty(4, 1024)
    assert norm_shapes.backward_config(1024, (x, x, torch.empty(1024), x), True).threads_per_row == 64
    assert norm_shapes.backward_config(1024, (x, x, torch.empty(1024), x), False).threads_per_row == 128


def test_the_norm_forward_takes_fewer_threads_per_row_where_they_cover_it_exactly():
    """2560 columns at 32 values per thread: 128 threads x 3 vectors would hold 3072; 64 x 5
    hold the row exactly (LayerNorm's walking forward, 0.88 -> 0.96 of copy on an H200), where
    that is at most twice the planned values and NARROW_VALUES."""
    x, w = torch.empty(4, 2560, dtype=torch.bfloat16), torch.empty(2560, dtype=torch.bfloat16)
    assert norm_shapes.config_for(2560, (x, w), 32).padding == 512
    cfg = norm_shapes.forward_config(2560, (x, w), 32)
    assert (cfg.threads_per_row, cfg.vectors, cfg.padding) == (64, 5, 0)
    short = (x[:, :1000], w[:1000])
    assert norm_shapes.forward_config(1000, short, 32) == norm_shapes.config_for(1000, short, 32)
    # Not past twice the planned values nor NARROW_VALUES: 12800 columns would take 64 threads of 200
    # values (255 registers), 13312 128 of 104; 11264 takes 128 of 88, 2304 32 of 72.
    for n, per_row in ((12800, 256), (13312, 256), (15360, 256), (11264, 128), (2304, 32)):
        y, v = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        assert norm_shapes.forward_config(n, (y, v), 64).threads_per_row == per_row, n


def test_the_norm_forward_holds_six_vectors_a_thread_as_three_in_twice_the_threads():
    """norm_shapes.forward_config: 16-bit rows at 6 16-byte vectors a thread in 32 or 64 threads
    (1536, 3072 columns; with or without a residual) take 3 in twice the threads, 128-thread CTAs
    still; 768 (3 vectors already), 6144 (128 threads a row) and Float32 rows keep config_for's."""
    for n, per_row in ((1536, 64), (3072, 128)):
        x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        assert norm_shapes.config_for(n, (x, w), 64).vectors == 6
        for tensors in ((x, None, w, w, x, None), (x, x, w, None, x, x)):
            cfg = norm_shapes.forward_config(n, tensors, 64)
            assert (cfg.threads_per_row, cfg.threads, cfg.vectors, cfg.padding) == (per_row, 128, 3, 0), cfg
        stat, rows = dynamic_rows(torch.empty(4)), dynamic_rows(x)       # the library's forward takes it, unspilled
        args = (rows, None, w, w, rows, None, stat, stat, 1e-5)
        cfg, walk, ctas = norms.forward_shape(args, (x, None, w, w, x, None), False, 0, {"arch": "sm_90a"})
        assert (cfg.threads_per_row, walk) == (per_row, 1), cfg
        fwd = norms._forward.compile(*args, 1, cfg, False, walk, ctas, options={"arch": "sm_90a"})
        assert all(k["spill_stores"] == 0 for k in fwd.kernels), fwd.kernels
    for n, dtype in ((768, torch.bfloat16), (6144, torch.bfloat16), (3072, torch.float32)):
        x, w = torch.empty(4, n, dtype=dtype), torch.empty(n, dtype=dtype)
        assert norm_shapes.forward_config(n, (x, w), 64) == norm_shapes.config_for(n, (x, w), 64), n

def test_the_layer_norm_backward_holds_768_columns_four_rows_a_128_thread_cta():
    """norm_shapes.backward_config: LayerNorm's over 16-bit rows of 768 columns (3 16-byte vectors
    in 32 threads) in 128-thread CTAs on every card, without spilling; RMSNorm's and 1024 columns
    keep 512 threads, Float32 rows 256 (half_ctas)."""
    x, w = torch.empty(4, 768, dtype=torch.bfloat16), torch.empty(768, dtype=torch.bfloat16)
    for fast in (False, True):
        cfg = norm_shapes.backward_config(768, (x, w, x, x), True, fast)
        assert (cfg.threads, cfg.threads_per_row, cfg.vectors, cfg.cluster) == (128, 32, 3, 1), cfg
        assert norm_shapes.backward_config(768, (x, w, x, x), False, fast).threads == 512
    assert all(k["spill_stores"] == 0 for k in _compile_backward(x, w, cfg, True).kernels)
    for n, dtype, threads in ((768, torch.float32, 256), (1024, torch.bfloat16, 512)):
        y, v = torch.empty(4, n, dtype=dtype), torch.empty(n, dtype=dtype)
        assert norm_shapes.backward_config(n, (y, v, y, y), True).threads == threads, n

def test_the_layer_norm_backward_holds_1536_columns_in_32_threads_a_row_on_fast_memory():
    """norm_shapes.backward_config: on fast memory LayerNorm's over 16-bit rows of 1536 columns at
    6 16-byte vectors in 32 threads, four rows a 128-thread CTA, without spilling; other cards keep
    3 vectors in 64 threads of a 512-thread CTA, RMSNorm's its own."""
    x, w = torch.empty(4, 1536, dtype=torch.bfloat16), torch.empty(1536, dtype=torch.bfloat16)
    cfg = norm_shapes.backward_config(1536, (x, w, x, x), True, True)
    assert (cfg.threads, cfg.threads_per_row, cfg.vectors, cfg.padding) == (128, 32, 6, 0), cfg
    assert all(k["spill_stores"] == 0 for k in _compile_backward(x, w, cfg, True).kernels)
    slow = norm_shapes.backward_config(1536, (x, w, x, x), True, False)
    assert (slow.threads, slow.threads_per_row, slow.vectors) == (512, 64, 3), slow
    assert norm_shapes.backward_config(1536, (x, w, x, x), False, True).threads_per_row == 64


def test_the_layer_norm_backward_spreads_7169_to_16384_columns_over_128_thread_clusters():
    """norm_shapes.backward_config: LayerNorm's over 16-bit rows of 7169-16384 columns in
    128-thread CTAs over clusters of 4, 7 (14336 on fast memory) or 8 (LAYER_NORM_CLUSTERS, per card),
    pipelined, without spilling or a bound; off fast memory 8192 keeps one 256-thread CTA; rows only 8-byte vectors
    suit, 7168 (pairs) and 16400 keep the shapes before."""
    for n, fast, shape in ((7680, True, (4, 4)), (10000, True, (4, 4)), (14336, True, (7, 4)), (14000, True, (4, 4)),
                           (14344, True, (8, 4)), (14336, False, (8, 4)),
                           (16384, True, (8, 4)), (8192, True, (4, 4)), (7680, False, (4, 8)), (10240, False, (4, 8)),
                           (10248, False, (8, 4)), (15360, False, (8, 4)), (16384, False, (4, 4)),
                           (8192, False, None), (7168, True, None), (16400, False, None), (10004, False, None)):
        x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        cfg = norm_shapes.backward_config(n, (x, w, x, x), True, fast)
        assert ((cfg.threads, cfg.threads_per_row, cfg.cluster, cfg.vec) == (128, 128, *shape)) if shape else \
            cfg.threads > 128 or cfg.cluster <= 2, (n, fast, cfg)
        if shape:
            assert norm_shapes.pipelined_backward(cfg, norm_shapes.backward_ring(cfg, 2, 2, 2)[0])
            assert norm_shapes.backward_ctas(cfg, True, 16) is None
            compiled = _compile_backward(x, w, cfg, True)
            assert all(k["spill_stores"] == 0 for k in compiled.kernels), (n, fast, compiled.kernels)


def test_the_rms_norm_backward_pairs_256_thread_ctas_past_8192_columns_on_fast_memory():
    """norm_shapes.backward_config on fast memory (an H200): RMSNorm's over unpadded 16-bit rows of
    8193 to 12288 columns over clusters of two 256-thread CTAs, pipelined, without spilling or a
    bound (past 12288 clusters of 4, below); padded rows (10240: 2.5 vectors a thread) and other
    cards keep 512 threads."""
    for n, paired in ((12288, True), (10240, False), (10000, False), (8192, False)):
        x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        cfg = norm_shapes.backward_config(n, (x, w, x, x), False, fast=True)
        assert ((cfg.threads, cfg.cluster, cfg.vec) == (256, 2, 8)) == paired, (n, cfg)
        assert norm_shapes.backward_config(n, (x, w, x, x), False).threads == 512
        if paired:
            assert norm_shapes.pipelined_backward(cfg, norm_shapes.backward_ring(cfg, 2, 2, 2)[0])
            assert norm_shapes.backward_ctas(cfg, False, 16) is None
            compiled = _compile_backward(x, w, cfg, False)
            assert all(k["spill_stores"] == 0 for k in compiled.kernels), (n, compiled.kernels)


@pytest.mark.parametrize("fast", [False, True])
def test_unwalked_norm_forwards_past_8192_columns_keep_their_ctas_per_sm(fast, monkeypatch):
    """norm_shapes.unwalked_ctas: 16-bit rows of 8193-14336 columns in one 256-thread CTA a row bound
    to three CTAs per SM, spilling no more than BOUNDED_SPILL bytes (LayerNorm's with weight and
    bias at 14000), on fast memory (an H200); elsewhere only LayerNorm's with weight and bias up to
    12288; none with a residual or over clusters; at 16384 (8 vectors a thread) only LayerNorm's with
    weight and bias, to LAYER_NORM_REGISTERS (test_layer_norm_forward_keeps_to_its_registers)."""
    monkeypatch.setattr(norms, "fast_memory", lambda device: fast)
    stat = dynamic_rows(torch.empty(4))
    for n in (10000, 12288, 14000, 16384):
        x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        for rms, params, residual in ((False, 2, False), (False, 1, False), (False, 0, False), (True, 1, False),
                                      (True, 0, False), (False, 2, True)):
            wb = (w if params else None, w if params == 2 else None)
            res = x if residual else None
            rows, res_rows = dynamic_rows(x), dynamic_rows(res) if residual else None
            args = (rows, res_rows, *wb, rows, res_rows, stat, None if rms else stat, 1e-5)
            cfg, walk, ctas = norms.forward_shape(args, (x, res, *wb, x, res), rms, 0, {"arch": "sm_90a"})
            unwalked = walk == 1 and cfg.cluster == 1 and not residual
            want = 3 if unwalked and n <= (14336 if fast else 12288 if params == 2 else 0) else None
            if unwalked and not want and params == 2 and cfg.vectors == 8:     # (16384 off fast memory)
                want = 65536 // (norm_shapes.LAYER_NORM_REGISTERS * cfg.threads)
            assert ctas == want, (n, rms, params, residual, cfg, walk, ctas)
            if ctas:
                fwd = norms._forward.compile(*args, 1, cfg, rms, walk, ctas, options={"arch": "sm_90a"})
                spill = norm_shapes.BOUNDED_SPILL if (n, rms, params) == (14000, False, 2) else 0
                assert all(k["spill_stores"] <= spill and ctas_per_sm(k) >= ctas for k in fwd.kernels), \
                    (n, rms, params, fwd.kernels)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [2048, 4096, 8192, 16384])
def test_layer_norm_forward_keeps_to_its_registers(n, dtype, monkeypatch):
    """norm_shapes.unwalked_ctas: LayerNorm's forward with weight and bias at 8 vectors a thread (one
    row a CTA unwalked) asks ptxas for LAYER_NORM_REGISTERS, and fits them without spilling; free,
    it took 141 once bf16 lanes widened in integer operations (a CTA per SM fewer)."""
    monkeypatch.setattr(norms, "fast_memory", lambda device: False)
    x, w, stat = torch.empty(4, n, dtype=dtype), torch.empty(n, dtype=dtype), dynamic_rows(torch.empty(4))
    rows = dynamic_rows(x)
    args = (rows, None, w, w, rows, None, stat, stat, 1e-5)
    cfg, walk, ctas = norms.forward_shape(args, (x, None, w, w, x, None), False, 0, {"arch": "sm_90a"})
    assert (cfg.vectors, walk, ctas) == (8, 1, 65536 // (norm_shapes.LAYER_NORM_REGISTERS * cfg.threads)), cfg
    fwd = norms._forward.compile(*args, 1, cfg, False, walk, ctas, options={"arch": "sm_90a"})
    assert all(k["spill_stores"] == 0 and k["registers"] <= norm_shapes.LAYER_NORM_REGISTERS for k in fwd.kernels), \
        fwd.kernels


def test_the_layer_norm_backward_narrows_its_vectors_where_they_pad_the_row():
    """2560 bf16 columns: 128 threads x 3 vectors of 8 hold 3072; vectors of 4 hold the row
    exactly (5 each). RMSNorm and unpadded rows keep 16-byte vectors."""
    x, w = torch.empty(4, 2560, dtype=torch.bfloat16), torch.empty(2560, dtype=torch.bfloat16)
    layer = norm_shapes.backward_config(2560, (x, x, w, x), True)
    assert (layer.vec, layer.threads_per_row, layer.vectors, layer.padding) == (4, 128, 5, 0)
    assert norm_shapes.backward_config(2560, (x, x, w, x), False).vec == 8
    y, v = torch.empty(4, 4096, dtype=torch.bfloat16), torch.empty(4096, dtype=torch.bfloat16)
    assert norm_shapes.backward_config(4096, (y, y, v, y), True).vec == 8


def test_the_rms_norm_backward_spreads_rows_past_12288_columns_over_four_ctas_on_fast_memory():
    """norm_shapes.backward_config on fast memory: RMSNorm's over 16-bit rows of 12289-16384 columns
    whose rows are a multiple of 32 bytes, in 256-thread CTAs over clusters of 4 (16 values a
    thread); not rows of an odd multiple of 16 bytes (13000 columns, or 14336 with a row stride of
    14344), nor 12288 (pairs), nor other cards; LayerNorm's takes its 128-thread clusters."""
    for n, stride, spread in ((12800, 12800, True), (14336, 14336, True), (16384, 16384, True),
                              (13000, 13000, False), (14336, 14344, False), (12288, 12288, False)):
        x = torch.empty(4, stride, dtype=torch.bfloat16)[:, :n]
        w = torch.empty(n, dtype=torch.bfloat16)
        cfg = norm_shapes.backward_config(n, (x, w, x, x), False, fast=True)
        assert ((cfg.threads, cfg.cluster, cfg.vectors) == (256, 4, 2)) == spread, (n, stride, cfg)
        assert norm_shapes.backward_config(n, (x, w, x, x), True, fast=True).threads == 128
        assert norm_shapes.backward_config(n, (x, w, x, x), False).cluster != 4


def test_the_norm_backward_over_float32_rows_up_to_4096_halves_its_ctas_on_fast_memory():
    """norm_shapes.backward_config: both norms' over Float32 rows of 768-4096 columns take 256-thread
    CTAs on fast memory (768-1536 on other cards); at 6144 and 8192 RMSNorm's keeps 512 (a row takes
    more than 256 threads), bounded to two CTAs per SM from 2048 (backward_ctas), and LayerNorm's
    goes over pairs of 256-thread CTAs on fast memory (the test above), 512 unbounded elsewhere."""
    for n in (768, 2048, 3072, 4096, 6144, 8192):
        x = torch.empty(4, n)
        for layer in (False, True):
            fast = norm_shapes.backward_config(n, (x, torch.empty(n), x, x), layer, fast=True)
            slow = norm_shapes.backward_config(n, (x, torch.empty(n), x, x), layer)
            assert fast.threads == (256 if n <= 4096 or layer else 512), (n, layer, fast)
            assert slow.threads == (256 if n <= 1536 else 512), (n, layer, slow)
            for cfg in (fast, slow):
                if cfg.cluster == 1:
                    want = 2 if not layer and cfg.threads == 512 and n >= 2048 else None
                    assert norm_shapes.backward_ctas(cfg, layer, 32) == want, (n, layer, cfg)


def test_the_layer_norm_backward_pairs_ctas_over_rows_its_512_threads_held_at_three_or_four_vectors():
    """norm_shapes.PAIRED_LAYER_NORM: LayerNorm's over 16-bit rows of 3072, 6144 and 7168 columns, and
    on fast memory Float32 rows of 5120, 6144 and 8192, goes over pairs of CTAs holding one row each
    (at 3072 and 6144 in 16-byte vectors on fast memory, 8-byte ones elsewhere); without spilling.
    RMSNorm's keeps its shapes, and so do Float32 rows off fast memory and rows 16-byte vectors
    cannot read."""
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    for n, dtype, fast, want in ((3072, bf16, True, (8, 64, 64, 2)), (3072, f16, False, (4, 128, 128, 2)),
                                 (6144, bf16, True, (8, 128, 128, 2)), (6144, bf16, False, (4, 256, 256, 2)),
                                 (7168, bf16, True, (4, 128, 128, 2)), (7168, bf16, False, (4, 128, 128, 2)),
                                 (5120, f32, True, (4, 256, 256, 2)), (5120, f32, False, (4, 512, 512, 1)),
                                 (6144, f32, True, (4, 256, 256, 2)), (8192, f32, True, (4, 256, 256, 2)),
                                 (6144, f32, False, (4, 512, 512, 1)), (8192, bf16, False, (8, 256, 256, 1))):
        x, w = torch.empty(4, n, dtype=dtype), torch.empty(n, dtype=dtype)
        cfg = norm_shapes.backward_config(n, (x, w, x, x), True, fast)
        assert (cfg.vec, cfg.threads_per_row, cfg.threads, cfg.cluster) == want, (n, dtype, fast, cfg)
        assert norm_shapes.backward_config(n, (x, w, x, x), False, fast).cluster == 1
        odd = torch.empty(4, n + 4, dtype=dtype)[:, :n]          # rows 8-byte aligned only (16-bit)
        if dtype != f32:
            assert norm_shapes.backward_config(n, (odd, w, odd, odd), True, fast).cluster == 1
        if cfg.cluster == 2:
            compiled = _compile_backward(x, w, cfg, True)
            assert all(k["spill_stores"] == 0 for k in compiled.kernels), (n, dtype, fast, compiled.kernels)


def test_the_norm_backward_over_float32_rows_of_five_vectors_covers_them_exactly_on_fast_memory():
    """Float32 rows of 1280 and 2560 columns, which 4 vectors a thread pad: on fast memory half the
    threads a row, 5 vectors each (LayerNorm's in 512-thread CTAs, RMSNorm's in 256); elsewhere
    unchanged."""
    for n, per_row in ((1280, 64), (2560, 128)):
        x = torch.empty(4, n)
        for layer, threads in ((True, 512), (False, 256)):
            cfg = norm_shapes.backward_config(n, (x, torch.empty(n), x, x), layer, fast=True)
            assert (cfg.threads_per_row, cfg.vectors, cfg.padding, cfg.threads) == (per_row, 5, 0, threads), cfg
            assert norm_shapes.backward_config(n, (x, torch.empty(n), x, x), layer).threads_per_row == 2 * per_row


def test_the_float32_layer_norm_forward_past_8192_columns_keeps_two_ctas_per_sm():
    """norm_shapes.unwalked_ctas: LayerNorm's forward with weight and bias over Float32 rows of
    8193-16383 columns (one 256-thread CTA a row) bounded to two CTAs per SM, without spilling;
    RMSNorm's and LayerNorm's without a bias are not bounded."""
    stat = dynamic_rows(torch.empty(4))
    for n in (9000, 12288, 14336):
        x, w = torch.empty(4, n), torch.empty(n)
        rows = dynamic_rows(x)
        for rms, bias, want in ((False, w, 2), (False, None, None), (True, None, None)):
            args = (rows, None, w, bias, rows, None, stat, None if rms else stat, 1e-5)
            cfg, walk, ctas = norms.forward_shape(args, (x, None, w, bias, x, None), rms, 0, {"arch": "sm_90a"})
            assert (cfg.threads, cfg.cluster, walk, ctas) == (256, 1, 1, want), (n, rms, cfg, walk, ctas)
            if ctas:
                fwd = norms._forward.compile(*args, 1, cfg, rms, walk, ctas, options={"arch": "sm_90a"})
                assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= 2 for k in fwd.kernels), fwd.kernels


@pytest.mark.parametrize("fast", [True, False])
def test_the_layer_norm_backward_spreads_over_16_ctas_where_8_spill(fast, monkeypatch):
    """norms.backward_shape: LayerNorm's backward with weight and bias gradients over 16-bit rows
    that 8 512-thread CTAs hold in 4 padded vectors a thread (100000, 131000 columns) spills there,
    and runs over 16 CTAs of 256 threads, which do not spill; where 8 do not spill (70000, 131072,
    a weight's gradient only) it keeps them on fast memory. On slow memory (the H100) unpadded rows
    with a weight up to 131072 columns take the 16 too (65536, 131072; padded 70000 and 100000 do not)."""
    monkeypatch.setattr(norms, "fast_memory", lambda device: fast)
    spread = (16, 256) if not fast else (8, 512)
    for n, bias, want in ((100000, True, (16, 256)), (131000, True, (16, 256)), (131072, True, spread),
                          (70000, True, (8, 512)), (100000, False, (8, 512)), (65536, True, spread),
                          (131072, False, spread)):
        x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
        args = norm_backward_args(x, w, True, bias)
        cfg = norms.backward_shape(n, args, (x, w, x, x), True, 0, {"arch": "sm_90a"})
        assert (cfg.cluster, cfg.threads) == want, (n, bias, cfg)
        compiled = norms._backward.compile(*args, 1, cfg, options={"arch": "sm_90a"})
        assert all(k["spill_stores"] == 0 for k in compiled.kernels), (n, bias, compiled.kernels)
