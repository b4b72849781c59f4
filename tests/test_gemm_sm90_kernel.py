"""The library's Hopper GEMM (kernels/gemm_sm90.py): persistent, warp-specialized, TMA in and out,
a fused epilogue, operands row- or column-major. Compile tier: the instructions, transpose bits
and TMA boxes of all four layouts, the register budget (ptxas, no spills), the epilogue traced
into the kernel. GPU tier: shapes with tails in M, N and K, bf16 and fp16, every layout, a fused
epilogue, against float64 rounded to the output type, every element; compute-sanitizer."""

import math
import re

import pytest
import torch

import cute_torch as cute
from conftest import run_under_sanitizer
from cute_torch.kernels.gemm_sm90 import _gemm_host, _stages, epi_n, gemm, host_arguments

needs_sm90a = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="needs an sm_90 GPU")


def _operands(m, n, k, dtype, a_row_major=True, b_row_major=True, device="cpu", seed=0):
    """a (M, K) and b (K, N), each row-major or a column-major view (a transposed contiguous tensor)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    a = a.to(device) if a_row_major else a.t().contiguous().to(device).t()
    b = b.to(device) if b_row_major else b.t().contiguous().to(device).t()
    return a, b


def _compile(epilogue=None, dtype=torch.bfloat16, a_row_major=True, b_row_major=True):
    a, b = _operands(304, 520, 448, dtype, a_row_major, b_row_major)    # TMA: rows of 16-byte multiples
    args = host_arguments(a, b, torch.empty(304, 520).to(dtype), epilogue, tile_n=256)
    return cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})


@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (True, False), (False, True), (False, False)])
def test_the_kernel_is_warp_specialized_with_tma_in_and_out(recwarn, a_row_major, b_row_major):
    ptx = _compile(a_row_major=a_row_major, b_row_major=b_row_major).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 4
    # The transpose bits: A is K-major when row-major; B (K, N) is K-major when column-major.
    assert ptx.count(f"p, 1, 1, {int(not a_row_major)}, {int(b_row_major)};") == 4
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 16        # 256 columns / 16
    # A and B per k-tile: one box each when K-major, 128/64 and 256/64 boxes when MN-major.
    loads = (1 if a_row_major else 2) + (4 if b_row_major else 1)
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == loads
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4      # the C tile: 4 boxes of 64
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert not [w for w in recwarn if issubclass(w.category, cute.SpillWarning)]


def test_auto_assembles_warp_specialized_kernels_with_ptxas():
    """setmaxnreg kernels run at ptxas's register cap, where nvJitLink's relocatable code spills:
    `auto` gives them ptxas's whole-program mode (when the toolkit has ptxas)."""
    import os
    from cute_torch.env import knobs
    if not os.access(os.path.join(knobs().cuda_home, "bin", "ptxas"), os.X_OK):
        pytest.skip("no ptxas in the toolkit")
    kernel = _compile()
    assert kernel.metadata["cubin_backend"] == "ptxas" and kernel.metadata["kernels"][0]["spill_stores"] == 0


def test_a_batched_gemm_uses_three_dimensional_boxes():
    a, b = torch.randn(3, 200, 320).bfloat16(), torch.randn(3, 264, 320).bfloat16()   # b as (L, N, K)
    args = host_arguments(a, b.transpose(1, 2), torch.empty(3, 200, 264).bfloat16(), tile_n=256)
    ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster.global") == 2
    assert ptx.count("cp.async.bulk.tensor.3d.global.shared::cta") == 4


def test_an_expression_epilogue_reads_its_inputs_at_each_accumulator():
    a, b = _operands(300, 520, 448, torch.bfloat16)
    # The residual's row stride (522: even, 1044 bytes) is not TMA's, so it is not staged.
    c, bias, residual = torch.empty(300, 520).bfloat16(), torch.randn(520), torch.randn(300, 522).bfloat16()[:, :520]
    args = host_arguments(a, b, c, "gelu(acc + x0) + x1", (bias, residual), tile_n=256)
    assert args[3].staged == ()
    ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
    # Each thread reads its 128 accumulators' residual (bf16) elements two adjacent columns per load,
    # and the bias (fp32) once per column pair of each 16-column group (the broadcast stride stays
    # a static 0): 2 pairs x 16 groups.
    assert ptx.count("ld.global.b32") == 64 and ptx.count("ld.global.v2.f32") == 32
    assert "ld.global.b16" not in ptx and "ld.global.f32" not in ptx
    assert args[6] == (True, True)
    # A residual whose row stride is odd cannot be read in 32-bit pairs: one element per load.
    odd = torch.randn(300, 521).bfloat16()[:, :520]
    args = host_arguments(a, b, c, "acc + x0", (odd,), tile_n=256)
    assert args[6] == (False,)
    ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("ld.global.b16") == 128 and "ld.global.b32" not in ptx
    with pytest.raises(ValueError, match="inputs= go with an expression"):
        host_arguments(a, b, c, None, (bias,))


def test_a_tile_between_the_standard_widths_stores_through_a_buffer_per_box():
    a, b = _operands(1536, 1536, 512, torch.bfloat16, b_row_major=False)
    c = torch.empty(1536, 1536).bfloat16()
    ptx = cute.compile(_gemm_host, *host_arguments(a, b, c, tile_n=144), options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16") == 4
    # Nine 16-column boxes, each its own buffer: one TMA store each, one wait (at the first box).
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 9
    assert _stages((2,), 144) == 5 and epi_n(1, 144) == 16 and epi_n(1, 160) == 32
    with pytest.raises(ValueError, match="K-major B"):
        host_arguments(*_operands(1536, 1536, 512, torch.bfloat16), c, tile_n=144)
    with pytest.raises(ValueError, match="multiple of 16"):
        host_arguments(a, b, c, tile_n=150)
    with pytest.raises(ValueError, match="no gate"):
        host_arguments(a, b, c[:, :768], "silu(gate) * up", tile_n=144)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)       # fp8 keeps the four widths
    with pytest.raises(ValueError, match="16-bit operands"):
        host_arguments(a8, b8, c, tile_n=144)
    assert host_arguments(a8, b8, c)[3].tile_n == 192 and host_arguments(a, b, c)[3].tile_n == 144
    import cute_torch.ops  # noqa: F401 - registers cute::gemm_choice
    choice = torch.ops.cute.gemm_choice
    assert choice(a8, b8, [], 1, 132) == "192" and choice(a, b, [], 1, 132) == "144"


def test_the_epilogue_is_traced_into_the_kernel():
    plain = _compile().__ptx__
    fused = _compile(lambda acc: cute.where(acc > 0.0, acc, 0.0) * 2.0).__ptx__
    assert fused.count("max.f32") + fused.count("selp.f32") > plain.count("max.f32") + plain.count("selp.f32")


