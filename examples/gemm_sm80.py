"""A warp-MMA GEMM in the DSL (Ampere and newer): mma.sync m16n8k16 atoms tiled over eight
warps, operands streamed into a 3-stage shared-memory ring by cp.async and read by ldmatrix.

    python examples/gemm_sm80.py        # checks against a float64 matmul (timings: benchmarks/gemm.py)

C (M x N, fp32) = A (M x K) @ B (N x K)^T in bf16 with fp32 accumulation; M, N multiples of
128 and K of 32. Per CTA (256 threads, a 128x128 tile):
  * a tiled copy of cp.async atoms (16 bytes = 8 bf16 each; 64 rows x 4 threads cover a
    64 x 32 block) fills stage s of sA and sB; each k-tile's copies are one cp.async group;
  * the loop waits until at most STAGES - 2 groups are in flight (k-tile kt has landed), syncs,
    refills the stage k-tile kt - 1 used (everyone is past it), then computes k-tile kt;
  * the 8 warps form a 4x2 grid of m16n8k16 atoms, so one k-step of 16 covers 64x16 and each
    thread repeats its atom 2 times along M and 8 along N (64 fp32 accumulators);
  * fragments come from shared memory by ldmatrix (make_tiled_copy_A/B of the tiled MMA): one
    ldmatrix.x4 per A atom, one .x2 per B atom, each thread addressing one 16-byte row;
  * shared rows are padded from 32 to 40 elements (80 bytes) so the 8 rows of one ldmatrix
    phase fall in 8 different 16-byte bank groups.
"""

import torch

import cute_torch as cute

BM, BN, BK, STAGES = 128, 128, 32, 3
THREADS = 256
PAD = 40  # shared row stride in elements: 80 bytes, 16-byte aligned, bank-spread


def _staged(rows):
    return cute.make_layout((rows, BK, STAGES), stride=(PAD, 1, rows * PAD))


@cute.kernel
def gemm_kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr,
                tiled_copy: cute.Constexpr, ldsm_a: cute.Constexpr, ldsm_b: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    gA = cute.local_tile(mA, (BM, BK), (bm, None))        # (BM, BK, k-tiles)
    gB = cute.local_tile(mB, (BN, BK), (bn, None))
    gC = cute.local_tile(mC, (BM, BN), (bm, bn))
    smem = cute.SmemAllocator()
    sA = smem.allocate_tensor(cute.BFloat16, _staged(BM), 16)
    sB = smem.allocate_tensor(cute.BFloat16, _staged(BN), 16)
    k_tiles = cute.size(gA, mode=[2])

    thr_copy = tiled_copy.get_slice(tid)
    tAgA, tAsA = thr_copy.partition_S(gA), thr_copy.partition_D(sA)   # (8 values, 2, 1, k-tiles | stages)
    tBgB, tBsB = thr_copy.partition_S(gB), thr_copy.partition_D(sB)
    for s in cute.range_constexpr(STAGES - 1):                 # the prologue: STAGES - 1 k-tiles in flight
        if s < k_tiles:
            cute.copy(tiled_copy, tAgA[None, None, None, s], tAsA[None, None, None, s])
            cute.copy(tiled_copy, tBgB[None, None, None, s], tBsB[None, None, None, s])
        cute.arch.cp_async_commit_group()

    thr = tiled_mma.get_slice(tid)
    tCsA, tCsB, tCgC = thr.partition_A(sA), thr.partition_B(sB), thr.partition_C(gC)
    tCrA = thr.make_fragment_A(tCsA[None, None, None, 0])
    tCrB = thr.make_fragment_B(tCsB[None, None, None, 0])
    acc = thr.make_fragment_C(tCgC)
    # ldmatrix views: the shared row each thread addresses per atom, and the fragments as targets.
    lds_a, lds_b = ldsm_a.get_slice(tid), ldsm_b.get_slice(tid)
    tLsA, tLrA = lds_a.partition_S(sA), lds_a.retile(tCrA)       # (8, 2, 2, STAGES), (8, 2, 2)
    tLsB, tLrB = lds_b.partition_S(sB), lds_b.retile(tCrB)       # (8, 8, 2, STAGES), (4, 8, 2)
    acc.fill(0.0)
    for kt in range(k_tiles):
        cute.arch.cp_async_wait_group(STAGES - 2)              # k-tile kt has landed
        cute.arch.sync_threads()                                # ... for every thread; kt - 1 is done
        nk = kt + STAGES - 1
        if nk < k_tiles:
            ns = nk % STAGES
            cute.copy(tiled_copy, tAgA[None, None, None, nk], tAsA[None, None, None, ns])
            cute.copy(tiled_copy, tBgB[None, None, None, nk], tBsB[None, None, None, ns])
        cute.arch.cp_async_commit_group()                       # one group per k-tile, even when empty
        s = kt % STAGES
        cute.copy(ldsm_a, tLsA[None, None, None, s], tLrA)     # one ldmatrix.x4 per A atom
        cute.copy(ldsm_b, tLsB[None, None, None, s], tLrB)     # one ldmatrix.x2 per B atom
        cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
    cute.autovec_copy(acc, tCgC)


@cute.jit
def gemm(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    """c = a @ b.T for bf16 a (M, K), b (N, K) and fp32 c (M, N)."""
    op = cute.nvgpu.warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (4, 2, 1))
    # (.cg, L2 only: each tile is read once per CTA)
    cg = cute.nvgpu.cpasync.CopyG2SOp(cute.nvgpu.cpasync.LoadCacheMode.GLOBAL)
    atom = cute.make_copy_atom(cg, cute.BFloat16, num_bits_per_copy=128)
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout((64, 4), stride=(4, 1)),
                                         cute.make_layout((1, 8), stride=(8, 1)))
    warp = cute.nvgpu.warp
    ldsm_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), cute.BFloat16), tiled_mma)
    ldsm_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 2), cute.BFloat16), tiled_mma)
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    gemm_kernel(a, b, c, tiled_mma, tiled_copy, ldsm_a, ldsm_b).launch(grid=(m // BM, n // BN, 1),
                                                                       block=(THREADS, 1, 1))


def check(m=256, n=384, k=160, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16().cuda()
    b = torch.randn(n, k, generator=g).bfloat16().cuda()
    c = torch.full((m, n), float("nan"), device="cuda")
    gemm(a, b, c)
    want = a.double() @ b.double().t()
    return ((c.double() - want).abs() / (want.abs() + 1)).max().item()


def main():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8:
        a, b = torch.randn(256, 448).bfloat16(), torch.randn(512, 448).bfloat16()
        ptx = cute.compile(gemm, a, b, torch.empty(256, 512), options={"arch": "sm_80"}).__ptx__
        counts = {i: ptx.count(i) for i in ("mma.sync", "ldmatrix", "cp.async.cg")}
        print(f"no GPU for this example here: compiled for sm_80; PTX instructions: {counts}")
        return
    print(f"max relative error against float64: {check():.2e} ({torch.cuda.get_device_name()}); "
          "timings against cuBLAS: python benchmarks/gemm.py")


if __name__ == "__main__":
    main()
