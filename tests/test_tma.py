"""TMA (cute.nvgpu.cpasync): descriptors built on the host at each call and passed as
__grid_constant__ parameters, bulk tensor loads completing on an mbarrier and bulk tensor
stores, into and out of 128-byte swizzled shared memory. Compile tier: PTX and errors. GPU
tier: a round trip of every tile of a tensor whose extents are not multiples of the box (the
loads zero-fill, the stores clip), with the threads rewriting each tile in shared memory
through the DSL's own Sw<3,4,3> layout in between, which checks the DSL's swizzle is TMA's."""

import re

import pytest
import torch

import cute_torch as cute
from conftest import check_bf16_gemm, copy_by_threads, run_under_sanitizer, wgmma_tile
from cute_torch.dsl.diagnostics import DSLError

needs_sm90a = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="TMA and wgmma need an sm_90 GPU")

cpasync, warpgroup = cute.nvgpu.cpasync, cute.nvgpu.warpgroup
TILE = 64


def _smem_layout(dtype_bytes, tile=(TILE, 64), bits=3):
    """A (rows, cols) tile of Sw<bits,4,3> swizzled rows (32/64/128 bytes; bits 0: no swizzle,
    128-byte rows): one TMA box when cols is one row, several side by side when it is wider."""
    row = (16 << bits if bits else 128) // dtype_bytes
    inner = cute.make_layout((8, row), stride=(row, 1))
    atom = cute.make_composed_layout(cute.make_swizzle(bits, 4, 3), 0, inner) if bits else inner
    return cute.tile_to_shape(atom, tile)


@cute.kernel
def _tma_roundtrip(load_atom, store_atom, src_coords, dst_coords, tile: cute.Constexpr, bits: cute.Constexpr,
                   policy: cute.Constexpr = None):
    tm, tn = tile
    sT = cute.arch.alloc_smem(cute.BFloat16, _smem_layout(2, tile, bits), alignment=1024)
    bar = cute.arch.alloc_smem(cute.Int64, (1,))
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    if tid == 0:
        cute.arch.mbarrier_init(bar.iterator, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    gS = cute.local_tile(src_coords, tile, (bm, bn))
    gD = cute.local_tile(dst_coords, tile, (bm, bn))
    if tid == 0:
        cpasync.prefetch_descriptor(load_atom)
        cute.prefetch(load_atom, gS)                       # into L2 (a hint; the load follows at once)
        cute.arch.mbarrier_arrive_and_expect_tx(bar.iterator, load_atom.size_in_bytes)
        cute.copy(load_atom, gS, sT, tma_bar_ptr=bar.iterator, cache_policy=policy)
    cute.arch.mbarrier_wait(bar.iterator, 0)
    for i in cute.range_constexpr(tm * tn // 128):
        r, c = (tid + 128 * i) // tn, (tid + 128 * i) % tn
        sT[r, c] = sT[r, c] * 2.0 + cute.Float32(r * 1000 + c)
    cute.arch.fence_proxy("async.shared", space="cta")    # thread writes -> the TMA store's reads
    cute.arch.sync_threads()
    if tid == 0:
        cute.copy(store_atom, sT, gD)
        cute.arch.cp_async_bulk_commit_group()
        cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def _tma_host(src: cute.Tensor, dst: cute.Tensor, tile: cute.Constexpr = (TILE, 64), bits: cute.Constexpr = 3,
              policy: cute.Constexpr = None):
    layout = _smem_layout(2, tile, bits)
    load_atom, src_coords = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), src, layout, tile)
    store_atom, dst_coords = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), dst, layout, tile)
    m, n = cute.size(src, mode=[0]), cute.size(src, mode=[1])
    _tma_roundtrip(load_atom, store_atom, src_coords, dst_coords, tile, bits, policy).launch(
        grid=(cute.ceil_div(m, tile[0]), cute.ceil_div(n, tile[1]), 1), block=(128, 1, 1))


