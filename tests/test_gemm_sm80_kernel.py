"""The library's Ampere GEMM (kernels/gemm_sm80.py): cp.async ring, ldmatrix, mma.sync, the fused
epilogue through shared memory. Compile tier (sm_80, sm_86): the instructions of all four
layouts, vector loads and stores in the epilogue, no spills, the configuration per shared-memory
budget, bad operands. GPU tier (any GPU from sm_80 on, the H100 included): tails in M, N and K,
both dtypes, every layout, batches, epilogues with inputs, several outputs, gated and fp32
outputs, against float64, every element; compute-sanitizer on a small run."""

import re

import pytest
import torch

import cute_torch as cute
from conftest import run_under_sanitizer
from cute_torch.kernels.gemm_common import interleave_gated
from cute_torch.kernels.gemm_sm80 import SMEM_BYTES, Config, _gemm_host, choose_config, gemm, host_arguments

needs_sm80 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
                                reason="needs a GPU of sm_80 or newer")


def _operands(m, n, k, dtype, a_row_major=True, b_row_major=True, device="cpu", seed=0):
    """a (M, K) and b (K, N), each row-major or a column-major view (a transposed contiguous tensor)."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
    a = a.to(device) if a_row_major else a.t().contiguous().to(device).t()
    b = b.to(device) if b_row_major else b.t().contiguous().to(device).t()
    return a, b


def _ptx(a, b, c, epilogue=None, inputs=(), tile_n=None, arch="sm_80"):
    args = host_arguments(a, b, c, epilogue, inputs, tile_n, capability=(int(arch[3]), int(arch[4])))
    return cute.compile(_gemm_host, *args, options={"arch": arch})


@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (True, False), (False, True), (False, False)])
def test_the_kernel_streams_with_cp_async_ldmatrix_and_mma_sync(recwarn, a_row_major, b_row_major):
    a, b = _operands(304, 520, 448, torch.bfloat16, a_row_major, b_row_major)
    kernel = _ptx(a, b, torch.empty(304, 520).bfloat16(), tile_n=256)
    ptx = kernel.__ptx__
    # Per k-tile of 64: 4 k-blocks x (4 x 8 atoms of a 64 x 64 warp tile), unrolled.
    body = ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
    assert body % 128 == 0 and body > 0
    # A row-major (M, K) is K-major (plain ldmatrix); B row-major (K, N) is N-major (transposed).
    trans_a, trans_b = not a_row_major, b_row_major
    x4 = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans_a else "") + ".shared.b16"
    x2 = "ldmatrix.sync.aligned.m8n8.x2" + (".trans" if trans_b else "") + ".shared.b16"
    # 4 A and 8 B atoms per warp and k-block, and the first k-block's once more before the loop.
    assert ptx.count(x4) == body // 8 + 4 and ptx.count(x2) == body // 4 + 8
    assert "cp.async.cg.shared.global" in ptx
    assert ptx.count("st.global.v4.b32") == 16           # 128 x 256 bf16: 16 rows per thread, 16 bytes each
    assert not [w for w in recwarn if issubclass(w.category, cute.SpillWarning)]
    assert kernel.metadata["kernels"][0]["spill_stores"] == 0


def test_epilogue_inputs_are_read_in_16_byte_vectors_where_their_strides_allow():
    a, b = _operands(304, 520, 448, torch.bfloat16)
    c = torch.empty(304, 520).bfloat16()
    bias, residual = torch.randn(520).bfloat16(), torch.randn(304, 520).bfloat16()
    ptx = _ptx(a, b, c, "gelu_tanh(acc + x0) + x1", (bias, residual), tile_n=128).__ptx__
    assert ptx.count("ld.global.v4.b32") == 2 * 8        # 8 rows per thread, bias and residual
    odd = torch.randn(304, 521).bfloat16()[:, :520]       # a row stride of 521: element by element
    ptx = _ptx(a, b, c, "acc + x0", (odd,), tile_n=128).__ptx__
    assert "ld.global.v4" not in ptx and ptx.count("ld.global.b16") == 8 * 8


def test_the_configuration_follows_the_shared_memory_budget():
    assert choose_config(8192, 8192, 1, 132, SMEM_BYTES[(9, 0)]) == Config(256, 64, 4)
    assert choose_config(8192, 8192, 1, 108, SMEM_BYTES[(8, 0)]) == Config(256, 64, 3)
    # sm_86/89 (99 KB): the 128 x 256 fp32 accumulators do not fit; 128-wide tiles, 64 deep.
    assert choose_config(8192, 8192, 1, 84, SMEM_BYTES[(8, 6)]) == Config(128, 64, 3)
    assert choose_config(1024, 1024, 1, 132, SMEM_BYTES[(9, 0)]).tile_n == 128    # 32 wide tiles: too few
    a, b = _operands(304, 520, 448, torch.float16)
    ptx = _ptx(a, b, torch.empty(304, 520), arch="sm_86").__ptx__
    assert ".target sm_86" in ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


def test_bad_operands_get_errors_that_name_them():
    a, b = torch.randn(64, 104).bfloat16()[:, :100], torch.randn(100, 64).bfloat16()
    c = torch.empty(64, 64).bfloat16()
    with pytest.raises(ValueError, match=r"a \(shape \(64, 100\)\) has K = 100 contiguous"):
        host_arguments(a, b, c)
    a, b = _operands(64, 64, 96, torch.bfloat16)
    with pytest.raises(ValueError, match="both bfloat16 or both float16"):
        host_arguments(a, b.half(), c)
    with pytest.raises(ValueError, match="operands are bfloat16 or float16"):
        host_arguments(a.float(), b, c)
    with pytest.raises(ValueError, match=r"b \(shape \(96, 64\), strides \(67, 1\)"):
        host_arguments(a, torch.randn(96, 67).bfloat16()[:, :64], c)
    with pytest.raises(ValueError, match="output 0 .* 16-byte pieces"):
        host_arguments(a, b[:, :60], torch.empty(64, 60).bfloat16())
    with pytest.raises(ValueError, match="disagree on K"):
        host_arguments(a, b[:64], c)
    # An MN-major operand whose last piece would read past its storage.
    short = torch.randn(96 * 64 - 4).bfloat16().as_strided((60, 96), (1, 64))
    with pytest.raises(ValueError, match="pad it to a multiple of 8"):
        host_arguments(short, b, torch.empty(60, 64).bfloat16())


def _reference(a, b, epilogue=None, inputs=()):
    acc = a.double() @ b.double()
    if epilogue is None:
        return acc
    return epilogue(acc, *(x.double() for x in inputs))


def _check(m, n, k, dtype, a_row_major=True, b_row_major=True, tile_n=None, seed=0, out_dtype=None):
    a, b = _operands(m, n, k, dtype, a_row_major, b_row_major, "cuda", seed)
    c = torch.full((m, n), float("nan"), dtype=out_dtype or dtype, device="cuda")
    gemm(a, b, c, tile_n=tile_n)
    torch.cuda.synchronize()
    want = _reference(a, b).to(c.dtype).double()
    torch.testing.assert_close(c.double(), want, rtol=2e-2, atol=2e-2 * (k ** 0.5) / 8)


@pytest.mark.gpu
@needs_sm80
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_layout_and_dtype_matches_matmul_with_tails(dtype, a_row_major, b_row_major):
    _check(296, 520, 472, dtype, a_row_major, b_row_major, seed=1)


@pytest.mark.gpu
@needs_sm80
@pytest.mark.parametrize("m,n,k,tile_n", [(1, 264, 64, None), (129, 128, 8, 128), (200, 1000, 1000, 256),
                                          (1024, 1024, 2048, None), (333, 776, 3000, 128)])
def test_shapes_and_tile_widths_match_matmul(m, n, k, tile_n):
    _check(m, n, k, torch.bfloat16, tile_n=tile_n, seed=m + n)


@pytest.mark.gpu
@needs_sm80
def test_fp32_outputs_and_odd_row_counts_match_matmul():
    # N = 516: fp32 rows of 16-byte multiples whose last 8-column piece is half outside.
    _check(301, 516, 200, torch.bfloat16, b_row_major=False, out_dtype=torch.float32, tile_n=128, seed=3)
    _check(45, 264, 96, torch.float16, out_dtype=torch.float32, tile_n=256, seed=4)


@pytest.mark.gpu
@needs_sm80
def test_fused_epilogues_with_inputs_and_several_outputs_match_torch():
    a, b = _operands(300, 520, 448, torch.bfloat16, device="cuda", seed=5)
    g = torch.Generator().manual_seed(6)
    bias = torch.randn(520, generator=g).bfloat16().cuda()
    row_scale = torch.randn(300, 1, generator=g).cuda()
    residual = torch.randn(300, 520, generator=g).bfloat16().cuda()
    pre, act = (torch.full((300, 520), float("nan"), dtype=t, device="cuda") for t in (torch.float32, torch.bfloat16))
    gemm(a, b, (pre, act), ("acc * x1 + x0", "gelu_tanh(acc * x1 + x0) + x2"), (bias, row_scale, residual))
    torch.cuda.synchronize()
    want_pre = _reference(a, b) * row_scale.double() + bias.double()
    want_act = torch.nn.functional.gelu(want_pre, approximate="tanh") + residual.double()
    torch.testing.assert_close(pre.double(), want_pre, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(act.double(), want_act.bfloat16().double(), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@needs_sm80
def test_gated_epilogue_combines_gate_and_up_columns():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(200, 256, generator=g).bfloat16().cuda()
    wg, wu = (torch.randn(256, 272, generator=g).bfloat16().cuda() for _ in range(2))
    h = torch.full((200, 272), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(x, interleave_gated(wg, wu), h, "silu(gate) * up")
    torch.cuda.synchronize()
    want = torch.nn.functional.silu(x.double() @ wg.double()) * (x.double() @ wu.double())
    torch.testing.assert_close(h.double(), want.bfloat16().double(), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@needs_sm80
def test_batched_gemm_matches_bmm_with_any_batch_strides():
    g = torch.Generator().manual_seed(8)
    a = torch.randn(3, 200, 320, generator=g).bfloat16().cuda()
    b = torch.randn(320, 3, 264, generator=g).bfloat16().cuda().permute(1, 0, 2)
    bias = torch.randn(264, generator=g).bfloat16().cuda()
    c = torch.full((3, 200, 264), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c, "acc + x0", (bias,))
    torch.cuda.synchronize()
    want = (torch.bmm(a.double(), b.double()) + bias.double()).bfloat16().double()
    torch.testing.assert_close(c.double(), want, rtol=2e-2, atol=5e-2)


def run_small():
    _check(200, 264, 200, torch.bfloat16, tile_n=128, seed=9)
    _check(136, 520, 130, torch.float16, a_row_major=False, b_row_major=True, tile_n=256, seed=10)
    test_gated_epilogue_combines_gate_and_up_columns()


@pytest.mark.gpu
@needs_sm80
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_the_gemm_is_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_gemm_sm80_kernel as t; t.run_small()")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]
