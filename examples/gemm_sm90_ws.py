"""The Hopper GEMM of gemm_sm90.py, warp-specialized: a producer warpgroup that only issues TMA
loads (with few registers) and two consumer warpgroups that only issue wgmma (with the rest),
synchronized by a `cute.pipeline.PipelineTmaAsync`.

    python examples/gemm_sm90_ws.py     # checks against a float64 matmul (timings: benchmarks/gemm.py)

Per CTA (384 threads, a 128x256 output tile):
  * warpgroup 0 gives registers back (setmaxnreg 40); its thread 0 walks the k-tiles:
    acquire a released stage, announce its bytes, issue the TMA loads of A and B into it;
  * warpgroups 1 and 2 take registers (setmaxnreg 232), each owns 64 rows of the tile: wait for
    a stage, issue its wgmmas, and once the next k-tile's wgmmas are issued and the previous
    ones have finished (wait_group(1)), release the previous stage to the producer;
  * the pipeline states (stage index, phase) are DSL structures carried through the loops.
"""

import torch

import cute_torch as cute

cpasync, warpgroup, pipeline = cute.nvgpu.cpasync, cute.nvgpu.warpgroup, cute.pipeline

BM, BN, BK, STAGES = 128, 256, 64, 4
CONSUMERS = 256
THREADS = 128 + CONSUMERS


def _swizzle_atom():
    return cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, BK), stride=(BK, 1)))


@cute.kernel
def gemm_kernel(tma_a, tma_b, mA, mB, mC: cute.Tensor, tiled_mma: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    smem = cute.SmemAllocator()
    sA = smem.allocate_tensor(cute.BFloat16, cute.tile_to_shape(_swizzle_atom(), (BM, BK, STAGES)), 1024)
    sB = smem.allocate_tensor(cute.BFloat16, cute.tile_to_shape(_swizzle_atom(), (BN, BK, STAGES)), 1024)
    bars = smem.allocate_tensor(cute.Int64, cute.make_layout(2 * STAGES), 8)
    pipe = pipeline.PipelineTmaAsync.create(
        num_stages=STAGES, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMERS),
        tx_count=tma_a.size_in_bytes + tma_b.size_in_bytes, barrier_storage=bars.iterator)

    gA = cute.local_tile(mA, (BM, BK), (bm, None))
    gB = cute.local_tile(mB, (BN, BK), (bn, None))
    gC = cute.local_tile(mC, (BM, BN), (bm, bn))
    k_tiles = cute.size(gA, mode=[2])
    warp_group = cute.arch.make_warp_uniform(tid // 128)

    if warp_group == 0:                                   # the producer
        cute.arch.warpgroup_reg_dealloc(40)
        if tid == 0:
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            for kt in range(k_tiles):
                pipe.producer_acquire(state)
                bar = pipe.producer_get_barrier(state)
                cute.copy(tma_a, gA[None, None, kt], sA[None, None, state.index], tma_bar_ptr=bar)
                cute.copy(tma_b, gB[None, None, kt], sB[None, None, state.index], tma_bar_ptr=bar)
                state.advance()
    else:                                                 # the consumers
        cute.arch.warpgroup_reg_alloc(232)
        thr = tiled_mma.get_slice(tid - 128)
        tCrA = thr.make_fragment_A(thr.partition_A(sA))
        tCrB = thr.make_fragment_B(thr.partition_B(sB))
        tCgC = thr.partition_C(gC)
        acc = thr.make_fragment_C(tCgC)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        released = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        for kt in range(k_tiles):
            pipe.consumer_wait(state)
            warpgroup.fence()
            tiled_mma.set(warpgroup.Field.ACCUMULATE, kt > 0)
            for kb in cute.range_constexpr(BK // 16):
                cute.gemm(tiled_mma, acc, tCrA[None, None, kb, state.index], tCrB[None, None, kb, state.index], acc)
                tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
            warpgroup.commit_group()
            warpgroup.wait_group(1)                       # k-tile kt - 1's wgmmas are done
            if kt > 0:
                pipe.consumer_release(released)
                released.advance()
            state.advance()
        warpgroup.wait_group(0)
        out = cute.make_fragment_like(acc, cute.BFloat16)
        out.store(acc.load().to(cute.BFloat16))
        cute.autovec_copy(out, tCgC)


@cute.jit
def gemm(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    """c = a @ b.T for bf16 a (M, K), b (N, K), c (M, N); M, N, K multiples of 128, 256, 64."""
    load = cpasync.CopyBulkTensorTileG2SOp()
    tma_a, mA = cpasync.make_tiled_tma_atom(load, a, cute.tile_to_shape(_swizzle_atom(), (BM, BK)), (BM, BK))
    tma_b, mB = cpasync.make_tiled_tma_atom(load, b, cute.tile_to_shape(_swizzle_atom(), (BN, BK)), (BN, BK))
    op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, BN, 16))
    tiled_mma = cute.make_tiled_mma(op, (2, 1, 1))
    m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
    gemm_kernel(tma_a, tma_b, mA, mB, c, tiled_mma).launch(grid=(m // BM, n // BN, 1), block=(THREADS, 1, 1))


def check(m=256, n=512, k=448, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16().cuda()
    b = torch.randn(n, k, generator=g).bfloat16().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c)
    want = a.double() @ b.double().t()
    return ((c.double() - want).abs() / (want.abs() + 1)).max().item()


def main():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        a, b = torch.randn(256, 448).bfloat16(), torch.randn(512, 448).bfloat16()
        ptx = cute.compile(gemm, a, b, torch.empty(256, 512).bfloat16(), options={"arch": "sm_90a"}).__ptx__
        counts = {i: ptx.count(i) for i in ("wgmma.mma_async", "cp.async.bulk.tensor", "setmaxnreg")}
        print(f"no GPU for this example here: compiled for sm_90a; PTX instructions: {counts}")
        return
    print(f"max relative error against float64: {check():.2e} ({torch.cuda.get_device_name()}); "
          "timings against cuBLAS: python benchmarks/gemm.py")


if __name__ == "__main__":
    main()
