"""Pipelines: the producer/consumer protocol over a ring of shared-memory stages, CuTe DSL's
`cutlass.pipeline` under `cute_torch.pipeline` (same class and method names).

    pipe = cute.pipeline.PipelineTmaAsync.create(
        num_stages=4, producer_group=CooperativeGroup(Agent.Thread, 1),
        consumer_group=CooperativeGroup(Agent.Thread, 256), tx_count=stage_bytes,
        barrier_storage=bars.iterator)
    # producer (one thread)                      # consumers (every consumer thread)
    state = make_pipeline_state(Producer, 4)     state = make_pipeline_state(Consumer, 4)
    for k in range(k_tiles):                     for k in range(k_tiles):
        pipe.producer_acquire(state)                 pipe.consumer_wait(state)
        cute.copy(tma, ..., tma_bar_ptr=             ... read stage state.index ...
                  pipe.producer_get_barrier(state))  pipe.consumer_release(state)
        state.advance()                              state.advance()

Each stage has a `full` barrier (the producer's one arrival plus `tx_count` bytes of TMA
transactions complete it) and an `empty` barrier (one arrival per consumer thread,
`consumer_group.size` in all). A state is (index, phase, count): the stage and the parity of
its barriers' current phase. A producer starts at phase 1, so its first pass over the fresh
`empty` barriers does not wait. `PipelineState` is a dataclass of DSL integers, so it is
carried through dynamic loops (its `advance()` changes it in place; the preprocessor carries
locals changed in place).

Also `PipelineAsync` (threads produce on both sides: producers arrive on `full` themselves) and
`PipelineTmaStore` (an epilogue's ring of TMA-store buffers: acquire waits until the oldest
buffer's bulk stores have read it).

Differences from CuTe DSL: `create` initializes the barriers from thread 0 and ends with a CTA
barrier (a cluster barrier with `cta_layout_vmnk`, whose consumers also release the stages of
the peer CTAs that multicast into them), and the producer methods
of PipelineTmaAsync are meant for the one producer thread (guard them with `if tid == ...` or
`elect_one`).
"""

from __future__ import annotations

import dataclasses
import enum

from . import arch
from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .numeric import Int32, where
from .layout import Layout
from .pointer import Pointer, shared_pointer


class Agent(enum.Enum):
    Thread = "thread"


@dataclasses.dataclass(frozen=True)
class CooperativeGroup:
    """Who takes part on one side of a pipeline: `size` threads, each arriving once."""

    agent: Agent
    size: int = 1


class PipelineUserType(enum.Enum):
    Producer = "producer"
    Consumer = "consumer"