def _check(m, n, k, dtype, epilogue=None, reference=lambda x: x, seed=0, a_row_major=True, b_row_major=True,
           tile_n=None, schedule=None, cluster=False, tile_m=None, m_major_out=False):
    a, b = _operands(m, n, k, dtype, a_row_major, b_row_major, "cuda", seed)
    c = torch.full((n, m) if m_major_out else (m, n), float("nan"), dtype=dtype, device="cuda")
    c = c.t() if m_major_out else c
    gemm(a, b, c, epilogue, tile_n=tile_n, schedule=schedule, cluster=cluster, tile_m=tile_m)
    torch.cuda.synchronize()
    want = reference(a.double() @ b.double()).to(dtype)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(128, 256, 64), (300, 520, 448), (1024, 768, 1000), (64, 1000, 2056)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tile_n", [64, 128, 192, 256])
def test_gemm_matches_matmul(m, n, k, dtype, tile_n):
    _check(m, n, k, dtype, seed=m + n + k, tile_n=tile_n)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize("tile_n", [64, 128, 192, 256])
def test_every_operand_layout_matches_matmul(a_row_major, b_row_major, tile_n):
    _check(384, 512, 576, torch.bfloat16, seed=5, a_row_major=a_row_major, b_row_major=b_row_major, tile_n=tile_n)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n", [80, 96, 112, 144, 160, 176, 208, 224, 240])
@pytest.mark.parametrize("m,n,k", [(300, 520, 448), (1024, 1000, 1000)])
def test_any_tile_width_matches_matmul(m, n, k, tile_n):
    """Widths between the four that take any operands: K-major B (F.linear's weight.t()), output
    boxes of 16 or 32 columns, one buffer per box when there is an odd number of them."""
    _check(m, n, k, torch.bfloat16, seed=m + tile_n, b_row_major=False, tile_n=tile_n)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n", [144, 160])
def test_an_odd_width_tile_fuses_inputs_and_two_outputs_over_batches(tile_n):
    g = torch.Generator().manual_seed(tile_n)
    a = torch.randn(2, 300, 448, generator=g).bfloat16().cuda()
    b = torch.randn(2, 520, 448, generator=g).bfloat16().cuda().transpose(1, 2)      # K-major
    bias = torch.randn(520, generator=g).cuda()
    residual = torch.randn(2, 300, 520, generator=g).bfloat16().cuda()
    pre = torch.full((2, 300, 520), float("nan"), dtype=torch.float32, device="cuda")
    out = torch.full((2, 300, 520), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, (pre, out), ("acc + x0", "gelu(acc + x0) + x1"), (bias, residual), tile_n=tile_n)
    acc = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(pre.double(), acc, rtol=1e-4, atol=1e-3)
    want = torch.nn.functional.gelu(acc) + residual.double()
    torch.testing.assert_close(out.double(), want.to(torch.bfloat16).double(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@needs_sm90a
def test_a_fused_epilogue_matches_torch():
    _check(520, 296, 448, torch.bfloat16, lambda acc: cute.where(acc > 0.0, acc, 0.0) * 2.0,
           lambda x: torch.relu(x) * 2.0, seed=3)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("activation", ["gelu_tanh", "silu", "sigmoid", "gelu"])
def test_fast_epilogue_activations_are_within_bfloat16_tolerance_of_exact(activation):
    """A 16-bit output takes the fast forms (tanh.approx, see pointwise/emit.py's _FAST): every
    bfloat16 accumulator value in [-40, 40] (acc = a's first column times b's first row of ones,
    exact) gives a result within torch.testing's bfloat16 tolerance of the exact value."""
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    v = bits[bits.float().isfinite() & (bits.float().abs() <= 40)]
    a = torch.zeros(v.numel(), 16, dtype=torch.bfloat16)
    a[:, 0] = v
    b = torch.zeros(16, 16, dtype=torch.bfloat16)
    b[0] = 1
    c = torch.full((v.numel(), 16), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a.cuda(), b.cuda(), c, f"{activation}(acc)")
    x = v.double()
    exact = {"gelu_tanh": x * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)),
             "silu": x * torch.sigmoid(x), "sigmoid": torch.sigmoid(x),
             "gelu": x * 0.5 * torch.erfc(-x / math.sqrt(2))}[activation]
    got = c.cpu().double()
    for column in range(16):
        torch.testing.assert_close(got[:, column], exact, rtol=1.6e-2, atol=1e-5)


def run_small():
    for tile_n in (64, 128, 192, 256):
        _check(300, 520, 448, torch.bfloat16, tile_n=tile_n)
    _check(300, 520, 448, torch.bfloat16, b_row_major=False, tile_n=144)    # a buffer per output box
    _few_ctas(3, "pingpong")
    _few_ctas(3, "pingpong", tile_m=64)
    _few_ctas(4, "cooperative", cluster=True)
    _staged_check(300, 264, 320, batches=3, outputs=2, seed=6, tile_m=64, tile_n=256)
    _staged_check(300, 520, 448, seed=1)
    _staged_check(300, 520, 448, seed=2, tile_n=256)       # the cooperative schedule's staging
    test_fp32_outputs_match_matmul(256, None)
    test_gated_epilogues_match_torch(128, "pingpong")
    _check(304, 520, 448, torch.bfloat16, tile_n=256, m_major_out=True)              # stmatrix.trans, 64-row boxes
    _check(304, 520, 448, torch.bfloat16, tile_n=128, tile_m=64, m_major_out=True)
    _check(300, 520, 448, torch.bfloat16, tile_n=192, schedule="pingpong")          # wide_pingpong's tiles


def _few_ctas(ctas: int, schedule: str, raster: str = "m", cluster: bool = False, tile_m=None):
    """A GEMM with a bias epilogue on only `ctas` CTAs: each walks many tiles (both ping-pong
    owners several each; clusters: pairs of tile rows, the last one half past M), tails in M, N
    and K."""
    a, b = _operands(700, 1000, 200, torch.bfloat16, device="cuda", seed=31)
    bias = torch.randn(1000, generator=torch.Generator().manual_seed(32)).cuda()
    c = torch.full((700, 1000), float("nan"), dtype=torch.bfloat16, device="cuda")
    args = list(host_arguments(a, b, c, "acc + x0", (bias,), schedule=schedule, raster=raster, cluster=cluster,
                               tile_m=tile_m))
    args[2] = ctas                                        # the SM count the grid is sized from
    _gemm_host(*args)
    torch.cuda.synchronize()
    want = (a.double() @ b.double() + bias.double()).to(torch.bfloat16)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("schedule", ["cooperative", "pingpong"])
@pytest.mark.parametrize("ctas", [1, 3, 4])
@pytest.mark.parametrize("raster", ["m", "n"])
def test_a_few_ctas_walk_every_tile_in_either_schedule(schedule, ctas, raster):
    _few_ctas(ctas, schedule, raster)


# -- clusters: two CTAs on vertically adjacent tiles share (multicast) their B tiles --------------

