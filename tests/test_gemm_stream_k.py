"""Stream-K in the Hopper GEMM (kernels/gemm_stream_k.py): the last partial wave's tiles shared
among all CTAs by k-tiles. CPU tier: every CTA's walk, simulated, covers each k-tile of each
tile once, each shared tile has one finisher that waits only on CTAs of lower indices, each CTA
publishes at most one partial; the kernel compiles without spills and publishes with a GPU-scope
fence; bad requests are errors. GPU tier: values against float64 on few CTAs (many ranges per
CTA, empty ranges, tails in M, N and K), every layout, an epilogue with inputs; compute-sanitizer."""

import itertools
import re

import pytest
import torch

import cute_torch as cute
from conftest import run_under_sanitizer
from cute_torch.kernels.gemm_sm90 import _gemm_host, host_arguments
from cute_torch.kernels.gemm_stream_k import Walk, stream_k_tiles

needs_sm90a = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="needs an sm_90 GPU")


def _walks(tiles, ctas, k_tiles):
    """Per CTA, the (tile, k0, k1) units of its walk (Walk on Python integers)."""
    walks = {}
    for cta in range(ctas):
        walk = Walk(tiles, k_tiles, cta, ctas, cta, ctas, stream_k=True)
        walks[cta] = (walk, [walk.unit(u) for u in range(*walk.units())])
    return walks


def _waited_on(walk, tile_id):
    """The CTAs a finisher waits for (gather_partials's loop, on Python integers)."""
    start, rank, ctas = (tile_id - walk.whole) * walk.k_tiles, walk.rank - 1, []
    while rank >= 0 and walk.begin(rank + 1) > start:
        if walk.begin(rank + 1) > walk.begin(rank):
            ctas.append(rank)
        rank -= 1
    return ctas


@pytest.mark.parametrize("tiles,ctas,k_tiles", list(itertools.product([1, 7, 130, 140, 200, 512, 2048], [1, 3, 7, 132],
                                                                       [1, 2, 5, 64, 127])))
def test_every_k_tile_of_every_tile_runs_once_and_each_shared_tile_has_one_finisher(tiles, ctas, k_tiles):
    ctas = min(ctas, tiles)                               # the grid: min(tiles, SMs)
    walks = _walks(tiles, ctas, k_tiles)
    whole = tiles - stream_k_tiles(tiles, ctas)
    covered = {}
    for cta, (walk, units) in walks.items():
        assert walk.whole == whole
        for i, (tile, k0, k1) in enumerate(units):
            assert 0 <= k0 < k1 <= k_tiles, (cta, tile, k0, k1)
            for kt in range(k0, k1):
                assert (tile, kt) not in covered, f"k-tile {kt} of tile {tile}: CTAs {covered[tile, kt]} and {cta}"
                covered[tile, kt] = cta
            if tile < whole:
                assert (k0, k1) == (0, k_tiles)           # run whole, as without stream-K
            # Only a range's last piece, run first, may end inside its tile (a partial to publish).
            assert k1 == k_tiles or i == walk.count, (cta, units)
            # Every piece of the range but the previous tile's tail, run last, starts at k-tile 0.
            assert k0 == 0 or i == len(units) - 1, (cta, units)
    assert len(covered) == tiles * k_tiles
    for tile in range(whole, tiles):
        runs = [(cta, k0, k1) for cta, (_, units) in walks.items() for t, k0, k1 in units if t == tile]
        finisher = [cta for cta, _, k1 in runs if k1 == k_tiles]
        assert len(finisher) == 1, runs
        others = sorted(cta for cta, _, k1 in runs if k1 < k_tiles)
        assert sorted(_waited_on(walks[finisher[0]][0], tile)) == others
        assert all(cta < finisher[0] for cta in others)   # started no later: no CTA waits on one not running


def test_the_shared_tiles_are_the_partial_wave_and_the_wave_before_a_small_one():
    assert stream_k_tiles(512, 132) == 116               # 4096^3 in 128 x 256 tiles: 3.88 waves
    assert stream_k_tiles(528, 132) == 0                 # four whole waves
    assert stream_k_tiles(15 * 132 + 10, 132) == 10 + 132  # a sliver of a wave goes with the wave before
    assert stream_k_tiles(140, 132) == 140


def _arguments(m, n, k, epilogue=None, inputs=(), **variant):
    a, b = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16).t()
    return host_arguments(a, b, torch.empty(m, n, dtype=torch.bfloat16), epilogue, inputs, **variant)