@dataclasses.dataclass
class PipelineState:
    """Where one side is in the ring: the stage `index`, the `phase` parity its barriers are
    waited on with, and how many stages it has passed (`count`)."""

    stages: int
    count: Int32
    index: Int32
    phase: Int32

    def advance(self) -> None:
        """The next stage; wrapping around the ring flips the phase."""
        self.count = self.count + 1
        following = self.index + 1
        wrapped = following == self.stages
        self.index = where(wrapped, Int32(0), following)
        self.phase = where(wrapped, self.phase ^ 1, self.phase)

    def advance_by(self, n) -> None:
        """`n` stages on at once (`n` may be a run-time value; CUTLASS's `operator+=`): a
        consumer that skips the stages of tiles another consumer owns (a ping-pong schedule)."""
        self.count = self.count + n
        total = self.index + n
        self.index = total % self.stages
        self.phase = self.phase ^ ((total // self.stages) & 1)

    def clone(self) -> "PipelineState":
        return dataclasses.replace(self)


def make_pipeline_state(user: PipelineUserType, stages: int) -> PipelineState:
    """The start state: stage 0, phase 1 for a producer (the fresh stages count as released),
    phase 0 for a consumer."""
    if not isinstance(stages, int) or stages < 1:
        raise DSLError(ARGUMENT_MISMATCH, f"a pipeline has a compile-time number of stages >= 1, got {stages!r}",
                       user_location())
    phase = 1 if user is PipelineUserType.Producer else 0
    return PipelineState(stages, Int32(0), Int32(0), Int32(phase))


class PipelineTmaAsync:
    """A ring of stages that TMA loads fill (producer) and the consumers read and release."""

    def __init__(self, full: Pointer, empty: Pointer, stages: int, tx_count, peers: tuple = ()):
        self.full, self.empty, self.stages, self.tx_count = full, empty, stages, tx_count
        self.peers = peers  # cluster ranks of the other CTAs whose multicasts fill this CTA's stages

    @staticmethod
    def create(*, num_stages: int, producer_group: CooperativeGroup, consumer_group: CooperativeGroup,
               tx_count, barrier_storage: Pointer, cta_layout_vmnk=None) -> "PipelineTmaAsync":
        """Initializes 2 * num_stages barriers at `barrier_storage` (8-byte words in shared
        memory: full then empty) from thread 0, fences them, and syncs the CTA.

        With `cta_layout_vmnk` (the cluster as (1, M, N, 1) CTAs, A multicast along N and B
        along M), a stage of this CTA is filled by the CTAs of its cluster row and column, so its
        `empty` barrier counts the consumers of all of them (M + N - 1 CTAs), each consumer
        releases the stage in all of them, and create ends with a cluster barrier (the barriers
        must exist before a peer's multicast or release reaches them)."""
        shared_pointer(barrier_storage, "PipelineTmaAsync.create's barrier_storage")
        for name, group in (("producer_group", producer_group), ("consumer_group", consumer_group)):
            if not isinstance(group, CooperativeGroup) or group.size < 1:
                raise DSLError(ARGUMENT_MISMATCH, f"{name} must be a CooperativeGroup of at least one thread",
                               user_location())
        peers, fan_in = _cluster_peers(cta_layout_vmnk)
        full, empty = barrier_storage, barrier_storage + num_stages
        _init_barriers(full, empty, num_stages, producer_group.size, consumer_group.size * fan_in,
                       cluster=cta_layout_vmnk is not None)
        return PipelineTmaAsync(full, empty, num_stages, tx_count, peers)

    def producer_acquire(self, state: PipelineState) -> None:
        """Waits until the consumers released the stage, then announces its bytes on `full`."""
        arch.mbarrier_wait(self.empty + state.index, state.phase)
        arch.mbarrier_arrive_and_expect_tx(self.full + state.index, self.tx_count)

    def producer_get_barrier(self, state: PipelineState) -> Pointer:
        """The barrier the stage's TMA loads complete (a copy's `tma_bar_ptr`)."""
        return self.full + state.index

    def producer_commit(self, state: PipelineState) -> None:
        """Nothing to do: the TMA transactions complete `full` themselves."""

    def producer_tail(self, state: PipelineState) -> None:
        """Waits until the consumers released every stage (before the producer may exit)."""
        for _ in range(self.stages):
            arch.mbarrier_wait(self.empty + state.index, state.phase)
            state.advance()

    def consumer_wait(self, state: PipelineState) -> None:
        """Waits until the stage's data has landed."""
        arch.mbarrier_wait(self.full + state.index, state.phase)

    def consumer_release(self, state: PipelineState) -> None:
        """This thread is done reading the stage (every consumer thread arrives once, here and
        in each cluster peer whose multicasts fill it)."""
        arch.mbarrier_arrive(self.empty + state.index)
        for peer in self.peers:
            arch.mbarrier_arrive(self.empty + state.index, peer)


def _cluster_peers(cta_layout_vmnk) -> tuple:
    """(the cluster ranks of this CTA's row and column peers, how many CTAs release a stage)."""
    if cta_layout_vmnk is None:
        return (), 1
    shape = cta_layout_vmnk.shape if isinstance(cta_layout_vmnk, Layout) else tuple(cta_layout_vmnk)
    if len(shape) != 4 or not all(isinstance(x, int) for x in shape) or shape[0] != 1 or shape[3] != 1:
        raise DSLError(ARGUMENT_MISMATCH, f"cta_layout_vmnk is the cluster as (1, M, N, 1) CTAs, got {shape}",
                       user_location())
    cm, cn = shape[1], shape[2]
    x, y, _ = arch.block_idx_in_cluster()
    # The other CTAs of this CTA's cluster row, then of its column (x fastest in the rank).
    row = [(x + i) % cm + cm * y for i in range(1, cm)]
    column = [x + cm * ((y + j) % cn) for j in range(1, cn)]
    return tuple(row + column), cm + cn - 1


def _init_barriers(full: Pointer, empty: Pointer, stages: int, producers: int, consumers: int,
                   cluster: bool = False) -> None:
    from .control import if_
    tid = arch.thread_idx()[0]

    def init():
        for s in range(stages):
            arch.mbarrier_init(full + s, producers)
            arch.mbarrier_init(empty + s, consumers)
        arch.mbarrier_init_fence()
        return ()

    if_(tid == 0, init, lambda: (), (), (), user_location())
    if cluster:
        arch.cluster_arrive()
        arch.cluster_wait()
    else:
        arch.sync_threads()


class PipelineAsync:
    """A ring where threads produce on both sides (no TMA): producers write a stage and arrive on
    `full` (`producer_group.size` arrivals complete it), consumers wait on it, read, and arrive
    on `empty` (`consumer_group.size` arrivals)."""

    def __init__(self, full: Pointer, empty: Pointer, stages: int):
        self.full, self.empty, self.stages = full, empty, stages

    @staticmethod
    def create(*, num_stages: int, producer_group: CooperativeGroup, consumer_group: CooperativeGroup,
               barrier_storage: Pointer) -> "PipelineAsync":
        shared_pointer(barrier_storage, "PipelineAsync.create's barrier_storage")
        full, empty = barrier_storage, barrier_storage + num_stages
        _init_barriers(full, empty, num_stages, producer_group.size, consumer_group.size)
        return PipelineAsync(full, empty, num_stages)

    def producer_acquire(self, state: PipelineState) -> None:
        arch.mbarrier_wait(self.empty + state.index, state.phase)

    def producer_commit(self, state: PipelineState) -> None:
        """This producer thread has written the stage (make the writes visible first if another
        proxy reads them)."""
        arch.mbarrier_arrive(self.full + state.index)

    def consumer_wait(self, state: PipelineState) -> None:
        arch.mbarrier_wait(self.full + state.index, state.phase)

    def consumer_release(self, state: PipelineState) -> None:
        arch.mbarrier_arrive(self.empty + state.index)


class PipelineTmaStore:
    """The ring of shared-memory buffers an epilogue stores from with TMA: before reusing a
    buffer, wait until at most `num_stages - 1` bulk store groups still read shared memory. The
    thread that issues the stores calls these."""

    def __init__(self, stages: int):
        self.stages = stages

    @staticmethod
    def create(*, num_stages: int, producer_group: CooperativeGroup | None = None) -> "PipelineTmaStore":
        if not isinstance(num_stages, int) or num_stages < 1:
            raise DSLError(ARGUMENT_MISMATCH, f"a pipeline has a compile-time number of stages >= 1, got "
                           f"{num_stages!r}", user_location())
        return PipelineTmaStore(num_stages)

    def producer_acquire(self) -> None:
        """The oldest buffer may be written again."""
        from .nvgpu.cpasync import wait_group
        wait_group(self.stages - 1, read=True)

    def producer_commit(self) -> None:
        """Closes the stores issued from the current buffer into one bulk group."""
        from .nvgpu.cpasync import commit_group
        commit_group()

    def producer_tail(self) -> None:
        """Every store has read its shared memory (before the CTA exits or reuses it all)."""
        from .nvgpu.cpasync import wait_group
        wait_group(0, read=True)
