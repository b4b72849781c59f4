"""MMA atoms and tiled MMAs: the warp MMA (mma.sync, sm_80+) and the warpgroup MMA (wgmma,
sm_90a) in small GEMM kernels. Compile tier: the PTX has the instructions (ptxas assembles it)
and misuse is a DSLError at the user's line. GPU tier: the kernels against a float64 matmul of
the same bf16/fp16 inputs, every element, outputs poisoned first."""

import re

import pytest
import torch

import cute_torch as cute
from conftest import copy_by_threads, run_under_sanitizer, wgmma_tile
from cute_torch.dsl.diagnostics import DSLError

warp = cute.nvgpu.warp
warpgroup = cute.nvgpu.warpgroup

# -- warp MMA: a 64x64 block tile, four warps as 2x2 atoms, k-tiles of 32 through shared memory ----

BM, BN, BK = 64, 64, 32


@cute.kernel
def _warp_mma_gemm(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    gA = cute.local_tile(mA, (BM, BK), (bm, None))          # (BM, BK, k-tiles)
    gB = cute.local_tile(mB, (BN, BK), (bn, None))          # (BN, BK, k-tiles)
    gC = cute.local_tile(mC, (BM, BN), (bm, bn))
    sA = cute.arch.alloc_smem(mA.element_type, (BM, BK), stride=(BK, 1))
    sB = cute.arch.alloc_smem(mB.element_type, (BN, BK), stride=(BK, 1))

    thr = tiled_mma.get_slice(tid)
    tCsA, tCsB, tCgC = thr.partition_A(sA), thr.partition_B(sB), thr.partition_C(gC)
    tCrA, tCrB = thr.make_fragment_A(tCsA), thr.make_fragment_B(tCsB)
    acc = thr.make_fragment_C(tCgC)
    acc.fill(0.0)
    for kt in range(cute.size(gA, mode=[2])):
        for i in cute.range_constexpr(BM * BK // 128):      # each thread copies 16 of A and of B
            r, c = (tid + 128 * i) // BK, (tid + 128 * i) % BK
            sA[r, c] = gA[r, c, kt]
            sB[r, c] = gB[r, c, kt]
        cute.arch.sync_threads()
        cute.autovec_copy(tCsA, tCrA)
        cute.autovec_copy(tCsB, tCrB)
        cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
        cute.arch.sync_threads()
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _warp_mma_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    op = warp.MmaF16BF16Op(a.element_type, cute.Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (2, 2, 1))
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    _warp_mma_gemm(a, b, c, tiled_mma).launch(grid=(m // BM, n // BN, 1), block=(128, 1, 1))


# -- warpgroup MMA: one warpgroup, a 64xN tile, k-tiles of 64 in 128-byte swizzled shared memory ----

WG_N, WG_K = 128, 64


@cute.kernel
def _wgmma_gemm(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    gA = cute.local_tile(mA, (64, WG_K), (bm, None))
    gB = cute.local_tile(mB, (WG_N, WG_K), (bn, None))
    gC = cute.local_tile(mC, (64, WG_N), (bm, bn))
    # The 128-byte swizzle atom: 8 rows of 64 bf16, Sw<3,4,3> on byte addresses.
    atom = cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, 64), stride=(64, 1)))
    sA = cute.arch.alloc_smem(mA.element_type, cute.tile_to_shape(atom, (64, WG_K)), alignment=1024)
    sB = cute.arch.alloc_smem(mB.element_type, cute.tile_to_shape(atom, (WG_N, WG_K)), alignment=1024)

    thr = tiled_mma.get_slice(tid)
    tCsA, tCsB, tCgC = thr.partition_A(sA), thr.partition_B(sB), thr.partition_C(gC)
    tCrA, tCrB = thr.make_fragment_A(tCsA), thr.make_fragment_B(tCsB)
    acc = thr.make_fragment_C(tCgC)
    tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
    for kt in range(cute.size(gA, mode=[2])):
        copy_by_threads(gA[None, None, kt], sA, tid)
        copy_by_threads(gB[None, None, kt], sB, tid)
        cute.arch.fence_proxy("async.shared", space="cta")   # thread stores -> wgmma's async reads
        cute.arch.sync_threads()
        warpgroup.fence()
        tiled_mma.set(warpgroup.Field.ACCUMULATE, kt > 0)
        for k in cute.range_constexpr(WG_K // 16):
            cute.gemm(tiled_mma, acc, tCrA[None, None, k], tCrB[None, None, k], acc)
            tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()
        warpgroup.wait_group(0)
        cute.arch.sync_threads()
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _wgmma_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    op = warpgroup.MmaF16BF16Op(a.element_type, cute.Float32, (64, WG_N, 16))
    tiled_mma = cute.make_tiled_mma(op)
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    _wgmma_gemm(a, b, c, tiled_mma).launch(grid=(m // 64, n // WG_N, 1), block=(128, 1, 1))


# -- wgmma with K-major and MN-major operands (the transpose bits, both descriptor forms) ---------

MAJ_N = 128


def _operand_smem(rows, major_k: bool):
    """rows x 64 in the canonical 128-byte swizzled form of its major mode."""
    inner = cute.make_layout((8, 64), stride=(64, 1)) if major_k else cute.make_layout((64, 8), stride=(1, 64))
    return cute.tile_to_shape(cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, inner), (rows, 64))


@cute.kernel
def _wgmma_majors(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr,
                  a_k: cute.Constexpr, b_k: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    sA = cute.arch.alloc_smem(mA.element_type, _operand_smem(64, a_k), alignment=1024)
    sB = cute.arch.alloc_smem(mB.element_type, _operand_smem(MAJ_N, b_k), alignment=1024)
    copy_by_threads(mA, sA, tid)
    copy_by_threads(mB, sB, tid)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    tCrA, tCrB = thr.make_fragment_A(thr.partition_A(sA)), thr.make_fragment_B(thr.partition_B(sB))
    tCgC = thr.partition_C(mC)
    acc = thr.make_fragment_C(tCgC)
    wgmma_tile(tiled_mma, acc, tCrA, tCrB)
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _wgmma_majors_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, a_k: cute.Constexpr, b_k: cute.Constexpr):
    major = {True: warpgroup.OperandMajorMode.K, False: warpgroup.OperandMajorMode.MN}
    op = warpgroup.MmaF16BF16Op(a.element_type, cute.Float32, (64, MAJ_N, 16), a_major_mode=major[a_k],
                                b_major_mode=major[b_k])
    _wgmma_majors(a, b, c, cute.make_tiled_mma(op), a_k, b_k).launch(grid=(1, 1, 1), block=(128, 1, 1))


def _major_operands(dtype, a_k, b_k, device="cpu", seed=4):
    """A (64 x 64) and B (MAJ_N x 64), K-major as row-major tensors, MN-major as transposed views."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(64, 64, generator=g).to(dtype)
    b = torch.randn(MAJ_N, 64, generator=g).to(dtype)
    a_arg = a.to(device) if a_k else a.t().contiguous().to(device).t()
    b_arg = b.to(device) if b_k else b.t().contiguous().to(device).t()
    return a_arg, b_arg


@pytest.mark.parametrize("a_k,b_k", [(True, True), (True, False), (False, True), (False, False)])
def test_wgmma_operand_majors_reach_ptx_with_their_transpose_bits(a_k, b_k):
    a, b = _major_operands(torch.bfloat16, a_k, b_k)
    ptx = cute.compile(_wgmma_majors_host, a, b, torch.empty(64, MAJ_N), a_k, b_k, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count(f"p, 1, 1, {int(not a_k)}, {int(not b_k)};") == 4


def test_wgmma_operand_stored_in_the_other_major_mode_is_an_error():
    @cute.kernel
    def wrong(mC: cute.Tensor, tiled_mma: cute.Constexpr):
        sA = cute.arch.alloc_smem(cute.BFloat16, _operand_smem(64, True), alignment=1024)
        sB = cute.arch.alloc_smem(cute.BFloat16, _operand_smem(MAJ_N, True), alignment=1024)
        thr = tiled_mma.get_slice(cute.arch.thread_idx()[0])
        acc = thr.make_fragment_C(thr.partition_C(mC))
        cute.gemm(tiled_mma, acc, thr.make_fragment_A(thr.partition_A(sA))[None, None, 0],
                  thr.make_fragment_B(thr.partition_B(sB))[None, None, 0], acc)

    @cute.jit
    def host(c: cute.Tensor):
        op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, MAJ_N, 16),
                                    b_major_mode=warpgroup.OperandMajorMode.MN)
        wrong(c, cute.make_tiled_mma(op)).launch(grid=(1, 1, 1), block=(128, 1, 1))

    with pytest.raises(DSLError) as err:
        cute.compile(host, torch.empty(64, MAJ_N), options={"arch": "sm_90a"})
    assert "not a MN-major 128-byte swizzled wgmma operand" in str(err.value) and "test_mma.py" in str(err.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="wgmma needs sm_90a")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("a_k,b_k", [(True, True), (True, False), (False, True), (False, False)])
def test_wgmma_operand_majors_match_matmul(dtype, a_k, b_k):
    a, b = _major_operands(dtype, a_k, b_k, "cuda")
    c = torch.full((64, MAJ_N), float("nan"), device="cuda")
    _wgmma_majors_host(a, b, c, a_k, b_k)
    torch.cuda.synchronize()
    _check(c, a, b)


# -- wgmma with A from registers (RS) ---------------------------------------------------------------

def test_rs_a_fragment_follows_the_ptx_table():
    """wgmma's register A: warp w holds rows 16w.., lane L row L/4 (+8 for values 2-3, 6-7),
    columns 2(L%4) (+1 for odd values, +8 for values 4-7)."""
    from cute_torch.dsl.nvgpu.warpgroup import _RS_A_64x16
    for t in range(128):
        w, lane = t // 32, t % 32
        for v in range(8):
            idx = _RS_A_64x16((t, v))
            want = (lane // 4 + 8 * ((v // 2) % 2) + 16 * w, 2 * (lane % 4) + v % 2 + 8 * (v // 4))
            assert (idx % 64, idx // 64) == want


@cute.kernel
def _wgmma_rs(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    sB = cute.arch.alloc_smem(mB.element_type, _operand_smem(MAJ_N, True), alignment=1024)
    copy_by_threads(mB, sB, tid)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    tCgA = thr.partition_A(mA)                      # (8 values, 1, 4 k-blocks), straight from global
    tCrA, tCrB = thr.make_fragment_A(tCgA), thr.make_fragment_B(thr.partition_B(sB))
    cute.autovec_copy(tCgA, tCrA)
    tCgC = thr.partition_C(mC)
    acc = thr.make_fragment_C(tCgC)
    wgmma_tile(tiled_mma, acc, tCrA, tCrB)       # its fence orders the registers A was written to
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _wgmma_rs_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    op = warpgroup.MmaF16BF16Op(a.element_type, cute.Float32, (64, MAJ_N, 16), a_src=warpgroup.OperandSource.RMEM)
    _wgmma_rs(a, b, c, cute.make_tiled_mma(op)).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_wgmma_with_a_from_registers_reaches_ptx():
    a, b = _major_operands(torch.bfloat16, True, True)
    ptx = cute.compile(_wgmma_rs_host, a, b, torch.empty(64, MAJ_N), options={"arch": "sm_90a"}).__ptx__
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{MAJ_N}k16.f32.bf16.bf16") == 4
    assert ptx.count("p, 1, 1, 0;") == 4              # RS: scale-a, scale-b and only B's transpose bit


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="wgmma needs sm_90a")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wgmma_with_a_from_registers_matches_matmul(dtype):
    a, b = _major_operands(dtype, True, True, "cuda", seed=8)
    c = torch.full((64, MAJ_N), float("nan"), device="cuda")
    _wgmma_rs_host(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b)


# -- tf32 warp MMA: one warp, fragments straight from global memory --------------------------------

@cute.kernel
def _tf32_mma(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    thr = tiled_mma.get_slice(cute.arch.thread_idx()[0])
    tCgA, tCgB, tCgC = thr.partition_A(mA), thr.partition_B(mB), thr.partition_C(mC)
    tCrA, tCrB = thr.make_fragment_A(tCgA), thr.make_fragment_B(tCgB)
    acc = thr.make_fragment_C(tCgC)
    acc.fill(0.0)
    cute.autovec_copy(tCgA, tCrA)
    cute.autovec_copy(tCgB, tCrB)
    cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _tf32_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    _tf32_mma(a, b, c, cute.make_tiled_mma(warp.MmaTF32Op())).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_tf32_mma_reaches_ptx():
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(32, 32, generator=g), torch.randn(16, 32, generator=g)
    ptx = cute.compile(_tf32_host, a, b, torch.empty(32, 16), options={"arch": "sm_80"}).__ptx__
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 2 * 2 * 4   # M x N x K atoms


@pytest.mark.gpu
def test_tf32_mma_matches_matmul():
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(32, 32, generator=g).cuda(), torch.randn(16, 32, generator=g).cuda()
    c = torch.full((32, 16), float("nan"), device="cuda")
    _tf32_host(a, b, c)
    torch.cuda.synchronize()
    # tf32 keeps 10 mantissa bits of each input: compare with the exact product at that precision.
    torch.testing.assert_close(c.double(), a.double() @ b.double().t(), rtol=0, atol=2e-2)


def _operands(m, n, k, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype).to(device)
    b = torch.randn(n, k, generator=g).to(dtype).to(device)
    return a, b


# -- compile tier -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,ptx_type", [(torch.bfloat16, "bf16"), (torch.float16, "f16")])
def test_warp_mma_reaches_ptx(dtype, ptx_type):
    a, b = _operands(128, 128, 64, dtype)
    c = torch.empty(128, 128)
    for arch in ("sm_80", "sm_90a"):
        ptx = cute.compile(_warp_mma_host, a, b, c, options={"arch": arch}).__ptx__
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ptx_type}.{ptx_type}.f32" in ptx
        # 2x4 atoms per thread per k-step, 2 k-steps per 32-wide k-tile, in the traced loop body.
        assert ptx.count("mma.sync.aligned") == 16


def test_wgmma_reaches_ptx_with_descriptors():
    a, b = _operands(64, 128, 128, torch.bfloat16)
    c = torch.empty(64, 128)
    ptx = cute.compile(_wgmma_host, a, b, c, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 4
    for instruction in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                        "wgmma.wait_group.sync.aligned 0"):
        assert instruction in ptx


def test_wgmma_on_sm90_without_a_is_an_error_at_the_users_line():
    a, b = _operands(64, 128, 128, torch.bfloat16)
    with pytest.raises(DSLError) as err:
        cute.compile(_wgmma_host, a, b, torch.empty(64, 128), options={"arch": "sm_90"})
    assert "sm_90a" in str(err.value) and "warpgroup.fence()" in str(err.value) and "test_mma.py" in str(err.value)


def test_mma_op_misuse_is_an_error_at_the_users_line():
    @cute.jit
    def bad_types(a: cute.Tensor):
        warp.MmaF16BF16Op(cute.BFloat16, cute.Float16, (16, 8, 16))

    @cute.jit
    def bad_shape(a: cute.Tensor):
        warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, 100, 16))

    for fn, words in ((bad_types, "BFloat16 inputs with Float16 accumulators"), (bad_shape, "N in 8..256")):
        with pytest.raises(DSLError) as err:
            cute.compile(fn, torch.zeros(4))
        assert words in str(err.value)
        assert "test_mma.py" in str(err.value)


def test_warp_mma_partitions_follow_the_ptx_fragment_tables():
    """Thread t's C values of one m16n8 atom are rows t/4 and t/4 + 8, columns 2(t%4) + {0, 1}
    (the PTX ISA's table), here read back through partition_C of a 16x8 row-major tile."""
    op = warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16))
    tiled = cute.make_tiled_mma(op)
    assert tiled.size == 32 and tiled.partition_shape_C((16, 8)) == ((2, 2), 1, 1)
    c_tv = op.layout_c
    for t in range(32):
        got = sorted(c_tv((t, v)) for v in range(4))
        want = sorted(m + 16 * n for m in (t // 4, t // 4 + 8) for n in (2 * (t % 4), 2 * (t % 4) + 1))
        assert got == want


# -- GPU tier ---------------------------------------------------------------------------------------

def _check(c, a, b):
    want = a.double() @ b.double().t()
    torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_warp_mma_gemm_matches_matmul(dtype):
    a, b = _operands(192, 128, 256, dtype, "cuda", seed=1)
    c = torch.full((192, 128), float("nan"), device="cuda")
    _warp_mma_host(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="wgmma needs sm_90a")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wgmma_gemm_matches_matmul(dtype):
    a, b = _operands(128, 256, 320, dtype, "cuda", seed=2)
    c = torch.full((128, 256), float("nan"), device="cuda")
    _wgmma_host(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b)


def test_example_gemm_sm80_streams_with_cp_async_and_ldmatrix(load_example):
    example = load_example("gemm_sm80")
    a, b = torch.randn(256, 160).bfloat16(), torch.randn(384, 160).bfloat16()
    ptx = cute.compile(example.gemm, a, b, torch.empty(256, 384), options={"arch": "sm_80"}).__ptx__
    assert ptx.count("mma.sync.aligned.m16n8k16") == 32      # 2 (M) x 8 (N) atoms x 2 k-steps per k-tile
    # 2 x 16 bytes of A and of B per thread per k-tile: two prologue k-tiles (unrolled) and the refill.
    assert ptx.count("cp.async.cg.shared.global") == 4 * example.STAGES
    assert f"cp.async.wait_group {example.STAGES - 2}" in ptx
    # Fragments by ldmatrix: one .x4 per A atom (2 x 2), one .x2 per B atom (8 x 2); no shared loads.
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2.shared.b16") == 16 and "ld.shared" not in ptx


def test_ldmatrix_rows_land_in_the_mma_fragments():
    """PTX's ldmatrix: matrix j's row r is at the address lane 8j + r gives; lane L receives, in
    register j, row L/4, columns 2(L%4) and +1 of matrix j. Simulate that with the rows our
    ldmatrix partitions address and check every register lands where mma.sync's A (x4) and B
    (x2) fragments want it."""
    from cute_torch.dsl.nvgpu.warp import _A_16x16, _B_8x16, LDSM_A_16x16, LDSM_B_8x16
    for ldsm, frag, rows, matrices in ((LDSM_A_16x16, _A_16x16, 16, 4), (LDSM_B_8x16, _B_8x16, 8, 2)):
        for lane in range(32):
            for j in range(matrices):
                start = ldsm((8 * j + lane // 4, 0))
                for e in range(2):
                    got = (start % rows, start // rows + 2 * (lane % 4) + e)
                    want = frag((lane, 2 * j + e))
                    assert got == (want % rows, want // rows), (rows, lane, j, e)


def test_ldmatrix_misuse_is_an_error_at_the_users_line():
    @cute.jit
    def wrong_count(a: cute.Tensor):
        op = warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16))
        cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 2), cute.BFloat16),
                               cute.make_tiled_mma(op))

    with pytest.raises(DSLError) as err:
        cute.compile(wrong_count, torch.zeros(4))
    assert "LdMatrix8x8x16bOp(num_matrices=4)" in str(err.value) and "test_mma.py" in str(err.value)


@pytest.mark.gpu
def test_example_gemm_sm80_matches_matmul(load_example):
    example = load_example("gemm_sm80")
    a, b = _operands(256, 384, 160, torch.bfloat16, "cuda", seed=3)
    c = torch.full((256, 384), float("nan"), device="cuda")
    example.gemm(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["racecheck", "synccheck"])
def test_example_gemm_sm80_is_clean_under_compute_sanitizer(tool):
    script = ("import runpy, pathlib, test_mma as t; g = runpy.run_path(str(pathlib.Path(t.__file__).parents[1] / "
              "'examples' / 'gemm_sm80.py')); assert g['check']() < 1e-4")
    code, report = run_under_sanitizer(tool, script)
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]