@pytest.mark.parametrize("b_row_major,boxes", [(False, 1), (True, 4)])
def test_a_cluster_multicasts_half_of_each_b_tile_from_each_cta(b_row_major, boxes):
    a, b = _operands(304, 520, 448, torch.bfloat16, True, b_row_major)
    args = host_arguments(a, b, torch.empty(304, 520).bfloat16(), tile_n=256, cluster=True)
    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    ptx = kernel.__ptx__
    # K-major B: rows 128 x rank ... of the 256 x 64 tile; N-major: 32 of the 64 k of each 64-column box.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     ".multicast::cluster") == boxes
    assert ptx.count("mbarrier.arrive.shared::cluster.b64") == 2   # releases in the peer
    assert ptx.count("barrier.cluster.wait") == 1            # the barriers exist before a peer uses them
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0
    with pytest.raises(ValueError, match="cooperative schedule"):
        host_arguments(a, b, torch.empty(304, 520).bfloat16(), schedule="pingpong", cluster=True)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(128, 256, 64), (300, 520, 448), (1024, 768, 1000), (640, 1000, 2056)])
@pytest.mark.parametrize("tile_n", [128, 256])
def test_a_clustered_gemm_matches_matmul(m, n, k, tile_n):
    _check(m, n, k, torch.bfloat16, seed=m + k, tile_n=tile_n, cluster=True)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, False), (False, True), (False, False)])
def test_a_clustered_gemm_takes_every_operand_layout(a_row_major, b_row_major):
    _check(384, 512, 576, torch.bfloat16, seed=7, a_row_major=a_row_major, b_row_major=b_row_major, cluster=True)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("ctas", [2, 4])
def test_a_few_clusters_walk_every_tile(ctas):
    _few_ctas(ctas, "cooperative", cluster=True)


@pytest.mark.gpu
@needs_sm90a
def test_a_clustered_batched_gemm_with_a_residual_matches_torch():
    """3 tile rows per batch: each batch's last cluster tile has its second CTA past M."""
    g = torch.Generator().manual_seed(23)
    a = torch.randn(3, 300, 320, generator=g).bfloat16().cuda()
    b = torch.randn(3, 320, 264, generator=g).bfloat16().cuda()
    residual = torch.randn(3, 300, 264, generator=g).bfloat16().cuda()
    c = torch.full((3, 300, 264), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c, "acc + x0", (residual,), tile_n=128, cluster=True)
    torch.cuda.synchronize()
    want = (a.double() @ b.double() + residual.double()).to(torch.bfloat16)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(300, 520, 448), (1024, 768, 1000)])
def test_the_ping_pong_schedule_matches_matmul(m, n, k):
    _check(m, n, k, torch.bfloat16, seed=m + k, schedule="pingpong")


def test_the_ping_pong_schedule_gives_each_warpgroup_its_own_tile():
    a, b = _operands(304, 520, 448, torch.bfloat16)
    k = cute.compile(_gemm_host, *host_arguments(a, b, torch.empty(304, 520).bfloat16(), schedule="pingpong"),
                     options={"arch": "sm_90a"})
    ptx = k.__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 8    # 128 rows = 2 atoms
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 16
    assert re.search(r"bar\.sync\s+%r\d+, %r\d+;", ptx)                 # an epilogue barrier per warpgroup
    # The main loops take turns, and so do the epilogues with the shared output buffers.
    assert ptx.count("bar.arrive") == 2
    assert ptx.count("cp.async.bulk.wait_group.read 0") == 2         # buffers handed over; the end
    assert all(kernel["spill_stores"] == 0 for kernel in k.metadata["kernels"])
    with pytest.raises(ValueError, match="128 to 192 for ping-pong"):
        host_arguments(a, b, torch.empty(304, 520).bfloat16(), tile_n=256, schedule="pingpong")
    # Up to 192 columns a warpgroup (wide_pingpong): one m64n192 wgmma per 64 rows and k-step.
    wide = cute.compile(_gemm_host, *host_arguments(a, b, torch.empty(304, 520).bfloat16(), tile_n=192,
                                                    schedule="pingpong"), options={"arch": "sm_90a"})
    assert wide.__ptx__.count("wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16") == 8
    assert all(kernel["spill_stores"] == 0 for kernel in wide.metadata["kernels"])


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (True, False), (False, True), (False, False)])
def test_ping_pong_over_128_x_192_tiles_matches_matmul(a_row_major, b_row_major):
    """wide_pingpong's tiles where the rule picks them (4104 x 2744 x 1000: 363 tiles of 128 x 256,
    K <= 2048; tails in M, N and K) and given (176 with K-major B), in every operand layout."""
    a, b = _operands(4104, 2744, 1000, torch.bfloat16, a_row_major, b_row_major)
    config = host_arguments(a, b, torch.empty(4104, 2744).bfloat16())[3]
    assert (config.tile_m, config.tile_n, config.pingpong) == (128, 192, True), config
    _check(4104, 2744, 1000, torch.bfloat16, seed=7, a_row_major=a_row_major, b_row_major=b_row_major)
    _check(304, 520, 448, torch.bfloat16, seed=8, a_row_major=a_row_major, b_row_major=b_row_major,
           tile_n=176 if not b_row_major else 192, schedule="pingpong")   # (M-major A: 304 rows, 16-byte lines)


# -- 64-row tiles: one warpgroup's m64 wgmma row per tile, the two warpgroups in ping-pong ----------

def test_64_row_tiles_issue_one_wgmma_row_per_warpgroup():
    a, b = _operands(304, 520, 448, torch.bfloat16)
    args = host_arguments(a, b, torch.empty(304, 520).bfloat16(), tile_m=64, tile_n=256)
    assert (args[3].tile_m, args[3].tile_n, args[3].pingpong) == (64, 256, True)
    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    ptx = kernel.__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 4     # one atom per k16
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 16                 # 256 columns / 16
    assert ptx.count("bar.arrive") == 2                                                # ping-pong's turns
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0
    for bad in ({"tile_m": 96}, {"tile_m": 64, "schedule": "cooperative"}, {"tile_m": 64, "cluster": True}):
        with pytest.raises(ValueError, match="tile_m is 128 or 64|64-row tiles"):
            host_arguments(a, b, torch.empty(304, 520).bfloat16(), **bad)
    a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="64-row tiles take 16-bit operands"):
        host_arguments(a8, b8, torch.empty(304, 520).bfloat16(), tile_m=64)


@pytest.mark.parametrize("shape,want", [
    ((1024, 1024, 1024), (64, 128)),      # 128 x 64 tiles before: 0.855 -> 0.982 of cuBLAS (H200)
    ((2048, 2048, 2048), (64, 256)),
    ((3072, 1536, 1536), (64, 192)),
    ((1536, 1536, 1536), (128, 144)),     # 132 tiles of 128 x 144: one wave
    ((4096, 4096, 4096), (128, 256)),     # many waves, K past 2048
    ((8192, 2048, 2048), (128, 256)),     # (not wide_pingpong's: N = 2048)
    ((8192, 2752, 2048), (128, 192)),     # K <= 2048: wide_pingpong's
    ((16, 4096, 4096), (64, 128)),        # a few rows: half the tile's rows are padding
])
def test_64_row_tiles_are_chosen_where_tiles_are_few(shape, want):
    a, b = _operands(*shape, torch.bfloat16, b_row_major=False)         # x @ w.t()
    config = host_arguments(a, b, torch.empty(shape[0], shape[1]).bfloat16())[3]
    assert (config.tile_m, config.tile_n) == want and config.pingpong == (want[0] == 64 or want[1] == 192)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(1, 64, 512), (300, 520, 448), (1000, 768, 1000), (64, 1000, 2056)])
