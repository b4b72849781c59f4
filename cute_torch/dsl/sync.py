"""Barriers, fences, register reallocation and clusters: the `cute.arch` primitives that
pipelined and warp-specialized kernels synchronize with (CuTe DSL's names). They are NVVM ops
(inline PTX where MLIR 19 has none); the compiler checks the target has them (mbarrier
transactions, fences, elect, clusters: sm_90; setmaxnreg: sm_90a) and names the user's line.

Barriers are 8-byte words in shared memory, given as `cute.Pointer`s:

    bars = cute.arch.alloc_smem(cute.Int64, (stages,))
    cute.arch.mbarrier_init(bars.iterator + stage, arrivals)
"""

from __future__ import annotations

import contextlib

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from .numeric import Boolean, Float32, Int32, as_numeric, convert
from .pointer import Pointer, shared_pointer

# How long one mbarrier.try_wait may suspend the thread before the loop around it retries
# (a hint to the hardware, in nanoseconds; CUTLASS uses the same order).
_SUSPEND_NS = 10_000_000


def _i32(value) -> Int32:
    return convert(as_numeric(value, Int32), Int32)


def _barrier_ptr(ptr: Pointer, what: str) -> ir.Value:
    return shared_pointer(ptr, what).value


# -- mbarriers ----------------------------------------------------------------------------------------

def mbarrier_init(mbar_ptr: Pointer, cnt) -> None:
    """Initializes the barrier for `cnt` arrivals per phase (phase 0 pending)."""
    b = ir.require("device", "mbarrier_init")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_init")
    b.emit(f"nvvm.mbarrier.init.shared {bar.name}, {_i32(cnt).ir.name} : !llvm.ptr<3>, i32")


def mbarrier_init_fence() -> None:
    """Makes barrier initializations visible to the other threads and the async proxy (TMA)."""
    ir.require("device", "mbarrier_init_fence").emit("nvvm.fence.mbarrier.init")


def mbarrier_arrive(mbar_ptr: Pointer, peer_cta_rank_in_cluster=None) -> None:
    """One arrival on the barrier's current phase; with `peer_cta_rank_in_cluster`, on the
    barrier at the same shared-memory offset in that CTA of the cluster (mapa, then an arrival
    with the default CTA-scope release, as CUTLASS's ClusterBarrier does: a cluster-scope one
    made a clustered GEMM 0.6x as fast): how a consumer frees a stage its peers' TMA multicasts
    fill."""
    b = ir.require("device", "mbarrier_arrive")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_arrive")
    if peer_cta_rank_in_cluster is None:
        b.op(f"nvvm.mbarrier.arrive.shared {bar.name} : !llvm.ptr<3> -> i64", "i64")
        return
    require_arch("sm_90", "mbarrier_arrive on a peer CTA (distributed shared memory)")
    address = b.op(f"llvm.ptrtoint {bar.name} : !llvm.ptr<3> to i32", "i32")
    rank = _i32(peer_cta_rank_in_cluster)
    b.emit('llvm.inline_asm has_side_effects "{\\0A.reg .b32 remote;\\0Amapa.shared::cluster.u32 remote, $0, $1;'
           '\\0Ambarrier.arrive.shared::cluster.b64 _, [remote];\\0A}", "r,r" '
           f"{address.name}, {rank.ir.name} : (i32, i32) -> ()")


def require_arch(needed: str, what: str) -> None:
    """An error at the user's line when the module's target lacks `needed` (for inline PTX,
    which the compiler's own arch check cannot see)."""
    arch = getattr(ir.require("device", what).module, "arch", None)
    if arch is None or (arch == "sm_90a" if needed == "sm_90a" else arch >= needed):
        return
    which = "sm_90a, Hopper's arch-specific target" if needed == "sm_90a" else f"{needed} or newer"
    raise DSLError(UNSUPPORTED_TYPE, f"{what} needs {which}; this module is compiled for {arch}", user_location())


