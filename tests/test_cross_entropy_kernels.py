"""The cross-entropy kernels of kernels/cross_entropy.py (split from test_row_kernels.py, whose
run_small still takes them under compute-sanitizer).

CPU tier: the forward's shape in softmax's quack shape (compile-only). GPU tier: losses and
dlogits against float64 autograd on seeded inputs (N = 1, odd vocabularies, peeled rows, label
smoothing, ignored and out-of-range targets, a reduced gradient), outputs' memory poisoned first.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from cute_torch.kernels.row_reduce import dynamic_rows
from row_checks import check_close, ctas_per_sm, poison_allocator, rand_rows

needs_gpu = pytest.mark.gpu


@pytest.mark.parametrize("v,cluster", [(16392, 2), (40000, 4), (131072, 8)])
def test_cross_entropy_forward_takes_softmaxs_quack_shape(v, cluster):
    """cross_entropy.forward_shape: 16-bit rows over a cluster without label smoothing take
    softmax's direct shape (staged by .ca copies, five CTAs per SM without spilling); with
    smoothing, Float32 and rows off 16 bytes, chunks."""
    from cute_torch.kernels import cross_entropy
    x, t, f = torch.empty(4, v, dtype=torch.bfloat16), torch.empty(4, dtype=torch.int64), torch.empty(4)
    cfg, exact, direct = cross_entropy.forward_shape(x, False)
    assert direct and (cfg.threads, cfg.cluster, cfg.vec) == (256, cluster, 8)
    fwd = cross_entropy._forward.compile(dynamic_rows(x), dynamic_rows(t), dynamic_rows(f), dynamic_rows(f), 0.0, -100,
                                         cfg, exact, False, direct, options={"arch": "sm_90a"})
    assert fwd.__ptx__.count("cp.async.ca.shared.global") == cfg.vectors
    ctas = cross_entropy.DIRECT_CTAS
    assert all(k["spill_stores"] == 0 and ctas_per_sm(k) >= ctas for k in fwd.kernels), fwd.kernels
    odd = torch.empty(4, v + 8, dtype=torch.bfloat16)[:, :v + 4]
    for logits, smooth in ((x, True), (x.float(), False), (odd, False)):
        assert not cross_entropy.forward_shape(logits, smooth)[2]


@pytest.mark.parametrize("v,width,threads,ctas,fast", [
    (8200, 10240, 256, None, False), (10240, 10240, 256, None, False), (10248, 12288, 256, 4, False),
    (12288, 12288, 256, 4, True), (14000, 14336, 256, 3, False), (14336, 14336, 256, 3, False),
    (12296, 13312, 128, 4, True), (14000, 14336, 128, 4, True), (14336, 14336, 128, 4, True)])
def test_cross_entropy_forward_takes_one_chunk_just_past_a_chunk(v, width, threads, ctas, fast):
    """cross_entropy.forward_shape: 16-bit rows past CHUNK up to ONE_CHUNK columns without label
    smoothing take one chunk over the row in 256 threads (128 on fast memory past
    ONE_CHUNK_NARROW), not a CHUNK and a mostly empty one, bounded past five vectors a thread
    (ONE_CHUNK_CTAS); compiled without spilling, or in 128 threads within ONE_CHUNK_SPILL (what
    the launch accepts). With smoothing, Float32, rows off 16 bytes and rows past ONE_CHUNK:
    CHUNK-wide chunks."""
    from cute_torch.kernels import cross_entropy
    from cute_torch.kernels.row_chunks import CHUNK
    x, t, f = torch.empty(4, v, dtype=torch.bfloat16), torch.empty(4, dtype=torch.int64), torch.empty(4)
    cfg, exact, direct = cross_entropy.forward_shape(x, False, fast)
    assert not direct and (cfg.n, cfg.threads, cfg.rows, exact) == (width, threads, 1, width == v)
    assert cross_entropy.forward_ctas(v, 16, cfg, False, False) == ctas
    fwd = cross_entropy._forward.compile(dynamic_rows(x), dynamic_rows(t), dynamic_rows(f), dynamic_rows(f), 0.0, -100,
                                         cfg, exact, False, direct, options={"arch": "sm_90a"})
    spill = cross_entropy.ONE_CHUNK_SPILL if threads == 128 else 0
    assert cross_entropy.accepted_spill(cfg, ctas) == spill
    assert all(k["spill_stores"] <= spill and ctas_per_sm(k) >= (ctas or 1) for k in fwd.kernels), fwd.kernels
    odd = torch.empty(4, v + 8, dtype=torch.bfloat16)[:, :v + 4]
    longer = torch.empty(4, 14344, dtype=torch.bfloat16)
    for logits, smooth in ((x, True), (x.float(), False), (odd, False), (longer, False)):
        assert cross_entropy.forward_shape(logits, smooth, fast)[0].n <= CHUNK


def test_cross_entropy_forward_holds_short_float32_rows_in_half_the_threads_on_fast_memory():
    """cross_entropy.forward_shape: Float32 rows of up to 256 columns that 2 vectors a thread
    hold take 4 in half the threads on fast memory, the chunk still the row (exact), unbounded
    and without spilling; with smoothing, wider rows and other cards keep the chunk's shape."""
    from cute_torch.kernels import cross_entropy
    from cute_torch.kernels.row_chunks import chunk_config
    t, f = torch.empty(4, dtype=torch.int64), torch.empty(4)
    for v, per_row in ((128, 8), (256, 16)):
        x = torch.empty(4, v)
        cfg, exact, direct = cross_entropy.forward_shape(x, False, True)
        assert (cfg.n, cfg.threads_per_row, cfg.vectors, exact, direct) == (v, per_row, 4, True, False), cfg
        assert cross_entropy.forward_ctas(v, 32, cfg, False, False) is None
        fwd = cross_entropy._forward.compile(dynamic_rows(x), dynamic_rows(t), dynamic_rows(f), dynamic_rows(f), 0.0,
                                             -100, cfg, exact, False, direct, options={"arch": "sm_90a"})
        assert all(k["spill_stores"] == 0 for k in fwd.kernels), fwd.kernels
        for logits, smooth, fast in ((x, False, False), (x, True, True)):
            assert cross_entropy.forward_shape(logits, smooth, fast)[0] == chunk_config(logits)[0], (v, smooth, fast)
    wider = torch.empty(4, 512)
    assert cross_entropy.forward_shape(wider, False, True)[0] == chunk_config(wider)[0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cross_entropy_forward_holds_short_16bit_rows_in_half_the_threads(dtype):
    """cross_entropy.forward_shape: 16-bit rows of 128-512 columns in 16-byte vectors take twice
    the vectors in half the threads a row on every card, free of forward_ctas's bound and without
    spilling; with smoothing, shorter (64) and wider (1024) rows keep the chunk's shape and bound."""
    from cute_torch.kernels import cross_entropy
    from cute_torch.kernels.row_chunks import chunk_config
    t, f = torch.empty(4, dtype=torch.int64), torch.empty(4)
    for v, per_row, vectors in ((128, 8, 2), (200, 8, 4), (256, 8, 4), (512, 16, 4)):
        x = torch.empty(4, v, dtype=dtype)
        for fast in (False, True):
            cfg, exact, direct = cross_entropy.forward_shape(x, False, fast)
            assert (cfg.threads_per_row, cfg.vectors, exact, direct) == (per_row, vectors, v != 200, False), cfg
            assert cfg.threads_per_row * 2 == chunk_config(x)[0].threads_per_row
            assert cross_entropy.forward_ctas(v, 16, cfg, False, False) is None
        fwd = cross_entropy._forward.compile(dynamic_rows(x), dynamic_rows(t), dynamic_rows(f), dynamic_rows(f), 0.0,
                                             -100, cfg, exact, False, direct, options={"arch": "sm_90a"})
        assert all(k["spill_stores"] == 0 for k in fwd.kernels), fwd.kernels
        smooth_cfg = cross_entropy.forward_shape(x, True, True)[0]
        assert smooth_cfg == chunk_config(x)[0] and cross_entropy.forward_ctas(v, 16, smooth_cfg, True, False) == 5
    for v, ctas in ((64, 16), (1024, 12)):
        x = torch.empty(4, v, dtype=dtype)
        cfg = cross_entropy.forward_shape(x, False, True)[0]
        assert cfg == chunk_config(x)[0] and cross_entropy.forward_ctas(v, 16, cfg, False, False) == ctas, v


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,v", [(1, 1), (70, 128), (41, 200), (45, 256), (29, 512), (33, 1000), (37, 3000),
                                 (8, 8192), (9, 10000), (40, 12288), (20, 32000), (6, 50257), (4, 128256)])