def test_the_stream_k_kernel_publishes_with_a_gpu_fence_and_does_not_spill(recwarn):
    args = _arguments(4096, 4096, 4096, "gelu_tanh(acc + x0)", (torch.empty(4096, dtype=torch.bfloat16),),
                      stream_k=True)
    assert args[3].stream_k and not args[3].pingpong and args[3].tile_n == 256
    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    ptx = kernel.__ptx__
    assert ptx.count("fence.acq_rel.gpu;") == 2 and ptx.count("atom.add.s32") == 3   # publish; wait, lower
    assert "ld.global.nc" not in ptx                      # partials written in this launch: coherent loads
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0
    assert not [w for w in recwarn if issubclass(w.category, cute.SpillWarning)]
    plain = cute.compile(_gemm_host, *_arguments(4096, 4096, 4096, schedule="cooperative"),
                         options={"arch": "sm_90a"})
    assert "fence.acq_rel" not in plain.__ptx__ and "atom." not in plain.__ptx__


def test_stream_k_takes_the_cooperative_schedule_and_refuses_the_others():
    assert not _arguments(8192, 8192, 2048, stream_k=True)[3].pingpong   # wide_pingpong's shape otherwise
    with pytest.raises(ValueError, match="stream-K runs the cooperative schedule"):
        _arguments(1024, 1024, 1024, schedule="pingpong", stream_k=True)
    with pytest.raises(ValueError, match="stream-K runs the cooperative schedule"):
        _arguments(1024, 1024, 1024, cluster=True, stream_k=True)


def _check(m, n, k, ctas, dtype=torch.bfloat16, a_row_major=True, b_row_major=False, tile_n=256, seed=0,
           epilogue=None, bias=False, residual=False, reference=lambda acc, *inputs: acc + sum(inputs)):
    """A stream-K GEMM on `ctas` CTAs (the SM count the grid is sized from), its output poisoned
    first, against float64 rounded to the output type, every element."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
    a = (a if a_row_major else a.t().contiguous().t()).cuda()
    b = (b if b_row_major else b.t().contiguous().t()).cuda()
    inputs = ((torch.randn(n, generator=g).to(dtype).cuda(),) if bias else ()) + \
        ((torch.randn(m, n, generator=g).to(dtype).cuda(),) if residual else ())
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    args = list(host_arguments(a, b, c, epilogue, inputs, tile_n=tile_n, stream_k=True))
    args[2] = ctas
    _gemm_host(*args)
    torch.cuda.synchronize()
    want = reference(a.double() @ b.double(), *(x.double() for x in inputs))
    torch.testing.assert_close(c.cpu().double(), want.to(dtype).cpu().double(), rtol=8e-3, atol=1e-2)


def run_small():
    """The sanitizer's workload: few CTAs, several ranges each, empty ranges, an epilogue."""
    _check(700, 1000, 200, 3, epilogue="acc + x0", bias=True, seed=1)
    _check(700, 1000, 576, 5, tile_n=128, seed=2)
    _check(300, 520, 64, 7, seed=3)                       # one k-tile per tile: ranges of 0 or 1


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("ctas", [1, 3, 5, 7, 13])
@pytest.mark.parametrize("m,n,k", [(700, 1000, 200), (1024, 768, 1000), (300, 520, 64)])
def test_stream_k_matches_matmul_on_a_few_ctas(m, n, k, ctas):
    _check(m, n, k, ctas, seed=m + k + ctas)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tile_n", [128, 256])
def test_stream_k_takes_every_layout_and_dtype(a_row_major, b_row_major, dtype, tile_n):
    _check(640, 1000, 1000, 7, dtype, a_row_major, b_row_major, tile_n, seed=tile_n)


@pytest.mark.gpu
@needs_sm90a
def test_a_finisher_runs_the_epilogue_with_its_inputs():
    _check(700, 1000, 704, 5, epilogue="gelu_tanh(acc + x0) + x1", bias=True, residual=True, seed=9,
           reference=lambda acc, bias, res: torch.nn.functional.gelu(acc + bias, approximate="tanh") + res)


@pytest.mark.gpu
@needs_sm90a
def test_stream_k_on_every_sm_matches_matmul():
    """The partial last wave of a real grid: 4096 x 4096 tiles of 128 x 256 on the card's SMs."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    _check(4096, 4096, 4096, sms, seed=4)
    _check(4096 + 128, 2048, 2048, sms, seed=5)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_stream_k_is_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_gemm_stream_k as t; t.run_small()")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]
