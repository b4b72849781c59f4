"""A warp-MMA GEMM in the DSL (Ampere and newer): mma.sync m16n8k16 atoms tiled over eight
warps, operands staged through shared memory.

    python examples/gemm_sm80.py        # checks against torch, then times it against cuBLAS

C (M x N, fp32) = A (M x K) @ B (N x K)^T in bf16 with fp32 accumulation; M, N multiples of
128 and K of 32. This is the tensor-core layer's Ampere example, kept simple: one k-tile in
shared memory at a time, copies through registers (no cp.async or ldmatrix yet), so it shows
the tiled-MMA partitioning rather than Ampere's peak (see benchmarks/RESULTS.md).

Per CTA (256 threads, a 128x128 tile): the 8 warps form a 4x2 grid of m16n8k16 atoms, so one
k-step of 16 covers 64x16 and each thread repeats its atom 2 times along M and 8 along N
(64 fp32 accumulators). Shared rows are padded from 32 to 40 elements so the 8 rows a warp's
fragment loads touch fall in different banks.
"""

import time

import torch

import cute_torch as cute

BM, BN, BK = 128, 128, 32
THREADS = 256
PAD = 40  # shared row stride in elements: 80 bytes, 16-byte aligned, bank-spread


def _copy_layouts():
    """256 threads as 64 rows of 4, each one 16-byte vector (8 bf16) of a 32-wide row."""
    return cute.make_layout_tv(cute.make_layout((64, 4), stride=(4, 1)), cute.make_layout((1, 8), stride=(8, 1)))


@cute.kernel
def gemm_kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    gA = cute.local_tile(mA, (BM, BK), (bm, None))        # (BM, BK, k-tiles)
    gB = cute.local_tile(mB, (BN, BK), (bn, None))
    gC = cute.local_tile(mC, (BM, BN), (bm, bn))
    sA = cute.arch.alloc_smem(cute.BFloat16, (BM, BK), stride=(PAD, 1))
    sB = cute.arch.alloc_smem(cute.BFloat16, (BN, BK), stride=(PAD, 1))

    tiler, tv = _copy_layouts()

    def thread_part(tensor, i):
        return cute.composition(cute.zipped_divide(tensor, tiler)[((None, None), (i, 0))], tv)[(tid, None)]

    thr = tiled_mma.get_slice(tid)
    tCsA, tCsB, tCgC = thr.partition_A(sA), thr.partition_B(sB), thr.partition_C(gC)
    tCrA, tCrB = thr.make_fragment_A(tCsA), thr.make_fragment_B(tCsB)
    acc = thr.make_fragment_C(tCgC)
    acc.fill(0.0)
    for kt in range(cute.size(gA, mode=[2])):
        for i in cute.range_constexpr(BM // 64):           # 16-byte vectors, global -> shared
            cute.autovec_copy(thread_part(gA[None, None, kt], i), thread_part(sA, i))
            cute.autovec_copy(thread_part(gB[None, None, kt], i), thread_part(sB, i))
        cute.arch.sync_threads()
        cute.autovec_copy(tCsA, tCrA)
        cute.autovec_copy(tCsB, tCrB)
        cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
        cute.arch.sync_threads()
    cute.autovec_copy(acc, tCgC)


@cute.jit
def gemm(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    """c = a @ b.T for bf16 a (M, K), b (N, K) and fp32 c (M, N)."""
    op = cute.nvgpu.warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(op, (4, 2, 1))
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    gemm_kernel(a, b, c, tiled_mma).launch(grid=(m // BM, n // BN, 1), block=(THREADS, 1, 1))


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
        counts = {i: ptx.count(i) for i in ("mma.sync", "wgmma.mma_async", "cp.async.bulk.tensor", "setmaxnreg")}
        print(f"no GPU for this example here: compiled for sm_80; PTX instructions: {counts}")
        return
    print(f"max relative error against float64: {check():.2e}")
    m = n = k = 4096
    a, b = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
    c = torch.empty(m, n, device="cuda")

    def timed(fn, iters=30):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
        return sorted(times)[len(times) // 2]

    start = time.perf_counter()
    ours = timed(lambda: gemm(a, b, c))
    cublas = timed(lambda: torch.mm(a, b.t()))
    tf = 2 * m * n * k / 1e9
    print(f"{torch.cuda.get_device_name()}, {m}x{n}x{k} bf16 -> fp32: ours {ours:.3f} ms ({tf / ours:.0f} TFLOP/s), "
          f"cuBLAS bf16 {cublas:.3f} ms ({tf / cublas:.0f} TFLOP/s), ratio {cublas / ours:.2f} "
          f"(incl. first call: {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