def mbarrier_arrive_and_expect_tx(mbar_ptr: Pointer, bytes) -> None:  # noqa: A002 - CuTe DSL's name
    """One arrival that also expects `bytes` more of asynchronous (TMA) transactions."""
    b = ir.require("device", "mbarrier_arrive_and_expect_tx")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_arrive_and_expect_tx")
    b.emit(f"nvvm.mbarrier.arrive.expect_tx.shared {bar.name}, {_i32(bytes).ir.name} : !llvm.ptr<3>, i32")


def mbarrier_expect_tx(mbar_ptr: Pointer, bytes) -> None:  # noqa: A002
    """Expects `bytes` more of transactions on the current phase, without arriving."""
    b = ir.require("device", "mbarrier_expect_tx")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_expect_tx")
    n = _i32(bytes)
    b.emit(f'llvm.inline_asm has_side_effects "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;", "l,r" '
           f"{bar.name}, {n.ir.name} : (!llvm.ptr<3>, i32) -> ()")


def mbarrier_wait(mbar_ptr: Pointer, phase) -> None:
    """Waits until the barrier's phase with parity `phase` has completed."""
    b = ir.require("device", "mbarrier_wait")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_wait")
    ticks = _i32(_SUSPEND_NS)
    b.emit(f"nvvm.mbarrier.try_wait.parity.shared {bar.name}, {_i32(phase).ir.name}, {ticks.ir.name} : "
           "!llvm.ptr<3>, i32, i32")


def mbarrier_try_wait(mbar_ptr: Pointer, phase) -> Boolean:
    """Whether the phase with parity `phase` has completed (one try, no loop)."""
    b = ir.require("device", "mbarrier_try_wait")
    bar = _barrier_ptr(mbar_ptr, "mbarrier_try_wait")
    text = ("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }")
    done = b.op(f'llvm.inline_asm has_side_effects "{text}", "=r,l,r" {bar.name}, {_i32(phase).ir.name} : '
                "(!llvm.ptr<3>, i32) -> i32", "i32")
    return Int32._wrap(done) != 0


# -- named barriers, elect, fences, registers -------------------------------------------------------

def barrier(barrier_id=0, number_of_threads=None) -> None:
    """bar.sync: waits for `number_of_threads` threads (all of the CTA if None, a multiple of
    32) at named barrier `barrier_id` (0..15; 0 is the one sync_threads uses)."""
    b = ir.require("device", "barrier")
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise DSLError(ARGUMENT_MISMATCH, f"barrier_id must be 0..15, got {barrier_id}", user_location())
    if isinstance(number_of_threads, int) and (number_of_threads <= 0 or number_of_threads % 32):
        raise DSLError(ARGUMENT_MISMATCH, f"number_of_threads must be a positive multiple of 32, got "
                       f"{number_of_threads}", user_location())
    text = f"nvvm.barrier id = {_i32(barrier_id).ir.name}"
    if number_of_threads is not None:
        text += f" number_of_threads = {_i32(number_of_threads).ir.name}"
    b.emit(text)


def barrier_arrive(barrier_id=0, number_of_threads=None) -> None:
    """bar.arrive: counts this thread at named barrier `barrier_id` without waiting (the other
    side waits with `barrier`, the total being `number_of_threads`): a one-way signal, e.g. for
    ordering two warpgroups' main loops."""
    b = ir.require("device", "barrier_arrive")
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise DSLError(ARGUMENT_MISMATCH, f"barrier_id must be 0..15, got {barrier_id}", user_location())
    if number_of_threads is None or (isinstance(number_of_threads, int) and
                                     (number_of_threads <= 0 or number_of_threads % 32)):
        raise DSLError(ARGUMENT_MISMATCH, f"barrier_arrive needs number_of_threads, a positive multiple of 32, got "
                       f"{number_of_threads}", user_location())
    b.emit(f"nvvm.barrier.arrive id = {_i32(barrier_id).ir.name} "
           f"number_of_threads = {_i32(number_of_threads).ir.name}")