@pytest.mark.parametrize("tile_n", [64, 128, 192, 256])
def test_64_row_tiles_match_matmul(m, n, k, tile_n):
    _check(m, n, k, torch.bfloat16, seed=m + n + tile_n, tile_m=64, tile_n=tile_n)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize("tile_n", [128, 256])
def test_64_row_tiles_take_every_operand_layout(a_row_major, b_row_major, tile_n):
    _check(384, 512, 576, torch.float16, seed=7, a_row_major=a_row_major, b_row_major=b_row_major, tile_n=tile_n,
           tile_m=64)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("ctas", [1, 3])
def test_64_row_tiles_walk_every_tile_on_a_few_ctas(ctas):
    _few_ctas(ctas, "pingpong", tile_m=64)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n", [192, 256])
def test_64_row_tiles_stage_a_residual_beside_two_outputs_over_batches(tile_n):
    _staged_check(300, 264, 320, batches=3, outputs=2, seed=tile_n, tile_m=64, tile_n=tile_n)


@pytest.mark.gpu
@needs_sm90a
def test_64_row_tiles_write_fp32_outputs():
    test_fp32_outputs_match_matmul(128, None, tile_m=64)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_the_gemm_is_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_gemm_sm90_kernel as t; t.run_small()")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]


@pytest.mark.gpu
@needs_sm90a
def test_batched_gemm_matches_bmm_with_any_batch_strides():
    g = torch.Generator().manual_seed(21)
    a = torch.randn(3, 200, 320, generator=g).bfloat16().cuda()
    b = torch.randn(320, 3, 264, generator=g).bfloat16().cuda().permute(1, 0, 2)   # (L, K, N), batch not outermost
    c = torch.full((3, 200, 264), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c)
    torch.cuda.synchronize()
    want = (a.double() @ b.double()).to(torch.bfloat16)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


@pytest.mark.gpu
@needs_sm90a
def test_an_expression_epilogue_with_bias_and_residual_matches_torch():
    a, b = _operands(300, 520, 448, torch.bfloat16, device="cuda", seed=9)
    g = torch.Generator().manual_seed(10)
    bias = torch.randn(520, generator=g).cuda()
    residual = torch.randn(300, 520, generator=g).bfloat16().cuda()
    c = torch.full((300, 520), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c, "gelu(acc + x0) + x1", (bias, residual))
    torch.cuda.synchronize()
    want = torch.nn.functional.gelu(a.double() @ b.double() + bias.double()) + residual.double()
    torch.testing.assert_close(c.cpu().double(), want.to(torch.bfloat16).cpu().double(), rtol=2e-2, atol=2e-2)


def test_the_16_bit_gelu_formula_matches_erf():
    """The erf GELU a 16-bit epilogue computes (pointwise/emit._gelu_fast), replayed in float32
    with numpy: relative error at most 3e-5 (the far tail: exp's argument, about x^2 / 2, is
    rounded), below 3e-6 where |x| < 4."""
    import math
    import numpy as np
    from cute_torch.pointwise.emit import _ERFC
    f32 = np.float32
    x = np.concatenate([np.linspace(-13, 13, 400_001), [0.0, -0.0, 1e-30, -1e-30]]).astype(f32)
    z = np.abs(x) * f32(1 / math.sqrt(2))
    t = f32(1) / (z * f32(0.5) + f32(1))
    poly = f32(_ERFC[-1])
    for c in reversed(_ERFC[:-1]):
        poly = (poly * t + f32(c)).astype(f32)
    e = (t * np.exp2((-z * z + poly) * f32(1 / math.log(2)))).astype(f32)
    got = np.where(x >= 0, x - x * e, x * e).astype(f32)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    assert rel[want != 0].max() < 3e-5 and rel[(np.abs(x) < 4) & (want != 0)].max() < 3e-6


