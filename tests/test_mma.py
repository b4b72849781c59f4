"""MMA atoms and tiled MMAs: the warp MMA (mma.sync, sm_80+) and the warpgroup MMA (wgmma,
sm_90a) in small GEMM kernels. Compile tier: the PTX has the instructions (ptxas assembles it)
and misuse is a DSLError at the user's line. GPU tier: the kernels against a float64 matmul of
the same bf16/fp16 inputs, every element, outputs poisoned first."""

import pytest
import torch

import cute_torch as cute
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
        for i in cute.range_constexpr(64 * WG_K // 128):
            r, c = (tid + 128 * i) // WG_K, (tid + 128 * i) % WG_K
            sA[r, c] = gA[r, c, kt]
        for i in cute.range_constexpr(WG_N * WG_K // 128):
            r, c = (tid + 128 * i) // WG_K, (tid + 128 * i) % WG_K
            sB[r, c] = gB[r, c, kt]
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


def test_example_gemm_sm80_vectorizes_its_copies(load_example):
    example = load_example("gemm_sm80")
    a, b = torch.randn(256, 160).bfloat16(), torch.randn(384, 160).bfloat16()
    ptx = cute.compile(example.gemm, a, b, torch.empty(256, 384), options={"arch": "sm_80"}).__ptx__
    assert ptx.count("mma.sync.aligned.m16n8k16") == 32      # 2 (M) x 8 (N) atoms x 2 k-steps per k-tile
    assert ptx.count("ld.global.v4.b32") == 4 and ptx.count("st.shared.v4.b32") == 4


@pytest.mark.gpu
def test_example_gemm_sm80_matches_matmul(load_example):
    example = load_example("gemm_sm80")
    a, b = _operands(256, 384, 160, torch.bfloat16, "cuda", seed=3)
    c = torch.full((256, 384), float("nan"), device="cuda")
    example.gemm(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b)