def _expected(src, tile=(TILE, 64)):
    r = torch.arange(src.shape[0]).remainder(tile[0]).view(-1, 1)
    c = torch.arange(src.shape[1]).remainder(tile[1]).view(1, -1)
    return (src.float().cpu() * 2 + (r * 1000 + c).float()).to(src.dtype)


def test_a_tile_wider_than_the_swizzle_is_several_boxes():
    src = torch.randn(70, 320).bfloat16()
    ptx = cute.compile(_tma_host, src, torch.empty_like(src), (32, 256), options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 4    # 256 = 4 boxes of 64
    assert ptx.count("cp.async.bulk.prefetch.tensor.2d.L2.global.tile") == 4   # cute.prefetch: the same boxes
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4


def test_tma_copies_reach_ptx_with_a_grid_constant_descriptor():
    src = torch.randn(200, 136).bfloat16()
    ptx = cute.compile(_tma_host, src, torch.empty_like(src), options={"arch": "sm_90a"}).__ptx__
    for instruction in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", "prefetch.tensormap",
                        "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read 0"):
        assert instruction in ptx, instruction
    assert ".param .align 64 .b8" in ptx


@pytest.mark.parametrize("policy,value", [(cute.nvgpu.CacheEvictionPriority.EVICT_FIRST, 0x12F0000000000000),
                                          (cute.nvgpu.CacheEvictionPriority.EVICT_LAST, 0x14F0000000000000),
                                          (0x1000000000000000, 0x1000000000000000)])
def test_a_tma_load_takes_an_l2_cache_policy(policy, value):
    """cache_policy= (CuTe DSL's keyword): the load carries .L2::cache_hint with the 64-bit policy;
    the store and the loads without one do not."""
    src = torch.randn(200, 136).bfloat16()
    ptx = cute.compile(_tma_host, src, torch.empty_like(src), (TILE, 64), 3, policy, options={"arch": "sm_90a"}).__ptx__
    hinted = [line for line in ptx.splitlines() if ".L2::cache_hint" in line]
    assert len(hinted) == 1 and "cp.async.bulk.tensor.2d.shared::cluster.global" in hinted[0]
    assert hinted[0].rstrip(";").split(",")[-1].strip() in (str(value), str(value - (1 << 64)), hex(value))
    plain = cute.compile(_tma_host, src, torch.empty_like(src), options={"arch": "sm_90a"}).__ptx__
    assert ".L2::cache_hint" not in plain


def test_a_cache_policy_goes_with_a_tma_load_only():
    @cute.kernel
    def store_with_a_policy(atom, coords):
        sT = cute.arch.alloc_smem(cute.BFloat16, _smem_layout(2), alignment=1024)
        cute.copy(atom, sT, cute.local_tile(coords, (TILE, 64), (0, 0)),
                  cache_policy=cute.nvgpu.CacheEvictionPriority.EVICT_FIRST)

    @cute.jit
    def host(dst: cute.Tensor):
        atom, coords = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), dst, _smem_layout(2), (TILE, 64))
        store_with_a_policy(atom, coords).launch(grid=(1, 1, 1), block=(32, 1, 1))

    with pytest.raises(DSLError, match="cache_policy= goes with a TMA load") as err:
        cute.compile(host, torch.zeros(128, 64).bfloat16(), options={"arch": "sm_90a"})
    assert "test_tma.py" in str(err.value)

    src = torch.randn(200, 136).bfloat16()
    for bad in ("evict_first", 1.5, -1):
        with pytest.raises(DSLError, match="cache_policy= takes a cute.nvgpu.CacheEvictionPriority") as err:
            cute.compile(_tma_host, src, torch.empty_like(src), (TILE, 64), 3, bad, options={"arch": "sm_90a"})
        assert "test_tma.py" in str(err.value)