@contextlib.contextmanager
def elect_one():
    """`with cute.arch.elect_one():` runs its body in one elected thread of the warp (elect.sync).
    DSL values made inside are not visible after it."""
    b = ir.require("device", "elect_one")
    chosen = b.op("nvvm.elect.sync -> i1", "i1")
    with b.region() as lines:
        yield
        b.emit("scf.yield")
    b.emit(f"scf.if {chosen.name} {{\n{ir.indent(lines)}\n}}")


_PROXIES = ("async", "async.global", "async.shared")


def fence_proxy(kind: str = "async.shared", space: str = "cta") -> None:
    """fence.proxy: orders the generic proxy's memory accesses against the async proxy's (TMA,
    wgmma). `kind` is "async", "async.global" or "async.shared" (then `space` "cta" or
    "cluster")."""
    b = ir.require("device", "fence_proxy")
    if kind not in _PROXIES:
        raise DSLError(ARGUMENT_MISMATCH, f"fence_proxy kind must be one of {sorted(_PROXIES)}, got {kind!r}",
                       user_location())
    attrs = f"kind = #nvvm.proxy_kind<{kind}>"
    if kind == "async.shared":
        if space not in ("cta", "cluster"):
            raise DSLError(ARGUMENT_MISMATCH, f"fence_proxy space must be 'cta' or 'cluster', got {space!r}",
                           user_location())
        attrs += f", space = #nvvm.shared_space<{space}>"
    b.emit(f"nvvm.fence.proxy {{{attrs}}}")


def _fence_acq_rel(scope: str) -> None:
    b = ir.require("device", f"fence_acq_rel_{scope}")
    b.emit(f'llvm.inline_asm has_side_effects "fence.acq_rel.{scope};", "~{{memory}}" : () -> ()')


def fence_acq_rel_cta() -> None:
    """fence.acq_rel.cta: this thread's memory accesses before it are ordered before those after
    it for the threads of its CTA."""
    _fence_acq_rel("cta")


def fence_acq_rel_cluster() -> None:
    """fence.acq_rel.cluster: fence_acq_rel_cta for the threads of the cluster."""
    _fence_acq_rel("cluster")


def fence_acq_rel_gpu() -> None:
    """fence.acq_rel.gpu: fence_acq_rel_cta for every thread of the GPU. Before a relaxed atomic
    that publishes a flag it makes the writes before it (the CTA's too, after a barrier)
    visible to a thread that sees the flag and fences in turn (CTAs handing partial results to
    each other within one launch)."""
    _fence_acq_rel("gpu")


def _setmaxnreg(action: str, count: int) -> None:
    b = ir.require("device", f"warpgroup_reg_{'alloc' if action == 'increase' else 'dealloc'}")
    if not isinstance(count, int) or not 24 <= count <= 256 or count % 8:
        raise DSLError(ARGUMENT_MISMATCH, f"a warpgroup's register count must be a compile-time multiple of 8 in "
                       f"24..256, got {count!r}", user_location())
    b.emit(f"nvvm.setmaxregister {action} {count}")


def warpgroup_reg_alloc(count: int) -> None:
    """setmaxnreg.inc: this warpgroup's threads grow to `count` registers (sm_90a). The kernel
    needs a compile-time block size (launch bounds) for ptxas to honor it."""
    _setmaxnreg("increase", count)


def warpgroup_reg_dealloc(count: int) -> None:
    """setmaxnreg.dec: this warpgroup's threads shrink to `count` registers (sm_90a)."""
    _setmaxnreg("decrease", count)


def make_warp_uniform(value):
    """`value` as the warp sees it in lane 0: the compiler may then keep it in a uniform
    register."""
    from .arch import shuffle_sync
    return shuffle_sync(value, 0)


# -- clusters -----------------------------------------------------------------------------------------

def _sreg3(name: str) -> tuple:
    b = ir.require("device", name)
    return tuple(Int32._wrap(b.op(f"nvvm.read.ptx.sreg.{name}.{d} : i32", "i32")) for d in "xyz")


def cluster_idx() -> tuple:
    """The cluster's coordinate in the grid of clusters."""
    return _sreg3("clusterid")


