"""A Hopper GEMM in the DSL: TMA loads into 128-byte swizzled shared memory, a multi-stage
mbarrier pipeline, and warpgroup MMAs (wgmma) reading both operands from shared memory.

    python examples/gemm_sm90.py        # checks against a float64 matmul (timings: benchmarks/gemm.py)

C (M x N, bf16) = A (M x K) @ B (N x K)^T, both operands K-major (row-major A, and B stored
like F.linear's weight), fp32 accumulation. This is the tensor-core layer's example, not the
library kernel: one CTA per 128x256 output tile (not persistent), every thread a consumer,
thread 0 also the producer (no warp specialization), the epilogue written from registers.

The design, per CTA of 256 threads (two warpgroups, each owning 64 rows of the tile):
  * shared memory holds STAGES k-tiles of A (128x64) and B (256x64); 64 bf16 is one 128-byte
    swizzle row, so each stage is the TMA box exactly and wgmma reads it through descriptors;
  * `full[s]` (one arrival + the stage's bytes) says stage s has landed; `empty[s]` (256
    arrivals) says every thread's wgmmas have finished reading it;
  * thread 0 keeps STAGES - 1 loads in flight ahead of the MMAs; after issuing k-tile kt's
    wgmmas, a thread waits for kt - 1's (wait_group(1)) and releases that stage, which is the
    one the next load refills.
"""

import torch

import cute_torch as cute

cpasync, warpgroup = cute.nvgpu.cpasync, cute.nvgpu.warpgroup

BM, BN, BK, STAGES = 128, 256, 64, 4
THREADS = 256


def _smem_tile(rows):
    """rows x 64 bf16 in 128-byte swizzled rows: the swizzle atom is 8 rows of 128 bytes."""
    atom = cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, BK), stride=(BK, 1)))
    return cute.tile_to_shape(atom, (rows, BK))


def _staged(rows):
    atom = cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, BK), stride=(BK, 1)))
    return cute.tile_to_shape(atom, (rows, BK, STAGES))


@cute.kernel
def gemm_kernel(tma_a, tma_b, mA, mB, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    smem = cute.SmemAllocator()                           # dynamic shared memory; the launch sizes it
    sA = smem.allocate_tensor(cute.BFloat16, _staged(BM), byte_alignment=1024)
    sB = smem.allocate_tensor(cute.BFloat16, _staged(BN), byte_alignment=1024)
    bars = smem.allocate_tensor(cute.Int64, cute.make_layout(2 * STAGES), byte_alignment=8)
    full, empty = bars.iterator, bars.iterator + STAGES

    gA = cute.local_tile(mA, (BM, BK), (bm, None))      # coordinates of this CTA's k-tiles of A
    gB = cute.local_tile(mB, (BN, BK), (bn, None))
    gC = cute.local_tile(mC, (BM, BN), (bm, bn))
    k_tiles = cute.size(gA, mode=[2])

    if tid == 0:
        cpasync.prefetch_descriptor(tma_a)
        cpasync.prefetch_descriptor(tma_b)
        for s in cute.range_constexpr(STAGES):
            cute.arch.mbarrier_init(full + s, 1)
            cute.arch.mbarrier_init(empty + s, THREADS)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()

    stage_bytes = tma_a.size_in_bytes + tma_b.size_in_bytes
    if tid == 0:                                          # the prologue: STAGES - 1 loads ahead
        for s in cute.range_constexpr(STAGES - 1):
            if s < k_tiles:
                cute.arch.mbarrier_arrive_and_expect_tx(full + s, stage_bytes)
                cute.copy(tma_a, gA[None, None, s], sA[None, None, s], tma_bar_ptr=full + s)
                cute.copy(tma_b, gB[None, None, s], sB[None, None, s], tma_bar_ptr=full + s)

    thr = tiled_mma.get_slice(tid)
    tCrA = thr.make_fragment_A(thr.partition_A(sA))       # descriptors: (V, 1, 4 k-blocks, STAGES)
    tCrB = thr.make_fragment_B(thr.partition_B(sB))
    tCgC = thr.partition_C(gC)
    acc = thr.make_fragment_C(tCgC)

    for kt in range(k_tiles):
        s = kt % STAGES
        cute.arch.mbarrier_wait(full + s, (kt // STAGES) % 2)
        warpgroup.fence()
        tiled_mma.set(warpgroup.Field.ACCUMULATE, kt > 0)
        for kb in cute.range_constexpr(BK // 16):
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb, s], tCrB[None, None, kb, s], acc)
            tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()
        warpgroup.wait_group(1)                           # k-tile kt - 1's wgmmas are done
        if kt > 0:
            cute.arch.mbarrier_arrive(empty + (kt - 1) % STAGES)
        if tid == 0:                                      # refill the stage kt - 1 used
            nk = kt + STAGES - 1
            if nk < k_tiles:
                ns = nk % STAGES
                if nk >= STAGES:
                    cute.arch.mbarrier_wait(empty + ns, (nk // STAGES - 1) % 2)
                cute.arch.mbarrier_arrive_and_expect_tx(full + ns, stage_bytes)
                cute.copy(tma_a, gA[None, None, nk], sA[None, None, ns], tma_bar_ptr=full + ns)
                cute.copy(tma_b, gB[None, None, nk], sB[None, None, ns], tma_bar_ptr=full + ns)
    warpgroup.wait_group(0)

    out = cute.make_fragment_like(acc, cute.BFloat16)
    out.store(acc.load().to(cute.BFloat16))
    cute.autovec_copy(out, tCgC)


@cute.jit
def gemm(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    """c = a @ b.T for bf16 a (M, K), b (N, K), c (M, N); M, N, K multiples of 128, 256, 64."""
    load = cpasync.CopyBulkTensorTileG2SOp()
    tma_a, mA = cpasync.make_tiled_tma_atom(load, a, _smem_tile(BM), (BM, BK))
    tma_b, mB = cpasync.make_tiled_tma_atom(load, b, _smem_tile(BN), (BN, BK))
    op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, BN, 16))
    tiled_mma = cute.make_tiled_mma(op, (2, 1, 1))        # two warpgroups along M
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    gemm_kernel(tma_a, tma_b, mA, mB, c, tiled_mma).launch(grid=(m // BM, n // BN, 1), block=(THREADS, 1, 1))


def check(m=256, n=512, k=320, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16().cuda()
    b = torch.randn(n, k, generator=g).bfloat16().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c)
    want = (a.double() @ b.double().t())
    err = ((c.double() - want).abs() / (want.abs() + 1)).max().item()
    return err


def main():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        a, b = torch.randn(256, 448).bfloat16(), torch.randn(512, 448).bfloat16()
        ptx = cute.compile(gemm, a, b, torch.empty(256, 512).bfloat16(), options={"arch": "sm_90a"}).__ptx__
        counts = {i: ptx.count(i) for i in ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait")}
        print(f"no GPU for this example here: compiled for sm_90a; PTX instructions: {counts}")
        return
    print(f"max relative error against float64: {check():.2e} ({torch.cuda.get_device_name()}); "
          "timings against cuBLAS: python benchmarks/gemm.py")


if __name__ == "__main__":
    main()