@pytest.mark.parametrize("inplace", [False, True])
def test_cross_entropy_forward_and_backward(m, v, dtype, inplace):
    from cute_torch.kernels import cross_entropy
    seed = m * 13 + v
    logits = rand_rows((m, v), seed, dtype, scale=4.0)
    g = torch.Generator().manual_seed(seed + 1)
    target = torch.randint(0, v, (m,), generator=g).cuda()
    target[::3] = -100                                          # ignored rows, the first among them
    dloss = rand_rows((m,), seed + 2, torch.float32)
    ref_in = logits.double().requires_grad_()
    want = F.cross_entropy(ref_in, target, ignore_index=-100, reduction="none")
    want.backward(dloss.double())
    poison_allocator()
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    check_close(loss, want.detach(), torch.float32, "loss")
    check_close(lse, torch.logsumexp(logits.double(), -1), torch.float32, "lse")
    poison_allocator()
    work = logits.clone() if inplace else logits
    dx = cross_entropy.cross_entropy_backward(work, target, lse, dloss, inplace=inplace)
    assert (dx.data_ptr() == work.data_ptr()) == inplace
    check_close(dx, ref_in.grad, dtype, "dlogits")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,v", [(33, 1000), (8, 8192), (6, 50257), (4, 128256)])
def test_cross_entropy_with_label_smoothing_matches_torch(m, v, dtype):
    """torch's label_smoothing: (1 - e) nll + e (lse - mean(x)). Row 1 has -inf logits, which
    torch counts in the mean (an infinite loss) and whose gradient is -e/V there."""
    from cute_torch.kernels import cross_entropy
    seed, e = m * 17 + v, 0.15
    logits = rand_rows((m, v), seed, dtype, scale=4.0)
    logits[1, 1::7] = -math.inf
    target = torch.randint(0, v, (m,), generator=torch.Generator().manual_seed(seed + 1)).cuda()
    target[1] = 0
    target[::3] = -100
    dloss = rand_rows((m,), seed + 2, torch.float32)
    ref_in = logits.double().requires_grad_()
    want = F.cross_entropy(ref_in, target, reduction="none", label_smoothing=e)
    want.backward(dloss.double())
    poison_allocator()
    loss, lse = cross_entropy.cross_entropy_forward(logits, target, label_smoothing=e)
    finite = [r for r in range(m) if r != 1]
    assert loss[1].item() == math.inf == want[1].item()
    check_close(loss[finite], want.detach()[finite], torch.float32, "loss")
    poison_allocator()
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, dloss, label_smoothing=e)
    check_close(dx, ref_in.grad, dtype, "dlogits")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\], got 1.5"):
        cross_entropy.cross_entropy_forward(logits, target, label_smoothing=1.5)