@pytest.mark.gpu
@needs_sm90a
def test_a_gelu_epilogue_rounds_like_erf():
    """16-bit outputs take the fast erf: against float64 GELU of float64 products, within one
    bfloat16 rounding step."""
    a, b = _operands(256, 512, 256, torch.bfloat16, device="cuda", seed=13)
    c = torch.full((256, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c, "gelu(acc)")
    torch.cuda.synchronize()
    want = torch.nn.functional.gelu(a.double() @ b.double())
    torch.testing.assert_close(c.double(), want, rtol=2 ** -8, atol=1e-6)


# -- ping-pong stages whole (M, N) inputs through shared memory: TMA in, ldmatrix out ----------------

def test_ping_pong_stages_a_residual_and_reads_it_by_ldmatrix():
    a, b = _operands(304, 520, 448, torch.bfloat16)
    c, bias, residual = torch.empty(304, 520).bfloat16(), torch.randn(520).bfloat16(), torch.randn(304, 520).bfloat16()
    args = host_arguments(a, b, c, "acc + x0 + x1", (bias, residual), schedule="pingpong")
    assert args[3].staged == (False, True)            # the bias stays a per-thread (broadcast) read
    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    ptx = kernel.__ptx__
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 16     # 128 x 128 tile / 16 columns / 2 atoms
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 5  # A, B (2 boxes), the residual's 2
    assert ptx.count("ld.global.b32") == 28 and "ld.global.b16" not in ptx     # the bias's column pairs only
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0
    # Not staged: a 192-wide cooperative tile, an odd row stride (TMA cannot address it), fp32.
    assert host_arguments(a, b, c, "acc + x0", (residual,), tile_n=192)[3].staged == ()
    odd = torch.randn(304, 521).bfloat16()[:, :520]
    assert host_arguments(a, b, c, "acc + x0", (odd,), schedule="pingpong")[3].staged == ()
    assert host_arguments(a, b, c, "acc + x0", (residual.float(),), schedule="pingpong")[3].staged == ()


def test_the_cooperative_schedule_stages_a_residual_where_three_stages_fit():
    """A cooperative 128 x 256 tile stages a 16-bit residual (64 KB) beside 3 operand stages, its
    output leaving in 32-column boxes; a second output leaves room for 2 only: not staged then
    (128-wide tiles are)."""
    a, b = _operands(304, 520, 448, torch.bfloat16)
    c, bias, residual = torch.empty(304, 520).bfloat16(), torch.randn(520).bfloat16(), torch.randn(304, 520).bfloat16()
    args = host_arguments(a, b, c, "acc + x0 + x1", (bias, residual), tile_n=256)
    assert (args[3].pingpong, args[3].staged) == (False, (False, True))
    assert _stages(1, 256, staged=1) == 3 and epi_n(1, 256, narrow=True) == 32
    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    assert kernel.__ptx__.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 16   # 256 columns / 16
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0
    assert host_arguments(a, b, (c, c), ("acc + x1", "acc"), (bias, residual), tile_n=256)[3].staged == ()
    assert host_arguments(a, b, (c, c), ("acc + x1", "acc"), (bias, residual), tile_n=128)[3].staged == (False, True)


def _staged_check(m, n, k, batches=None, outputs=1, seed=0, **variant):
    g = torch.Generator().manual_seed(seed)
    lead = (batches,) if batches else ()
    a = torch.randn(*lead, m, k, generator=g).bfloat16().cuda()
    b = torch.randn(*lead, k, n, generator=g).bfloat16().cuda()
    bias = torch.randn(n, generator=g).bfloat16().cuda()
    residual = torch.randn(*lead, m, n, generator=g).bfloat16().cuda()
    outs = tuple(torch.full((*lead, m, n), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in range(outputs))
    epilogues = ("acc + x0 + x1", "relu(acc + x1)")[:outputs]
    gemm(a, b, outs if outputs > 1 else outs[0], epilogues if outputs > 1 else epilogues[0], (bias, residual),
         **(variant or {"schedule": "pingpong"}))
    torch.cuda.synchronize()
    acc = a.double() @ b.double()
    wants = (acc + bias.double() + residual.double(), torch.relu(acc + residual.double()))
    for out, want in zip(outs, wants):
        torch.testing.assert_close(out.cpu().double(), want.to(torch.bfloat16).cpu().double(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(128, 128, 64), (300, 520, 448), (1024, 768, 1000), (1000, 1032, 2056)])
@pytest.mark.parametrize("variant", [{"schedule": "pingpong"}, {"tile_n": 256}, {"tile_n": 128}])
def test_a_staged_residual_matches_torch(m, n, k, variant):
    _staged_check(m, n, k, seed=m + n, **variant)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("variant", [{"schedule": "pingpong"}, {"tile_n": 128}])
def test_a_staged_residual_with_two_outputs_and_batches_matches_torch(variant):
    _staged_check(300, 264, 320, batches=3, outputs=2, seed=5, **variant)


@pytest.mark.parametrize("tiles_m,tiles_n,batches", [(1, 1, 1), (7, 3, 1), (8, 8, 2), (17, 5, 3), (33, 1, 1)])
def test_the_grouped_order_visits_every_tile_once(tiles_m, tiles_n, batches):
    """The tile scheduler's math (plain ints here): every (m, n, l) exactly once, GROUP_M rows
    at a time."""
    from cute_torch.kernels.gemm_common import GROUP_M, tile_of
    seen = [tile_of(t, tiles_m, tiles_n) for t in range(tiles_m * tiles_n * batches)]
    assert sorted(seen) == [(m, n, l) for m in range(tiles_m) for n in range(tiles_n) for l in range(batches)]
    for t, (m, _, _) in enumerate(seen[: tiles_m * tiles_n]):
        assert m // GROUP_M == t // (GROUP_M * tiles_n)      # a group's tiles come together
    along_n = [tile_of(t, tiles_m, tiles_n, along_n=True) for t in range(tiles_m * tiles_n * batches)]
    assert sorted(along_n) == sorted(seen)
    for t, (_, n, _) in enumerate(along_n[: tiles_m * tiles_n]):
        assert n // GROUP_M == t // (GROUP_M * tiles_m)      # groups of tile columns


def test_several_outputs_come_from_one_gemm_with_the_stages_that_fit():
    from cute_torch.kernels.gemm_sm90 import _stages
    a, b = _operands(300, 520, 448, torch.bfloat16)
    outs = (torch.empty(300, 520).bfloat16(), torch.empty(300, 520).half())
    args = host_arguments(a, b, outs, ("acc + x0", "gelu_tanh(acc + x0)"), (torch.randn(520),), tile_n=256)
    ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 32       # 16 per output
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 16     # 8 boxes of 32 per output
    assert ptx.count("ld.global.v2.f32") == 32                               # the bias read once for both
    assert (_stages(1, 256), _stages(2, 256), _stages(4, 256), _stages(1, 128)) == (4, 4, 3, 6)   # in 227 KB
    assert (_stages(1, 128, pingpong=True), _stages(2, 128, pingpong=True)) == (5, 5)       # buffers taken in turn


def test_ping_pong_is_chosen_where_the_epilogue_moves_as_many_bytes_as_the_output():
    """choose_schedule (mirrored by Gemm.cpp's chooseSchedule): ping-pong for a staged residual,
    a second output, a broadcast input or a function call at K <= 2048 on 256-wide problems;
    host_arguments applies it when neither the tile nor the schedule is given."""
    from cute_torch.kernels.gemm_sm90 import choose_schedule
    assert choose_schedule(2048, 256, 1, (False, True)) == "pingpong"          # bias + residual
    assert choose_schedule(2048, 256, 2, (False,)) == "pingpong"               # pre-activation + GELU
    assert choose_schedule(2048, 256, 1, (False,), fused=True) == "pingpong"   # a bias, or gelu_tanh(acc)
    assert choose_schedule(2048, 256, 1, ()) == "cooperative"                  # plain, or acc * 0.5
    assert choose_schedule(8192, 256, 1, (False, True)) == "cooperative"       # a long main loop
    assert choose_schedule(2048, 192, 2, ()) == "cooperative"                  # about one wave of tiles
    assert choose_schedule(2048, 256, 2, (), gated=True) == choose_schedule(2048, 256, 2, (), fp8=True) == "cooperative"
    g = torch.Generator().manual_seed(5)
    a, w = torch.randn(2048, 2048, generator=g).bfloat16(), torch.randn(2048, 2048, generator=g).bfloat16()
    bias, residual = torch.randn(2048, generator=g).bfloat16(), torch.randn(2048, 2048, generator=g).bfloat16()
    c = torch.empty(2048, 2048).bfloat16()
    config = host_arguments(a, w.t(), c, "acc + x0 + x1", (bias, residual))[3]
    assert (config.tile_n, config.pingpong, config.staged) == (128, True, (False, True))
    assert host_arguments(a, w.t(), c, "acc + x0 + x1", (bias, residual), tile_n=256)[3].pingpong is False
    assert host_arguments(a, w.t(), c, "acc + x0", (bias,))[3][:2] == (128, True)
    assert host_arguments(a, w.t(), c, "gelu_tanh(acc)")[3][:2] == (128, True)
    assert host_arguments(a, w.t(), c, "acc * 0.5", tile_m=128)[3][:2] == (256, False)
    plain = host_arguments(a, w.t(), c, "acc * 0.5")[3]       # 128 tiles: 64-row ones (short_tile_n)
    assert (plain.tile_m, plain.tile_n, plain.pingpong) == (64, 256, True)


def test_small_problems_get_narrower_tiles():
    from cute_torch.kernels.gemm_sm90 import choose_tile_n
    assert choose_tile_n(4096, 4096, 1, 132) == 256 and choose_tile_n(2048, 2048, 1, 132) == 256
    assert choose_tile_n(2048, 1024, 1, 132) == 128 and choose_tile_n(8192, 160, 1, 132) == 128
    assert choose_tile_n(8192, 96, 1, 132) == 64                       # 128 tiles of 64 columns, not 64 of 128
    assert choose_tile_n(1024, 1024, 1, 132) == 64 and choose_tile_n(8192, 64, 1, 132) == 64
    a, b = _operands(256, 256, 128, torch.bfloat16)
    ptx = cute.compile(_gemm_host, *host_arguments(a, b, torch.empty(256, 256).bfloat16(), tile_m=128),
                       options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 4                  # one box per tile
    assert ptx.count("cp.async.bulk.wait_group.read 0") == 2       # its buffer: the last tile's store


def test_fp32_outputs_leave_by_plain_stores_and_128_byte_boxes():
    """An fp32 output: 32-column boxes (128-byte rows, Sw<3,4,3>) written by st.shared (stmatrix
    moves 16-bit elements), beside a bf16 output's stmatrix in the same GEMM."""
    from cute_torch.kernels.gemm_sm90 import _stages
    a, b = _operands(304, 520, 448, torch.bfloat16)
    outs = (torch.empty(304, 520), torch.empty(304, 520).bfloat16())
    ptx = cute.compile(_gemm_host, *host_arguments(a, b, outs, ("acc", "relu(acc)"), tile_n=256),
                       options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 16           # the bf16 output only
    assert ptx.count("st.shared.f32") + 2 * ptx.count("st.shared.v2.f32") == 128   # 128 fp32 values a thread
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 16         # 8 boxes of 32, two outputs
    assert (_stages((4,), 256), _stages((4, 2), 256), _stages((4,), 128)) == (4, 3, 6)
    with pytest.raises(ValueError, match="the outputs bfloat16, float16 or float32"):
        host_arguments(a, b, torch.empty(304, 520, dtype=torch.float64))


def test_wave_quantized_shapes_get_192_wide_tiles():
    from cute_torch.kernels.gemm_sm90 import _stages, choose_tile_n
    assert choose_tile_n(1536, 1536, 1, 132) == 192 and choose_tile_n(3072, 3072, 1, 132) == 192
    for n in (4096, 11008, 12288, 14336, 128256):                          # the LLM shapes keep 256
        assert choose_tile_n(8192, n, 1, 132) == 256
    assert choose_tile_n(8192, 8192, 1, 132) == 256 and choose_tile_n(2560, 2560, 1, 132) == 256
    a, b = _operands(256, 384, 128, torch.bfloat16)
    ptx = cute.compile(_gemm_host, *host_arguments(a, b, torch.empty(256, 384).bfloat16(), tile_n=192),
                       options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16") == 4
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == 12             # 192 columns / 16
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 6           # 6 boxes of 32 columns
    assert _stages(1, 192) == 5                                                    # 40 KB a stage


def test_with_k_major_b_the_width_whose_last_wave_ends_first_is_any_multiple_of_16():
    from cute_torch.kernels.gemm_sm90 import choose_tile_n

    def chosen(m, n, **kw):
        return choose_tile_n(m, n, 1, 132, any_width=True, **kw)
    assert chosen(1536, 1536) == 144 and chosen(1536, 3072) == 144 and chosen(3072, 1536) == 144   # 132, 264 tiles
    assert chosen(2560, 2560) == 208 and chosen(3072, 3072) == 192
    # Many waves: the widest (each tile's overhead counts least); few tiles: the narrow rules.
    assert chosen(4096, 4096) == chosen(8192, 8192) == chosen(8192, 6144) == 256
    assert chosen(1024, 1024) == 64 and chosen(1024, 4096) == 256
    assert chosen(1536, 1536, gated=True) == 256


@pytest.mark.parametrize("expr,message,column", [
    ("gelu(acc + x0", "was never closed", 4),
    ("acc + x1", "x1 is not an input: the epilogue has acc and one input, x0", 6),
    ("foo(acc)", "unknown function 'foo'", 0),
])
def test_epilogue_errors_show_the_users_text_and_position(expr, message, column):
    from cute_torch.pointwise.expr import ExpressionError
    a, b = _operands(128, 128, 64, torch.bfloat16)
    args = host_arguments(a, b, torch.empty(128, 128).bfloat16(), expr, (torch.randn(128),))
    with pytest.raises(ExpressionError) as error:
        cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
    lines = str(error.value).splitlines()
    assert message in lines[0] and lines[1] == f"  {expr}" and lines[2] == "  " + " " * column + "^"


def test_shapes_that_make_no_gemm_are_errors_naming_the_operand():
    a, b, c = torch.randn(64, 128).bfloat16(), torch.randn(128, 96).bfloat16(), torch.empty(64, 96).bfloat16()
    cases = [((a, torch.randn(120, 96).bfloat16(), c), "disagree on K"),
             ((a, b, torch.empty(64, 64).bfloat16()), r"output 0 is \(64, 64\)"),
             ((a, b, (c, c), "acc"), "2 outputs and 1 epilogues"),
             ((a, b, c, "acc + x0", (torch.randn(64),)), r"x0 of shape \(64,\) does not broadcast"),
             ((a, b, torch.empty(64, 192).bfloat16()[:, ::2]), "must have N contiguous"),
             ((a, b, c.float().t().contiguous().t()), r"must have N contiguous \(or M, for 16-bit outputs\)"),
             ((torch.randn(2, 64, 128).bfloat16(), torch.randn(3, 128, 96).bfloat16(), c), "different batch sizes")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            host_arguments(*args)


@pytest.mark.gpu
@needs_sm90a
def test_the_pre_activation_and_the_activation_from_one_gemm_match_torch():
    a, b = _operands(300, 520, 448, torch.bfloat16, device="cuda", seed=12)
    bias = torch.randn(520, generator=torch.Generator().manual_seed(13)).cuda()
    pre, act = (torch.full((300, 520), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in range(2))
    gemm(a, b, (pre, act), ("acc + x0", "gelu_tanh(acc + x0)"), (bias,))
    torch.cuda.synchronize()
    want = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(pre.cpu().double(), want.to(torch.bfloat16).cpu().double(), rtol=2e-2, atol=2e-2)
    want_act = torch.nn.functional.gelu(want, approximate="tanh")
    torch.testing.assert_close(act.cpu().double(), want_act.to(torch.bfloat16).cpu().double(), rtol=2e-2, atol=2e-2)


def test_operands_tma_cannot_address_are_errors_before_any_launch():
    a, b = torch.randn(64, 100).bfloat16(), torch.randn(100, 64).bfloat16()   # 100 bf16 = 200 bytes a row
    with pytest.raises(ValueError, match="a .* is not addressable by TMA"):
        host_arguments(a, b, torch.empty(64, 64).bfloat16())
    a = torch.randn(64, 128).bfloat16()
    with pytest.raises(ValueError, match="the operands are bfloat16, float16 or float8"):
        host_arguments(a, torch.randn(128, 64), torch.empty(64, 64).bfloat16())


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n,schedule", [(256, None), (192, None), (128, None), (64, None), (128, "pingpong")])
def test_fp32_outputs_match_matmul(tile_n, schedule, tile_m=None):
    """fp32 accumulators stored as they are (one rounding less than a 16-bit output), alone and
    beside a bf16 output of the same GEMM; tails in M and N."""
    a, b = _operands(300, 520, 448, torch.bfloat16, device="cuda", seed=14)
    exact = a.double() @ b.double()
    c = torch.full((300, 520), float("nan"), device="cuda")
    gemm(a, b, c, tile_n=tile_n, schedule=schedule, tile_m=tile_m)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), exact, rtol=1e-5, atol=1e-4)
    pre, act = torch.full_like(c, float("nan")), torch.full((300, 520), float("nan"), device="cuda").bfloat16()
    gemm(a, b, (pre, act), ("acc", "relu(acc)"), tile_n=tile_n, schedule=schedule, tile_m=tile_m)
    torch.cuda.synchronize()
    torch.testing.assert_close(pre.double(), exact, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(act.double(), exact.relu().to(torch.bfloat16).double(), rtol=8e-3, atol=1e-2)


def test_gated_epilogues_combine_column_pairs_into_half_as_many_outputs():
    """silu(gate + x0) * up over interleaved gate/up columns: the accumulator tile is BN wide, the
    output tile BN / 2 (its stmatrix and stores), the inputs read at output coordinates."""
    from cute_torch.kernels.gemm_common import interleave_gated
    from cute_torch.kernels.gemm_sm90 import choose_tile_n
    a, b = _operands(304, 512, 448, torch.bfloat16)
    outs = (torch.empty(304, 256).bfloat16(), torch.empty(304, 256))
    for tile_n, boxes in ((256, 4), (128, 2), (64, 1)):
        args = host_arguments(a, b, outs, ("silu(gate + x0) * up", "gate"), (torch.randn(256),), tile_n=tile_n)
        ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
        assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{tile_n}k16.f32.bf16.bf16") == 4
        assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == tile_n // 32   # bf16 output, half width
        assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 2 * boxes   # 32-column boxes
    assert choose_tile_n(1536, 3072, 1, 132, gated=True) == 256 and choose_tile_n(1536, 3072, 1, 132) == 192
    g, u = torch.randn(3, 16), torch.randn(3, 16)
    assert torch.equal(interleave_gated(g, u), torch.cat([g[:, :8], u[:, :8], g[:, 8:], u[:, 8:]], dim=1))


@pytest.mark.parametrize("epilogues,outs,message", [
    (("silu(gate) * up", "acc"), 2, "all expressions over gate and up"),
    (("gate * acc",), 1, "reads gate and up, not acc"),
])
def test_gated_epilogue_misuse_is_an_error(epilogues, outs, message):
    a, b = _operands(64, 64, 64, torch.bfloat16)
    c = tuple(torch.empty(64, 32).bfloat16() for _ in range(outs))
    with pytest.raises(ValueError, match=message):
        _gemm_host(*host_arguments(a, b, c, epilogues))


def test_gated_shapes_are_checked():
    a = torch.randn(64, 64).bfloat16()
    with pytest.raises(ValueError, match="72 columns, not a multiple of 16"):
        host_arguments(a, torch.randn(64, 72).bfloat16(), torch.empty(64, 36).bfloat16(), "silu(gate) * up")
    with pytest.raises(ValueError, match=r"output 0 is \(64, 64\)"):
        host_arguments(a, torch.randn(64, 64).bfloat16(), torch.empty(64, 64).bfloat16(), "silu(gate) * up")
    with pytest.raises(ValueError, match="192 would be an odd number of boxes"):
        host_arguments(a, torch.randn(64, 64).bfloat16(), torch.empty(64, 32).bfloat16(), "gate * up", tile_n=192)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n,schedule", [(256, None), (128, None), (64, None), (128, "pingpong")])
def test_gated_epilogues_match_torch(tile_n, schedule):
    """SwiGLU with gate and up biases: silu(x @ wg + bg) * (x @ wu + bu) from one GEMM over the
    interleaved weights, with the gate pre-activation (fp32) and up (bf16) as more outputs."""
    from cute_torch.kernels.gemm_common import interleave_gated
    g = torch.Generator().manual_seed(15)
    x = torch.randn(300, 448, generator=g).bfloat16().cuda()
    wg, wu = (torch.randn(448, 264, generator=g).div(448 ** 0.5).bfloat16().cuda() for _ in range(2))
    bg, bu = (torch.randn(264, generator=g).cuda() for _ in range(2))
    outs = (torch.full((300, 264), float("nan"), device="cuda").bfloat16(),
            torch.full((300, 264), float("nan"), device="cuda"),
            torch.full((300, 264), float("nan"), device="cuda").bfloat16())
    gemm(x, interleave_gated(wg, wu), outs, ("silu(gate + x0) * (up + x1)", "gate + x0", "up"), (bg, bu),
         tile_n=tile_n, schedule=schedule)
    torch.cuda.synchronize()
    gate, up = x.double() @ wg.double() + bg.double(), x.double() @ wu.double()
    want = torch.nn.functional.silu(gate) * (up + bu.double())
    torch.testing.assert_close(outs[0].double(), want.to(torch.bfloat16).double(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(outs[1].double(), gate, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(outs[2].double(), up.to(torch.bfloat16).double(), rtol=8e-3, atol=1e-2)


def _fp8_operands(m, n, k, device="cpu", seed=16):
    """a (M, K) e4m3 and b (K, N) e5m2 as w.t() of an (N, K) w: both K-major, as fp8 wgmma reads them."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, generator=g).to(torch.float8_e5m2)
    return a.to(device), w.to(device).t()


def test_fp8_operands_take_128_deep_k_tiles_and_k32_wgmma():
    a, b = _fp8_operands(304, 520, 512)
    for tile_n in (256, 128):
        args = host_arguments(a, b, torch.empty(304, 520).bfloat16(), "acc * x0", (torch.tensor(0.5),), tile_n=tile_n)
        ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
        # A k-tile is one 128-byte row of 128 fp8 values: 4 wgmma k32 per k-tile, as 4 k16 for bf16.
        assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{tile_n}k32.f32.e4m3.e5m2") == 4
    with pytest.raises(ValueError, match="must have K contiguous"):     # (K, N) row-major: N contiguous
        host_arguments(a, _fp8_operands(304, 528, 512)[1].contiguous(), torch.empty(304, 528).bfloat16())
    with pytest.raises(ValueError, match="both bfloat16, both float16, or float8"):
        host_arguments(a, torch.randn(512, 520).bfloat16(), torch.empty(304, 520).bfloat16())


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tile_n", [256, 128, 64])
def test_fp8_gemm_with_a_per_tensor_scale_matches_matmul(tile_n):
    """e4m3 x e5m2 with fp32 accumulation and a per-tensor scale in the epilogue, tails in M, N
    and K, against float64 products of the same fp8 values."""
    a, b = _fp8_operands(300, 520, 464, "cuda")
    scale = torch.tensor(0.25, device="cuda")
    c = torch.full((300, 520), float("nan"), device="cuda")
    gemm(a, b, c, "acc * x0", (scale,), tile_n=tile_n)
    torch.cuda.synchronize()
    want = (a.double() @ b.double()) * 0.25
    # Hopper adds fp8 products with fewer bits than fp32 (about 14 after alignment).
    torch.testing.assert_close(c.double(), want, rtol=1e-3, atol=2e-2)


# -- outputs with M contiguous: a transposed problem's (transpose_pays) --------------------------------

def test_an_m_major_output_leaves_by_transposed_stmatrix_and_64_row_boxes():
    a, b = _operands(304, 512, 448, torch.bfloat16)
    args = host_arguments(a, b, torch.empty(512, 304).bfloat16().t(), tile_n=256)
    ptx = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16") == 16 and "x4.m8n8.shared" not in ptx
    # Four boxes of 64 columns per tile, each two 64-row slabs (128 bytes of M per column).
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 8


def test_outputs_with_m_contiguous_are_16_bit_and_all_alike():
    a, b = _operands(304, 512, 448, torch.bfloat16)
    with pytest.raises(ValueError, match="must have N contiguous \\(or M, for 16-bit outputs\\)"):
        host_arguments(a, b, torch.empty(512, 304).t(), tile_n=256)             # fp32
    with pytest.raises(ValueError, match="all have N contiguous, or all M"):
        host_arguments(a, b, (torch.empty(512, 304).bfloat16().t(), torch.empty(304, 512).bfloat16()),
                       ("acc", "acc"))


@pytest.mark.parametrize("m,n,any_width,want", [
    (3072, 1024, True, True), (3072, 1024, False, True), (6144, 1024, True, True),   # 96 / 192 tiles of 256
    (1024, 3072, True, False), (4096, 1024, True, False), (2816, 1024, True, False),  # as good or better as is
    (3072, 3072, True, False), (1024, 1024, True, False), (8192, 3072, True, False)])
def test_the_problem_is_transposed_where_its_tiles_end_their_last_wave_sooner(m, n, any_width, want):
    from cute_torch.kernels.gemm_sm90 import transpose_pays
    assert transpose_pays(m, n, 132, any_width, any_width) is want


def test_only_two_dimensional_calls_of_16_bit_outputs_are_transposed():
    from cute_torch.kernels.gemm_sm90 import transposes
    a, b = torch.empty(3072, 512).bfloat16(), torch.empty(1024, 512).bfloat16().t()
    c = torch.empty(3072, 1024).bfloat16()
    none = (None, None, None, None, False)
    assert transposes(a, b, (c,), None, (), none)
    assert transposes(a, b, (c,), "gelu(acc)", (), none)
    assert transposes(a, b, (c,), "acc + x0", (torch.empty(1024),), none)              # a bias: per row, swapped
    assert transposes(a, b, (c, c), ("acc", "relu(acc)"), (), none)                     # two outputs too
    assert not transposes(a, b, (c.float(),), None, (), none)                          # fp32 output
    assert not transposes(a, b, (c,), None, (), (256, None, None, None, False))         # a variant asked for
    assert not transposes(a[:64], b, (c[:64],), None, (), none)                         # 64-row tiles' case
    import cute_torch.ops  # noqa: F401 - registers cute::gemm_choice
    fp8 = torch.float8_e4m3fn
    assert not transposes(a.to(fp8), b.t().contiguous().to(fp8).t(), (c,), None, (), none)   # not run on a GPU
    assert not torch.ops.cute.gemm_choice(a.to(fp8), b.t().contiguous().to(fp8).t(), [], 1, 132).startswith("t:")


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("m,n,k", [(304, 520, 448), (1024, 768, 1000), (136, 264, 64)])  # M: 16-byte lines
@pytest.mark.parametrize("variant", [dict(tile_n=256), dict(tile_n=192), dict(tile_n=128), dict(tile_n=64),
                                     dict(tile_n=176), dict(schedule="pingpong"), dict(tile_m=64, tile_n=256),
                                     dict(tile_m=64, tile_n=128), dict(tile_n=256, cluster=True)])
def test_m_major_outputs_match_matmul(m, n, k, variant):
    _check(m, n, k, torch.bfloat16, seed=m + k, b_row_major="tile_n" in variant and variant["tile_n"] % 64 == 0,
           m_major_out=True, **variant)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, False), (False, True), (False, False)])
def test_m_major_outputs_take_every_operand_layout(a_row_major, b_row_major):
    _check(384, 512, 576, torch.float16, seed=9, a_row_major=a_row_major, b_row_major=b_row_major, m_major_out=True)


@pytest.mark.gpu
@needs_sm90a
def test_m_major_outputs_fuse_inputs_and_two_outputs_over_batches():
    g = torch.Generator().manual_seed(31)
    a = torch.randn(2, 304, 448, generator=g).bfloat16().cuda()
    b = torch.randn(2, 448, 520, generator=g).bfloat16().cuda()
    bias = torch.randn(520, generator=g).cuda()
    residual = torch.randn(2, 304, 520, generator=g).bfloat16().cuda()
    pre = torch.full((2, 520, 304), float("nan"), dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    out = torch.full((2, 520, 304), float("nan"), dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    gemm(a, b, (pre, out), ("acc + x0", "gelu(acc + x0) + x1"), (bias, residual))
    acc = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(pre.double(), acc.to(torch.bfloat16).double(), rtol=8e-3, atol=1e-2)
    want = torch.nn.functional.gelu(acc) + residual.double()
    torch.testing.assert_close(out.double(), want.to(torch.bfloat16).double(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, False), (False, True)])
def test_a_few_tile_problem_runs_transposed_and_matches_matmul(a_row_major, b_row_major):
    """3072 x 1024: the 1024 x 3072 problem's 128 tiles of 128 x 192 instead of 96 of 128 x 256."""
    from cute_torch.kernels.gemm_sm90 import transposes
    a, b = _operands(3072, 1024, 320, torch.bfloat16, a_row_major, b_row_major, "cuda", seed=41)
    c = torch.full((3072, 1024), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert transposes(a, b, (c,), None, (), (None, None, None, None, False))
    gemm(a, b, c, "gelu_tanh(acc)")
    want = torch.nn.functional.gelu(a.double() @ b.double(), approximate="tanh").to(torch.bfloat16)
    torch.testing.assert_close(c.double(), want.double(), rtol=2e-2, atol=2e-2)
    g = torch.Generator().manual_seed(42)
    bias, residual = torch.randn(1024, generator=g).cuda(), torch.randn(3072, 1024, generator=g).bfloat16().cuda()
    c.fill_(float("nan"))
    gemm(a, b, c, "acc + x0 + x1", (bias, residual))          # their transposed views: per row, one at a time
    want = (a.double() @ b.double() + bias.double() + residual.double()).to(torch.bfloat16)
    torch.testing.assert_close(c.double(), want.double(), rtol=2e-2, atol=2e-2)