def cluster_dim() -> tuple:
    """The grid's size in clusters."""
    return _sreg3("nclusterid")


def block_idx_in_cluster() -> tuple:
    """This CTA's coordinate within its cluster."""
    return _sreg3("cluster.ctaid")


def cluster_shape() -> tuple:
    """The cluster's size in CTAs."""
    return _sreg3("cluster.nctaid")


def block_in_cluster_rank() -> Int32:
    """This CTA's linear rank within its cluster."""
    b = ir.require("device", "block_in_cluster_rank")
    return Int32._wrap(b.op("nvvm.read.ptx.sreg.cluster.ctarank : i32", "i32"))


def cluster_arrive() -> None:
    """barrier.cluster.arrive (release): this thread reached the cluster barrier."""
    ir.require("device", "cluster_arrive").emit("nvvm.cluster.arrive")


def cluster_arrive_relaxed() -> None:
    """barrier.cluster.arrive.relaxed: arrival without ordering memory."""
    ir.require("device", "cluster_arrive_relaxed").emit("nvvm.cluster.arrive.relaxed")


def cluster_wait() -> None:
    """barrier.cluster.wait (acquire): waits for every thread of the cluster to arrive."""
    ir.require("device", "cluster_wait").emit("nvvm.cluster.wait")


def store_shared_remote(value, smem_ptr: Pointer, mbar_ptr, peer_cta_rank_in_cluster) -> None:
    """Stores `value` (a Float32 or Int32) at the same shared-memory offset as `smem_ptr` in CTA
    `peer_cta_rank_in_cluster` of the cluster (distributed shared memory; the rank may be this
    CTA's own). With `mbar_ptr`, the store is asynchronous (st.async) and completes 4 bytes of
    transactions on the barrier at mbar_ptr's offset in that CTA: the peer waits on its barrier
    (expecting the bytes), and no cluster barrier is needed. With mbar_ptr None it is a weak
    st.shared::cluster that a cluster barrier (cluster_arrive, then the peer's cluster_wait)
    makes visible. quack's helper of this name takes the same arguments."""
    b = ir.require("device", "store_shared_remote")
    require_arch("sm_90", "store_shared_remote (distributed shared memory)")
    ptr = shared_pointer(smem_ptr, "store_shared_remote")
    dtype = smem_ptr.dtype
    if dtype not in (Float32, Int32):
        raise DSLError(UNSUPPORTED_TYPE, f"store_shared_remote stores Float32 or Int32, not {dtype.__name__}",
                       user_location())
    v = convert(as_numeric(value, dtype), dtype)
    address = b.op(f"llvm.ptrtoint {ptr.value.name} : !llvm.ptr<3> to i32", "i32")
    rank = _i32(peer_cta_rank_in_cluster)
    kind, constraint = ("f32", "f") if dtype is Float32 else ("b32", "r")
    if mbar_ptr is None:
        b.emit('llvm.inline_asm has_side_effects "{\\0A.reg .b32 remote;\\0Amapa.shared::cluster.u32 remote, $0, $1;'
               f'\\0Ast.shared::cluster.{kind} [remote], $2;\\0A}}", "r,r,{constraint}" '
               f"{address.name}, {rank.ir.name}, {v.ir.name} : (i32, i32, {dtype.mlir}) -> ()")
        return
    bar = b.op(f"llvm.ptrtoint {_barrier_ptr(mbar_ptr, 'store_shared_remote').name} : !llvm.ptr<3> to i32", "i32")
    b.emit('llvm.inline_asm has_side_effects "{\\0A.reg .b32 remote, remote_bar;'
           '\\0Amapa.shared::cluster.u32 remote, $0, $1;\\0Amapa.shared::cluster.u32 remote_bar, $3, $1;'
           f'\\0Ast.async.shared::cluster.mbarrier::complete_tx::bytes.{kind} [remote], $2, [remote_bar];'
           f'\\0A}}", "r,r,{constraint},r" '
           f"{address.name}, {rank.ir.name}, {v.ir.name}, {bar.name} : (i32, i32, {dtype.mlir}, i32) -> ()")