@needs_gpu
@pytest.mark.parametrize("v", [32768, 40000, 50257])
def test_cross_entropy_backward_takes_the_target_off_in_every_chunk_and_edge(v):
    """Each chunk of a row is its own CTA in the backward, and the CTA that wrote the target's
    column takes (1 - e) dloss off it: targets at the row's ends, either side of each chunk
    boundary (backward_shape's chunks: 16384 columns here but for the peeled rows' 8192), and
    (50257 bf16 columns: rows peeled, each starting at another 16-byte offset) in the edges
    before the first whole vector and after the last."""
    from cute_torch.kernels import cross_entropy
    like = torch.empty((2, v), dtype=torch.bfloat16, device="cuda")
    width = cross_entropy.backward_shape(like, like)[0].n
    assert width == (8192 if v == 50257 else 16384)
    columns = [0, 1, 7, v - 1, v - 2, v - 8] + [c for k in range(1, -(-v // width)) for c in (width * k - 1, width * k)]
    m = len(columns)
    logits = rand_rows((m, v), v, torch.bfloat16, scale=4.0)
    target = torch.tensor(columns, device="cuda")
    dloss = rand_rows((m,), v + 1, torch.float32)
    ref_in = logits.double().requires_grad_()
    F.cross_entropy(ref_in, target, reduction="none").backward(dloss.double())
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    poison_allocator()
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, dloss)
    check_close(dx, ref_in.grad, torch.bfloat16, "dlogits")
    rows = torch.arange(m, device="cuda")
    check_close(dx[rows, target], ref_in.grad[rows, target], torch.bfloat16, "dlogits at the targets")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,v", [(300, 32768), (7, 40000), (5, 131072)])
def test_cross_entropy_forward_in_softmaxs_quack_shape(m, v, dtype):
    """cross_entropy.forward_shape's direct forward (one row per cluster, staged, one
    exchange): many rows, a last CTA's part past V (40000), targets at the row's ends, ignored
    and out of range (NaN), and a row of -inf logits but its target's; loss and lse against
    float64."""
    from cute_torch.kernels import cross_entropy
    logits = rand_rows((m, v), m + v, dtype, scale=4.0)
    logits[2, 1:] = -math.inf
    target = torch.randint(0, v, (m,), generator=torch.Generator().manual_seed(v)).cuda()
    target[:5] = torch.tensor([v - 1, -100, 0, v, -7])
    poison_allocator()
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    assert loss[3].isnan() and loss[4].isnan()
    good = [r for r in range(m) if r not in (3, 4)]
    want = F.cross_entropy(logits.double()[good], target[good], reduction="none")
    check_close(loss[good], want, torch.float32, "loss")
    check_close(lse, torch.logsumexp(logits.double(), -1), torch.float32, "lse")


@needs_gpu
def test_cross_entropy_all_rows_ignored_and_a_reduced_gradient():
    from cute_torch.kernels import cross_entropy
    logits = rand_rows((5, 300), 91, torch.bfloat16)
    target = torch.full((5,), -100, device="cuda")
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    assert (loss == 0).all()
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, torch.tensor(0.5, device="cuda"))
    assert (dx == 0).all()
    target = torch.tensor([1, 2, 3, 4, 5], device="cuda")
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    ref_in = logits.double().requires_grad_()
    F.cross_entropy(ref_in, target, reduction="mean").backward()
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, torch.tensor(1 / 5, device="cuda"))
    check_close(dx, ref_in.grad, torch.bfloat16, "dlogits (mean)")