def test_prefetch_takes_a_tma_load_atom():
    @cute.jit
    def prefetch_with_a_store_atom(src: cute.Tensor):
        atom, coords = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), src, _smem_layout(2), (TILE, 64))
        _prefetch_kernel(atom, coords).launch(grid=(1, 1, 1), block=(32, 1, 1))

    with pytest.raises(DSLError, match="prefetch takes a TMA load atom"):
        cute.compile(prefetch_with_a_store_atom, torch.randn(128, 64).bfloat16(), options={"arch": "sm_90a"})


@cute.kernel
def _prefetch_kernel(atom, coords):
    cute.prefetch(atom, cute.local_tile(coords, (TILE, 64), (0, 0)))


def test_tma_errors_name_the_problem_at_the_users_line():
    @cute.jit
    def unaligned_stride(src: cute.Tensor):
        cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), src, _smem_layout(2), (TILE, 64))

    with pytest.raises(DSLError) as err:   # 100 bf16 = 200 bytes between rows: not a multiple of 16
        cute.compile(unaligned_stride, torch.zeros(64, 100).bfloat16(), options={"arch": "sm_90a"})
    assert "multiples of 16 bytes" in str(err.value) and "test_tma.py" in str(err.value)

    @cute.jit
    def wrong_size(src: cute.Tensor):
        cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), src, _smem_layout(2), (64, 32))

    with pytest.raises(DSLError) as err:
        cute.compile(wrong_size, torch.zeros(64, 128).bfloat16(), options={"arch": "sm_90a"})
    assert "does not have the (64, 32) tile's size" in str(err.value)

    @cute.jit
    def wrong_order(src: cute.Tensor):   # rows contiguous in shared memory, columns in global memory
        cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), src,
                                    cute.make_layout((64, 64), stride=(1, 64)), (64, 64))

    with pytest.raises(DSLError) as err:
        cute.compile(wrong_order, torch.zeros(64, 128).bfloat16(), options={"arch": "sm_90a"})
    assert "is not made of TMA boxes" in str(err.value) and "test_tma.py" in str(err.value)


def run_round_trip(shape=(200, 136), tile=(TILE, 64), bits=3, policy=None):
    g = torch.Generator().manual_seed(5)
    src = torch.randn(*shape, generator=g).bfloat16().cuda()
    dst = torch.full_like(src, float("nan"))
    _tma_host(src, dst, tile, bits, policy)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), _expected(src, tile))


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("shape,tile,bits", [((200, 136), (64, 64), 3), ((128, 256), (64, 64), 3),
                                             ((70, 320), (32, 256), 3), ((200, 136), (64, 32), 2),
                                             ((200, 136), (64, 16), 1), ((200, 136), (64, 64), 0)])
def test_tma_round_trip_of_every_tile(shape, tile, bits):
    """Every swizzle mode (128/64/32 bytes, none), tails in both modes, and a tile of 4 boxes."""
    run_round_trip(shape, tile, bits)


@pytest.mark.gpu
@needs_sm90a
def test_a_tma_load_with_an_evict_first_policy_moves_the_same_data():
    run_round_trip(policy=cute.nvgpu.CacheEvictionPriority.EVICT_FIRST)


@pytest.mark.parametrize("tile,bits,boxes", [((64, 32), 2, 1), ((64, 64), 2, 2), ((64, 16), 1, 1), ((64, 64), 0, 1)])
def test_every_swizzle_mode_reaches_ptx(tile, bits, boxes):
    src = torch.randn(200, 136).bfloat16()
    ptx = cute.compile(_tma_host, src, torch.empty_like(src), tile, bits, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == boxes


def test_example_gemm_sm90_compiles_to_a_pipelined_wgmma_kernel(load_example):
    example = load_example("gemm_sm90")
    a, b = torch.randn(256, 320).bfloat16(), torch.randn(512, 320).bfloat16()
    ptx = cute.compile(example.gemm, a, b, torch.empty(256, 512).bfloat16(), options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 4
    # A and B for each of the STAGES - 1 prologue loads (unrolled) and for the refill in the loop.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 2 * (example.STAGES - 1) + 2


@pytest.mark.gpu
@needs_sm90a
def test_example_gemm_sm90_matches_matmul(load_example):
    check_bf16_gemm(load_example("gemm_sm90").gemm, 384, 512, 448, seed=9)   # 7 k-tiles: the ring wraps


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_tma_and_the_pipelined_gemm_are_clean_under_compute_sanitizer(tool):
    script = ("import test_tma as t; t.run_round_trip(); import runpy, pathlib; "
              "g = runpy.run_path(str(pathlib.Path(t.__file__).parents[1] / 'examples' / 'gemm_sm90.py')); "
              "assert g['check']() < 1e-2")
    code, report = run_under_sanitizer(tool, script)
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]


# -- the epilogue path: accumulators -> bf16 -> stmatrix -> swizzled shared tile -> TMA store -------

EPI_N = 64


def _k_major(rows):
    atom = cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, 64), stride=(64, 1)))
    return cute.tile_to_shape(atom, (rows, 64))


