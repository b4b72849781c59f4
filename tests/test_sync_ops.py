"""Compile tier: cute.Pointer and the cute.arch synchronization primitives of pipelined kernels
(mbarriers, named barriers, elect_one, proxy and acquire-release fences, setmaxnreg, clusters) reach PTX for sm_90a
(ptxas assembles it), and each misuse is a DSLError at the user's line, including an op the
target lacks. GPU tier: named barriers between warp pairs here; mbarriers, elect_one, proxy
fences and setmaxnreg run in the pipelined GEMMs (test_tma.py, test_pipeline.py)."""

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError

STAGES = 4


@cute.kernel
def _pipeline_sync(out: cute.Tensor, phase: cute.Int32):
    bars = cute.arch.alloc_smem(cute.Int64, (STAGES,))
    t = cute.arch.thread_idx()[0]
    if t == 0:
        for s in cute.range_constexpr(STAGES):
            cute.arch.mbarrier_init(bars.iterator + s, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    full = bars.iterator + 1
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(full, 1024)
    cute.arch.mbarrier_expect_tx(bars.iterator, 16)
    cute.arch.mbarrier_arrive(bars.iterator + 2)
    cute.arch.mbarrier_wait(full, phase)
    ready = cute.arch.mbarrier_try_wait(bars.iterator + 3, phase)
    cute.arch.barrier(barrier_id=1, number_of_threads=128)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.fence_acq_rel_cta()
    cute.arch.fence_acq_rel_cluster()
    cute.arch.fence_acq_rel_gpu()
    cute.arch.warpgroup_reg_dealloc(40)
    cute.arch.warpgroup_reg_alloc(232)
    rank = cute.arch.block_in_cluster_rank()
    cx, _, _ = cute.arch.block_idx_in_cluster()
    cute.arch.cluster_arrive_relaxed()
    cute.arch.cluster_wait()
    slot = cute.arch.alloc_smem(cute.Float32, (2,))
    cute.arch.store_shared_remote(cute.Float32(t), slot.iterator, full, 1 - rank)      # st.async, counted on `full`
    cute.arch.store_shared_remote(cute.Float32(t), slot.iterator + 1, None, 1 - rank)  # weak, for a cluster barrier
    out[t] = cute.Float32(cute.arch.make_warp_uniform(rank + cx)) + cute.Float32(ready)


@cute.jit
def _pipeline_sync_host(out: cute.Tensor, phase: cute.Int32):
    _pipeline_sync(out, phase).launch(grid=(2, 1, 1), block=(128, 1, 1), cluster=(2, 1, 1))


def test_sync_primitives_reach_ptx_for_sm90a():
    ptx = cute.compile(_pipeline_sync_host, torch.zeros(128), 0, options={"arch": "sm_90a"}).__ptx__
    for instruction in ("mbarrier.init.shared.b64", "fence.mbarrier_init.release.cluster", "elect.sync",
                        "mbarrier.arrive.expect_tx.shared.b64", "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
                        "mbarrier.arrive.shared.b64", "mbarrier.try_wait.parity.shared.b64",
                        "mbarrier.try_wait.parity.shared::cta.b64", "bar.sync", "fence.proxy.async.shared::cta",
                        "fence.acq_rel.cta;", "fence.acq_rel.cluster;", "fence.acq_rel.gpu;",
                        "setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232",
                        "%cluster_ctarank", "%cluster_ctaid.x", "barrier.cluster.arrive.relaxed",
                        "barrier.cluster.wait", "shfl.sync.idx", "mapa.shared::cluster.u32",
                        "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32", "st.shared::cluster.f32"):
        assert instruction in ptx, instruction


def test_an_op_the_target_lacks_is_an_error_at_the_users_line():
    with pytest.raises(DSLError) as err:
        cute.compile(_pipeline_sync_host, torch.zeros(128), 0, options={"arch": "sm_80"})
    assert "sm_80" in str(err.value) and "test_sync_ops.py" in str(err.value)


@cute.kernel
def _pointers(out: cute.Tensor):
    p = out.iterator
    q = p + 3
    words = cute.recast_ptr(q, cute.Int32)
    view = cute.make_tensor(words, cute.make_layout(2))
    view[1] = 7
    cute.printf(f"{p.type} {q.type} {words.type}")


@cute.jit
def _pointers_host(out: cute.Tensor):
    _pointers(out).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_pointer_arithmetic_recast_and_make_tensor():
    mlir = cute.compile(_pointers_host, torch.zeros(16)).__mlir__
    # 3 floats in: 12 bytes, so 4-byte alignment is what is still known.
    assert "ptr<Float32 gmem align 16> ptr<Float32 gmem align 4> ptr<Int32 gmem align 4>" in mlir
    assert "i32, i32" in mlir or "getelementptr" in mlir


@cute.kernel
def _aligned(out: cute.Tensor):
    p = out.iterator + 3
    a = p.align(16)
    cute.make_tensor(a, cute.make_layout(4)).store(cute.make_rmem_tensor(4, cute.Float16).load())
    cute.printf(f"{p.type} {a.type} {p.align(2).type}")
    k = cute.arch.block_idx()[0] * 8
    cute.printf(f"{(out.iterator + k).type} {(out.iterator + cute.assume(k, divby=8)).type}")


@cute.jit
def _aligned_host(out: cute.Tensor):
    _aligned(out).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_pointer_align_rounds_up_and_knows_its_alignment():
    """A row that starts anywhere reaches its first 16-byte vector (kernels/row_chunks.py):
    the rounded pointer is known 16-byte aligned, so the four halves after it store as one
    8-byte vector; an alignment already known costs nothing. A pointer moved by a run-time
    offset keeps the alignment cute.assume promises for the offset."""
    compiled = cute.compile(_aligned_host, torch.zeros(16, dtype=torch.float16), options={"arch": "sm_90a"})
    assert "ptr<Float16 gmem align 2> ptr<Float16 gmem align 16> ptr<Float16 gmem align 2>" in compiled.__mlir__
    # a run-time offset keeps what cute.assume says it is a multiple of: 8 halves, 16 bytes
    assert '"ptr<Float16 gmem align 2> ptr<Float16 gmem align 16>\\0A"' in compiled.__mlir__
    assert "llvm.inttoptr" in compiled.__mlir__ and "st.global.v2.b32" in compiled.__ptx__


@cute.kernel
def _chosen(a: cute.Tensor, b: cute.Tensor):
    t = cute.arch.thread_idx()[0]
    p = cute.where(t < 64, a.iterator, b.iterator + 4)
    cute.printf(f"{p.type}")
    cute.make_tensor(p, cute.make_layout(4))[t % 4] = cute.Float32(1.0)


@cute.jit
def _chosen_host(a: cute.Tensor, b: cute.Tensor):
    _chosen(a, b).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_where_chooses_between_pointers():
    """A kernel that picks its tensor at run time (the segmented pointwise kernel): one select of
    the addresses, the alignment both pointers have (4 floats in: 16 bytes, kept)."""
    compiled = cute.compile(_chosen_host, torch.zeros(16), torch.zeros(16), options={"arch": "sm_90a"})
    assert "llvm.select" in compiled.__mlir__ and "selp.b64" in compiled.__ptx__
    assert '"ptr<Float32 gmem align 16>\\0A"' in compiled.__mlir__


def _kernel_with(body):
    @cute.kernel
    def kernel(out: cute.Tensor):
        body(out)

    @cute.jit
    def host(out: cute.Tensor):
        kernel(out).launch(grid=(1, 1, 1), block=(128, 1, 1))
    return host


@pytest.mark.parametrize("body, message", [
    (lambda out: cute.arch.mbarrier_init(out.iterator, 1),
     "mbarrier_init takes a shared-memory cute.Pointer, got ptr<Float32 gmem align 16>"),
    (lambda out: cute.arch.warpgroup_reg_alloc(100),
     "a warpgroup's register count must be a compile-time multiple of 8 in 24..256, got 100"),
    (lambda out: cute.arch.barrier(barrier_id=16), "barrier_id must be 0..15, got 16"),
    (lambda out: cute.arch.barrier(number_of_threads=100), "number_of_threads must be a positive multiple of 32"),
    (lambda out: cute.arch.fence_proxy("sync"), "fence_proxy kind must be one of"),
    (lambda out: cute.arch.barrier_arrive(barrier_id=1), "barrier_arrive needs number_of_threads"),
    (lambda out: cute.recast_ptr(out), "recast_ptr takes a cute.Pointer, got Tensor"),
    (lambda out: out.iterator.align(12), "Pointer.align takes a power of two (bytes), got 12"),
    (lambda out: cute.where(cute.arch.thread_idx()[0] < 2, out.iterator, cute.recast_ptr(out.iterator, cute.Int32)),
     "cute.where chooses between two pointers of one element type and memory space, got ptr<Float32 gmem align 16> "
     "and ptr<Int32 gmem align 16>"),
    (lambda out: cute.arch.store_shared_remote(1.0, out.iterator, None, 0),
     "store_shared_remote takes a shared-memory cute.Pointer"),
    (lambda out: cute.arch.store_shared_remote(1.0, cute.arch.alloc_smem(cute.Float16, (2,)).iterator, None, 0),
     "store_shared_remote stores Float32 or Int32, not Float16"),
])
def test_misuse_is_a_clear_error(body, message):
    with pytest.raises(DSLError) as err:
        cute.compile(_kernel_with(body), torch.zeros(128), options={"arch": "sm_90a"})
    assert message in str(err.value)
    assert "test_sync_ops.py" in str(err.value)


# -- GPU tier: a named barrier between two warps while two others use another one --------------

@cute.kernel
def _named_barriers(out: cute.Tensor, rounds: cute.Int32):
    """Warps 0-1 pass values to each other through shared memory under barrier 1, warps 2-3
    under barrier 2; each round every thread writes its slot, syncs with its pair, reads its
    partner's slot, syncs again before the next write."""
    slots = cute.arch.alloc_smem(cute.Int32, (128,))
    t = cute.arch.thread_idx()[0]
    pair = t // 64
    partner = t ^ 32                      # the same lane in the other warp of the pair
    total = cute.Int32(0)
    for r in range(rounds):
        slots[t] = t * 1000 + r
        cute.arch.barrier(barrier_id=1 + pair, number_of_threads=64)
        total = total + slots[partner]
        cute.arch.barrier(barrier_id=1 + pair, number_of_threads=64)
    out[t] = total


@cute.jit
def _named_barriers_host(out: cute.Tensor, rounds: cute.Int32):
    _named_barriers(out, rounds).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_named_barriers_reach_ptx():
    ptx = cute.compile(_named_barriers_host, torch.zeros(128, dtype=torch.int32), 3, options={"arch": "sm_80"}).__ptx__
    assert ptx.count("bar.sync") == 2     # the barrier id and thread count are registers (id = 1 + pair)


@pytest.mark.gpu
def test_named_barriers_order_shared_memory_between_warp_pairs():
    out = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    rounds = 7
    _named_barriers_host(out, rounds)
    torch.cuda.synchronize()
    partner = torch.arange(128) ^ 32
    want = partner * 1000 * rounds + sum(range(rounds))
    assert torch.equal(out.cpu(), want.to(torch.int32))


# -- a one-way signal: warps 0-1 write, arrive (bar.arrive); warps 2-3 wait (bar.sync) and read ----

@cute.kernel
def _arrive_then_read(out: cute.Tensor):
    slots = cute.arch.alloc_smem(cute.Int32, (64,))
    t = cute.arch.thread_idx()[0]
    if t < 64:
        slots[t] = t * 7 + 3
        cute.arch.barrier_arrive(barrier_id=1, number_of_threads=128)
    else:
        cute.arch.barrier(barrier_id=1, number_of_threads=128)
        out[t - 64] = slots[127 - t]


@cute.jit
def _arrive_then_read_host(out: cute.Tensor):
    _arrive_then_read(out).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_barrier_arrive_reaches_ptx():
    ptx = cute.compile(_arrive_then_read_host, torch.zeros(64, dtype=torch.int32), options={"arch": "sm_80"}).__ptx__
    assert ptx.count("bar.arrive") == 1 and ptx.count("bar.sync") == 1


@pytest.mark.gpu
def test_barrier_arrive_signals_the_waiting_warps():
    out = torch.full((64,), -1, dtype=torch.int32, device="cuda")
    _arrive_then_read_host(out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), (torch.arange(63, -1, -1) * 7 + 3).to(torch.int32))