@needs_gpu
def test_cross_entropy_targets_out_of_range_give_nan_rows_and_read_nothing():
    from cute_torch.kernels import cross_entropy
    logits = rand_rows((4, 1000), 95, torch.bfloat16)
    target = torch.tensor([3, 1000, -7, 999], device="cuda")
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    want = F.cross_entropy(logits.double()[[0, 3]], target[[0, 3]], reduction="none")
    assert loss[1].isnan() and loss[2].isnan()
    check_close(loss[[0, 3]], want, torch.float32, "loss of the good rows")
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, torch.ones(4, device="cuda"))
    assert dx[1].isnan().all() and dx[2].isnan().all() and torch.isfinite(dx[[0, 3]]).all()


@needs_gpu
def test_cross_entropy_on_a_slice_of_a_padded_vocabulary():
    """Logits (M, 50257) sliced from a (M, 50304) buffer: the vector must divide V and suit the
    contiguous dlogits as well (found in review: 16-byte vectors read past V and misaligned)."""
    from cute_torch.kernels import cross_entropy
    big = rand_rows((6, 50304), 71, torch.bfloat16, scale=3.0)
    logits = big[:, :50257]
    target = torch.tensor([0, 50256, 17, 50000, -100, 3], device="cuda")
    ref = logits.double().requires_grad_()
    want = F.cross_entropy(ref, target, reduction="none")
    want.backward(torch.ones(6, dtype=torch.float64, device="cuda"))
    loss, lse = cross_entropy.cross_entropy_forward(logits, target)
    check_close(loss, want.detach(), torch.float32, "loss")
    dx = cross_entropy.cross_entropy_backward(logits, target, lse, torch.ones(6, device="cuda"))
    check_close(dx, ref.grad, torch.bfloat16, "dlogits")