@cute.kernel
def _stmatrix_epilogue(mA: cute.Tensor, mB: cute.Tensor, store_atom, mC, tiled_mma: cute.Constexpr,
                       stsm: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    sA = cute.arch.alloc_smem(cute.BFloat16, _k_major(64), alignment=1024)
    sB = cute.arch.alloc_smem(cute.BFloat16, _k_major(EPI_N), alignment=1024)
    sC = cute.arch.alloc_smem(cute.BFloat16, _k_major(64), alignment=1024)     # 64 x 64, row-major swizzled
    copy_by_threads(mA, sA, tid)
    copy_by_threads(mB, sB, tid)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    tCrA, tCrB = thr.make_fragment_A(thr.partition_A(sA)), thr.make_fragment_B(thr.partition_B(sB))
    acc = thr.make_fragment_C(thr.partition_C(sC))
    wgmma_tile(tiled_mma, acc, tCrA, tCrB)
    out = cute.make_fragment_like(acc, cute.BFloat16)
    out.store(acc.load().to(cute.BFloat16))
    st = stsm.get_slice(tid)
    cute.copy(stsm, st.retile(out), st.partition_D(sC))      # 4 stmatrix.x4 per thread
    cute.arch.fence_proxy("async.shared", space="cta")       # stmatrix writes -> the TMA store's reads
    cute.arch.sync_threads()
    if tid == 0:
        cute.copy(store_atom, sC, cute.local_tile(mC, (64, EPI_N), (0, 0)))
        cute.arch.cp_async_bulk_commit_group()
        cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def _stmatrix_epilogue_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, EPI_N, 16))
    tiled_mma = cute.make_tiled_mma(op)
    stsm = cute.make_tiled_copy_C(cute.make_copy_atom(warpgroup.StMatrix8x8x16bOp(), cute.BFloat16), tiled_mma)
    store_atom, mC = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), c, _k_major(64), (64, EPI_N))
    _stmatrix_epilogue(a, b, store_atom, mC, tiled_mma, stsm).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_stmatrix_epilogue_reaches_ptx():
    a, b = torch.randn(64, 64).bfloat16(), torch.randn(EPI_N, 64).bfloat16()
    ptx = cute.compile(_stmatrix_epilogue_host, a, b, torch.empty(64, EPI_N).bfloat16(),
                       options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("stmatrix.sync.aligned.x4.m8n8.shared.b16") == EPI_N // 16
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx


def test_stmatrix_lanes_store_the_accumulator_fragment_in_place():
    """PTX's stmatrix: matrix j's row r goes to the address lane 8j + r gives; lane L's register
    j holds row L/4, columns 2(L%4) and +1 of matrix j. Simulated with our row addresses, every
    accumulator value must land on its own (row, column) of the 64xN tile."""
    from cute_torch.dsl.nvgpu.warpgroup import _c_layout, stsm_layout
    for n in (16, 64, 256):
        stsm, frag = stsm_layout(n), _c_layout(n)
        for w in range(4):
            for g in range(n // 16):
                for lane in range(32):
                    for j in range(4):
                        start = stsm((32 * w + 8 * j + lane // 4, 8 * g))
                        for e in range(2):
                            got = (start % 64, start // 64 + 2 * (lane % 4) + e)
                            value = frag((32 * w + lane, 8 * g + 2 * j + e))
                            assert got == (value % 64, value // 64)


@pytest.mark.gpu
@needs_sm90a
def test_stmatrix_epilogue_matches_matmul():
    g = torch.Generator().manual_seed(13)
    a = torch.randn(64, 64, generator=g).bfloat16().cuda()
    b = torch.randn(EPI_N, 64, generator=g).bfloat16().cuda()
    c = torch.full((64, EPI_N), float("nan"), dtype=torch.bfloat16, device="cuda")
    _stmatrix_epilogue_host(a, b, c)
    torch.cuda.synchronize()
    want = (a.double() @ b.double().t()).to(torch.bfloat16)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


# -- multicast: two CTAs of a cluster each load half of a tile into both -------------------------

@cute.kernel
def _multicast(load_atom, src_coords, out: cute.Tensor):
    sT = cute.arch.alloc_smem(cute.BFloat16, _smem_layout(2, (64, 64)), alignment=1024)
    bar = cute.arch.alloc_smem(cute.Int64, (1,))
    tid = cute.arch.thread_idx()[0]
    rank = cute.arch.block_in_cluster_rank()
    if tid == 0:
        cute.arch.mbarrier_init(bar.iterator, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive()            # both barriers exist before either CTA's multicast lands
    cute.arch.cluster_wait()
    gS = cute.local_tile(src_coords, (64, 64), (0, 0))
    s_mine, g_mine = cpasync.tma_partition(load_atom, rank, cute.make_layout(2), sT, gS)
    if tid == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(bar.iterator, load_atom.size_in_bytes)   # the whole tile
        cute.copy(load_atom, g_mine, s_mine, tma_bar_ptr=bar.iterator, mcast_mask=0b11)
    cute.arch.mbarrier_wait(bar.iterator, 0)
    for i in cute.range_constexpr(64 * 64 // 128):
        r, c = (tid + 128 * i) // 64, (tid + 128 * i) % 64
        out[rank, r, c] = sT[r, c]
    cute.arch.cluster_arrive()            # no CTA leaves while its peer may still write into it
    cute.arch.cluster_wait()


@cute.jit
def _multicast_host(src: cute.Tensor, out: cute.Tensor):
    load_atom, src_coords = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SMulticastOp(), src,
                                                        _smem_layout(2, (64, 64)), (64, 64), num_multicast=2)
    _multicast(load_atom, src_coords, out).launch(grid=(2, 1, 1), block=(128, 1, 1), cluster=(2, 1, 1))


def test_multicast_loads_reach_ptx():
    src, out = torch.randn(64, 64).bfloat16(), torch.empty(2, 64, 64).bfloat16()
    ptx = cute.compile(_multicast_host, src, out, options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     ".multicast::cluster") == 1
    assert "barrier.cluster.arrive" in ptx and "%cluster_ctarank" in ptx


def test_multicast_misuse_is_an_error():
    @cute.jit
    def no_multicast_op(src: cute.Tensor):
        cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), src, _smem_layout(2, (64, 64)), (64, 64),
                                    num_multicast=2)

    with pytest.raises(DSLError) as err:
        cute.compile(no_multicast_op, torch.zeros(64, 64).bfloat16(), options={"arch": "sm_90a"})
    assert "only with CopyBulkTensorTileG2SMulticastOp" in str(err.value) and "test_tma.py" in str(err.value)


@pytest.mark.gpu
@needs_sm90a
def test_multicast_fills_both_ctas_of_the_cluster():
    g = torch.Generator().manual_seed(17)
    src = torch.randn(64, 64, generator=g).bfloat16().cuda()
    out = torch.full((2, 64, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
    _multicast_host(src, out)
    torch.cuda.synchronize()
    assert torch.equal(out[0].cpu(), src.cpu()) and torch.equal(out[1].cpu(), src.cpu())
