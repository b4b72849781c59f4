"""What every row-wise kernel here shares (softmax, the norms, cross-entropy): how a CTA's
threads cover rows, how a thread reads and writes its part of a row, and how a value is
reduced over a row's threads.

A row of N elements is kept in registers: read once, written once. `threads_per_row` threads
share a row; thread `lane` of a row owns the 16-byte vectors `lane, lane + threads_per_row,
...`, so each warp-wide access covers whole, consecutive 128-byte lines. A CTA holds
`threads // threads_per_row` rows. Rows past the tensor's end read its last row (loads need no
predicate) and store nothing; vectors past N (N not a multiple of threads_per_row * vector) are
guarded one by one, and only the last ones can be. A reduction folds a thread's values, then
the row's lanes by butterfly shuffles, then, for rows wider than a warp, the warps' partial
results through shared memory.

Rows too long for one CTA's registers are split over a cluster of up to MAX_CLUSTER CTAs
(NON_PORTABLE_CLUSTER where a kernel gains), each holding a contiguous part of every row of its
group; a reduction then also trades the CTAs'
partial results through distributed shared memory: each CTA stores its values into a slot of
every CTA (its own too) with st.async, which counts the bytes on the receiver's mbarrier; each
waits on its own barrier and folds the slots in rank order (the same result in every CTA).
No cluster barrier per reduction: a CTA waits for its peers' values only. A thread's `lane`
counts the row's threads over the whole cluster (rank * threads_per_row + its lane in the
CTA), so `lane == 0` is still one thread per row.

Also here: quack's one-phase exchange for one row per cluster of 256-thread CTAs staged by
cp.async (direct_config, open_direct, direct_exchange, direct_fold: each warp's partial sent to
every CTA at once), the walks of several rows per cluster with each row's exchange pipelined
behind the next row's loads on persistent grids (persistent_groups), and fast_memory, the card
property several shapes are chosen by.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch

import cute_torch as cute

# Rows longer than this do not fit one CTA's registers: kernels written for clusters (the
# norms, softmax) split them over up to MAX_CLUSTER CTAs (the portable cluster size);
# cross-entropy, and softmax past MAX_N x MAX_CLUSTER, read them in chunks (kernels/row_chunks.py).
MAX_N = 32768
MAX_CLUSTER = 8
# Hopper runs clusters of up to 16 CTAs where a kernel allows it (the runtime does so for any
# launch over 8): fewer fit at once (one per GPC), so only kernels that gain take them.
NON_PORTABLE_CLUSTER = 16
# An SM's registers and threads (what the shape rules count CTAs per SM from).
MAX_REGISTERS, MAX_SM_THREADS = 65536, 2048


def register_ctas(threads: int, registers: int) -> int:
    """CTAs of `threads` threads at `registers` a thread that an SM's registers fit, as the
    hardware allocates them: in eights a thread (256 a warp), so 84 registers a thread in
    256-thread CTAs fit two, not three."""
    return MAX_REGISTERS // (threads * -(-registers // 8) * 8)
# Threads per CTA at most: 128 registers each (1024 threads would leave 64, and the backward
# kernels spilled there).
MAX_THREADS = 512


@dataclass(frozen=True)
class RowConfig:
    """How a CTA covers rows of `n` elements (a Constexpr of every row kernel)."""
    n: int
    vec: int              # elements per vector access (16 bytes where N and the rows allow)
    threads_per_row: int  # per CTA
    threads: int          # per CTA
    cluster: int = 1      # CTAs that share a row, each holding `part` columns
    peeled: bool = False  # rows start anywhere: read in vectors from their first 16-byte boundary
                          # on, the elements before it and after the last whole vector one at a
                          # time (kernels/row_chunks.py)

    @property
    def rows(self) -> int:
        """Rows per CTA."""
        return self.threads // self.threads_per_row

    @property
    def padding(self) -> int:
        """Columns past N that a row's threads hold."""
        return self.cluster * self.part - self.n

    @property
    def vectors(self) -> int:
        """Vectors per thread per row."""
        return -(-self.n // (self.cluster * self.threads_per_row * self.vec))

    @property
    def part(self) -> int:
        """Columns of a row per CTA (the last CTA's may run past N)."""
        return self.vectors * self.threads_per_row * self.vec

    def guarded(self, i: int) -> bool:
        """Whether some lane's vector `i` can fall past N (then its accesses are predicated)."""
        return (self.cluster - 1) * self.part + (i + 1) * self.threads_per_row * self.vec > self.n


def row_config(n: int, element_size: int, row_stride: int = 0, data_ptr: int = 0,
               max_values: int = 64, max_cluster: int = 1) -> RowConfig:
    """The CTA shape for rows of `n` elements of `element_size` bytes: the widest vector that
    divides N, the row stride and the address; 8 to 32 threads per row for short rows, more
    as rows grow, so that a thread holds at most `max_values` elements of a row (a kernel that
    keeps several row-sized values live asks for fewer) while a row's threads fit one CTA of
    MAX_THREADS; 128 threads per CTA, or one row's threads where a row needs more. Where one
    CTA's row would still exceed `max_values` per thread, the row is split over a cluster of
    2, 4, ... CTAs, up to `max_cluster` (a kernel written for clusters passes MAX_CLUSTER)."""
    if not 1 <= n <= MAX_N * max_cluster:
        raise ValueError(f"row kernels take rows of 1 to {MAX_N * max_cluster} elements, got {n}")
    vec = 16 // element_size
    while vec > 1 and (n % vec or row_stride % vec or data_ptr % (vec * element_size)):
        vec //= 2
    cluster = 1
    while True:
        vectors = -(-n // (vec * cluster))
        per_row = 8 if vectors <= 8 else 16 if vectors <= 32 else 32
        while per_row < MAX_THREADS and -(-vectors // per_row) * vec > max_values:
            per_row *= 2
        fits = -(-vectors // per_row) * vec <= max_values and vectors * vec <= MAX_N
        if fits or cluster >= max_cluster:
            return RowConfig(n, vec, per_row, max(128, per_row), cluster)
        cluster *= 2


def dynamic_rows(t: torch.Tensor | None) -> cute.TensorArg | None:
    """A (M, N) tensor (or a per-row (M,) vector) as a kernel argument whose M is a run-time
    value: one compiled kernel for every number of rows. None stays None (an absent operand)."""
    if t is None:
        return None
    arg = cute.from_dlpack(t, assumed_align=16 if t.data_ptr() % 16 == 0 else None)
    return arg.mark_compact_shape_dynamic(0, stride_order=(1, 0) if t.dim() == 2 else None)


# -- device helpers (called while tracing a kernel) -----------------------------------------------

def cta_group(cfg: RowConfig):
    """(this CTA's group, the grid's number of groups): a group of `cfg.cluster` CTAs (one
    cluster) covers `cfg.rows` rows."""
    bidx, _, _ = cute.arch.block_idx()
    grid, _, _ = cute.arch.grid_dim()
    if cute.const_expr(cfg.cluster == 1):
        return bidx, grid
    return bidx // cfg.cluster, grid // cfg.cluster


def cta_rank(cfg: RowConfig):
    """This CTA's rank in its cluster (0 without one)."""
    if cute.const_expr(cfg.cluster == 1):
        return 0
    bidx, _, _ = cute.arch.block_idx()
    return bidx % cfg.cluster          # clusters of (cluster, 1, 1) CTAs: the rank is block_idx's low part


def thread_place(cfg: RowConfig):
    """(row of this thread, its lane in the row, its row within the CTA)."""
    tidx, _, _ = cute.arch.thread_idx()
    group, _ = cta_group(cfg)
    row_in_cta = tidx // cfg.threads_per_row
    lane = tidx % cfg.threads_per_row
    if cute.const_expr(cfg.cluster > 1):
        lane = cta_rank(cfg) * cfg.threads_per_row + lane
    return group * cfg.rows + row_in_cta, lane, row_in_cta


class ClusterPeers(NamedTuple):
    """A cluster kernel's exchange buffers for row_reduce: slots (rows, CTAs, values, sets)
    and one mbarrier per set."""
    slots: cute.Tensor
    bars: cute.Pointer
    sets: int


MAX_VALUES_PER_REDUCTION = 2


@cute.jit
def cluster_peers(cfg: RowConfig, sets: int = 2):
    """The exchange buffers row_reduce needs under a cluster (None without one), ready: a kernel
    calls it at its start, before any reduction. Waits for every CTA of the cluster to start
    (no CTA may store into a peer's shared memory before). `sets` of slots: 2 where each
    exchange is received before the next is sent, 4 where sends run one exchange ahead
    (cluster_send)."""
    if cute.const_expr(cfg.cluster == 1):
        return None
    slots = cute.arch.alloc_smem(cute.Float32, (cfg.rows, cfg.cluster, MAX_VALUES_PER_REDUCTION, sets))
    bars = cute.arch.alloc_smem(cute.Int64, (sets,), alignment=8).iterator
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        for s in cute.range_constexpr(sets):
            cute.arch.mbarrier_init(bars + s, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive_relaxed()
    cute.arch.cluster_wait()
    return ClusterPeers(slots, bars, sets)


def _column(lane, i: int, cfg: RowConfig):
    """The first column of this thread's vector `i`."""
    if cute.const_expr(cfg.cluster == 1):
        return (i * cfg.threads_per_row + lane) * cfg.vec
    rank, local = lane // cfg.threads_per_row, lane % cfg.threads_per_row
    return rank * cfg.part + (i * cfg.threads_per_row + local) * cfg.vec


def thread_vectors(t: cute.Tensor, row, lane, cfg: RowConfig) -> cute.Tensor:
    """This thread's (vec, vectors) elements of row `row` of `t` (a 1-D `t` is one row)."""
    line = t if cute.rank(t) == 1 else t[(row, None)]
    if cute.const_expr(cfg.cluster == 1):
        split = cute.make_layout((cfg.vec, cfg.threads_per_row, cfg.vectors),
                                 stride=(1, cfg.vec, cfg.vec * cfg.threads_per_row))
        return cute.composition(line, split)[(None, lane, None)]
    split = cute.make_layout((cfg.vec, cfg.threads_per_row, cfg.vectors, cfg.cluster),
                             stride=(1, cfg.vec, cfg.vec * cfg.threads_per_row, cfg.part))
    return cute.composition(line, split)[(None, lane % cfg.threads_per_row, None, lane // cfg.threads_per_row)]


def clamp_row(row, rows):
    """`row`, or the last row for threads past the end (their loads stay in bounds)."""
    return cute.math.min(row, rows - 1)


@cute.jit
def load_row(t: cute.Tensor, row, lane, cfg: RowConfig, fill=0.0):
    """This thread's values of row `row` as Float32 (a TensorSSA of vec * vectors); values
    past N read as `fill`."""
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    fetch_row(t, row, lane, cfg, frag, fill)
    return frag.load().to(cute.Float32)


@cute.jit
def fetch_row(t: cute.Tensor, row, lane, cfg: RowConfig, frag: cute.Tensor, fill=0.0) -> None:
    """Loads this thread's elements of row `row` of `t` into `frag`, a (vec, vectors) register
    fragment of t's type, `fill` past N. A kernel that walks rows fetches the next row before
    the current one's reductions: the loads stay in flight through them (registers hold the
    raw elements, half a Float32 row for 16-bit types)."""
    src = thread_vectors(t, row, lane, cfg)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            frag[(None, i)].fill(fill)
            if _column(lane, i, cfg) < cfg.n:
                frag[(None, i)].store(src[(None, i)].load())
        else:
            frag[(None, i)].store(src[(None, i)].load())


# -- rows staged through shared memory (cp.async) -------------------------------------------------

def stage_vectors(line: cute.Tensor, lane, cfg: RowConfig) -> cute.Tensor:
    """This thread's (vec, vectors) elements of `line`: one row's `cfg.part` columns of this
    CTA in a shared-memory stage, laid out as the row is (thread_vectors' pattern)."""
    split = cute.make_layout((cfg.vec, cfg.threads_per_row, cfg.vectors),
                             stride=(1, cfg.vec, cfg.vec * cfg.threads_per_row))
    return cute.composition(line, split)[(None, lane % cfg.threads_per_row, None)]


@cute.jit
def stage_row(t: cute.Tensor, row, lane, cfg: RowConfig, dst: cute.Tensor,
              cache=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL) -> None:
    """Starts copying this thread's values of row `row` of `t` into `dst` (its stage_vectors)
    with cp.async, without registers; the caller commits and waits (cute.arch.cp_async_*).
    Only this thread reads what it staged, so no CTA barrier is needed. Vectors past N are not
    copied (clear_staged fills them once); vectors under 4 bytes (cp.async's least) go through
    registers, synchronously. `cache`: the copies' cache operator (`.cg`, L2 only, by default:
    the norm backwards' rings measured faster so, LayerNorm bf16 on an H200 0.87 against 0.71
    of copy at 16384 columns, 0.80 against 0.68 at 131072; load_row_staged's forwards take `.ca`)."""
    src = thread_vectors(t, row, lane, cfg)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            if _column(lane, i, cfg) < cfg.n:
                _stage_vector(src[(None, i)], dst[(None, i)], cfg.vec * t.element_type.width, cache)
        else:
            _stage_vector(src[(None, i)], dst[(None, i)], cfg.vec * t.element_type.width, cache)


def _stage_vector(src: cute.Tensor, dst: cute.Tensor, bits: int, cache) -> None:
    if bits >= 32:
        if bits < 128:
            cache = cute.nvgpu.cpasync.LoadCacheMode.ALWAYS     # (.cg copies 16 bytes only)
        atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(cache), src.element_type, num_bits_per_copy=bits)
        cute.copy(atom, src, dst)
    else:
        dst.store(src.load())


@cute.jit
def clear_staged(dst: cute.Tensor, lane, cfg: RowConfig, fill=0.0) -> None:
    """Sets this thread's vectors of `dst` (stage_vectors) that lie past N to `fill`: stage_row
    never writes them, and the math reads them as columns of that value (0 by default)."""
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            if _column(lane, i, cfg) >= cfg.n:
                dst[(None, i)].fill(fill)


@cute.jit
def start_staged_row(t: cute.Tensor, row, lane, row_in_cta, cfg: RowConfig, fill=0.0) -> cute.Tensor:
    """Starts copying this thread's values of row `row` into a new shared-memory stage (one row
    per CTA row, this CTA's `cfg.part` columns) by `.ca` cp.async copies, committed as one group;
    returns the thread's vectors there (stage_vectors), to read after cp_async_wait_group. The
    copies ask no registers while in flight. `.ca`, CuTe DSL's default: softmax over bf16 rows
    staged so (one row per cluster, H200) read 0.96-0.97 of copy where `.cg` read 0.91-0.92
    (ncu: 1.7x the L2 sectors of quack's `.ca` copies for the same DRAM bytes)."""
    smem = cute.SmemAllocator()
    staged = smem.allocate_tensor(t.element_type, cute.make_layout((cfg.part, cfg.rows)), 16)
    vectors = stage_vectors(staged[(None, row_in_cta)], lane, cfg)
    clear_staged(vectors, lane, cfg, fill)
    stage_row(t, row, lane, cfg, vectors, cute.nvgpu.cpasync.LoadCacheMode.ALWAYS)
    cute.arch.cp_async_commit_group()
    return vectors


@cute.jit
def load_row_staged(t: cute.Tensor, row, lane, row_in_cta, cfg: RowConfig, fill=0.0):
    """load_row's values, the row copied into shared memory first (start_staged_row)."""
    vectors = start_staged_row(t, row, lane, row_in_cta, cfg, fill)
    cute.arch.cp_async_wait_group(0)
    return vectors.load().to(cute.Float32)


@cute.jit
def column_mask(lane, cfg: RowConfig):
    """1.0 where this thread's values (as load_row returns them) are columns of the row, 0.0
    past N."""
    mask = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    mask.fill(1.0)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            if _column(lane, i, cfg) >= cfg.n:
                mask[(None, i)].fill(0.0)
    return mask.load()


@cute.jit
def store_row(t: cute.Tensor, row, lane, cfg: RowConfig, values) -> None:
    """Writes this thread's values (a TensorSSA as load_row returns) of row `row`, converted
    to `t`'s type; the caller guards row < M."""
    dst = thread_vectors(t, row, lane, cfg)
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    frag.store(values.to(t.element_type))
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            if _column(lane, i, cfg) < cfg.n:
                dst[(None, i)].store(frag[(None, i)].load())
        else:
            dst[(None, i)].store(frag[(None, i)].load())


@cute.jit
def row_reduce(value, op, cfg: RowConfig, lane, row_in_cta, step=None, peers=None, cluster_wide: bool = True):
    """`value` (one Float32 per thread, or a tuple of them) folded with `op` over the threads of
    each row; every thread of the row gets the result (a tuple for a tuple: several values
    share one trip through shared memory and one barrier). Each call takes its own
    shared-memory slots, so consecutive reductions need no barrier between them. A call inside
    a loop passes `step`, the iteration's count: it alternates two sets of slots, so that an
    iteration's writes cannot overtake a slower warp still reading the previous one's.
    Under a cluster, `peers` is the kernel's cluster_peers() and `step` counts the kernel's
    reductions (0, 1, ... in the order every thread makes them); with `cluster_wide` False
    the fold stops at this CTA's part of the row (no exchange: cluster_send may follow)."""
    combine = cute.arch.fmax if op == "max" else (lambda a, b: a + b)
    values = value if isinstance(value, tuple) else (value,)
    sets = 1 if cute.const_expr(step is None) else 2
    at = 0 if cute.const_expr(step is None) else step % 2
    local = lane if cute.const_expr(cfg.cluster == 1) else lane % cfg.threads_per_row
    width = min(cfg.threads_per_row, 32)
    values = tuple(cute.arch.warp_reduction(v, combine, width) for v in values)
    if cute.const_expr(cfg.threads_per_row > 32):
        warps = cfg.threads_per_row // 32
        partial = cute.arch.alloc_smem(cute.Float32, (cfg.rows, warps, len(values), sets))
        if local % 32 == 0:
            for k in cute.range_constexpr(len(values)):
                partial[(row_in_cta, local // 32, k, at)] = values[k]
        cute.arch.sync_threads()
        values = _fold_slots(partial, row_in_cta, warps, len(values), at, combine)
    if cute.const_expr(cfg.cluster > 1 and cluster_wide):
        cluster_send(values, cfg, lane, row_in_cta, step, peers)
        values = cluster_reduce_received(len(values), op, cfg, row_in_cta, step, peers)
    return values if isinstance(value, tuple) else values[0]


@cute.jit
def row_mean_m2(x, cfg: RowConfig, row_in_cta, step=None, peers=None, cluster_wide: bool = True):
    """(mean, sum of squared deviations) of each row in one trip through shared memory (and
    one exchange over a cluster), where the two-pass form (the mean, then the squares about it)
    takes two: each thread centers its own values on its own mean, and partial results merge
    pairwise by Chan's formula (counts n_a, n_b: M2 = M2_a + M2_b + (mean_b - mean_a)^2 n_a n_b
    / (n_a + n_b)), which keeps the two-pass form's accuracy. Every thread holds the same count
    of the row's values (no padding: the caller checks), so the counts are compile-time
    constants. `step`, `peers` and `cluster_wide` as row_reduce's; under a cluster each CTA
    sends its part's (mean, M2) and merges every part's in rank order (cluster_merge_mean_m2)."""
    width = min(cfg.threads_per_row, 32)
    mean, m2 = warp_mean_m2(x, cfg, width)
    count = cfg.vec * cfg.vectors * width           # per warp
    if cute.const_expr(cfg.threads_per_row > 32):
        warps = cfg.threads_per_row // 32
        sets = 1 if cute.const_expr(step is None) else 2
        at = 0 if cute.const_expr(step is None) else step % 2
        partial = cute.arch.alloc_smem(cute.Float32, (cfg.rows, warps, 2, sets))
        tidx, _, _ = cute.arch.thread_idx()
        if tidx % 32 == 0:
            partial[(row_in_cta, tidx % cfg.threads_per_row // 32, 0, at)] = mean
            partial[(row_in_cta, tidx % cfg.threads_per_row // 32, 1, at)] = m2
        cute.arch.sync_threads()
        mean, m2 = partial[(row_in_cta, 0, 0, at)], partial[(row_in_cta, 0, 1, at)]
        for w in cute.range_constexpr(1, warps):     # warps in order: the same result in every thread
            mean, m2 = merge_mean_m2((mean, m2), (partial[(row_in_cta, w, 0, at)], partial[(row_in_cta, w, 1, at)]),
                                     w * count, count)
    if cute.const_expr(cfg.cluster > 1 and cluster_wide):
        tidx, _, _ = cute.arch.thread_idx()
        cluster_send((mean, m2), cfg, tidx % cfg.threads_per_row, row_in_cta, step, peers)
        mean, m2 = cluster_merge_mean_m2(cfg, row_in_cta, step, peers)
    return mean, m2


@cute.jit
def cluster_merge_mean_m2(cfg: RowConfig, row_in_cta, step, peers):
    """Receives exchange `step`, every CTA's (mean, M2) of its part of the row (row_mean_m2
    with cluster_wide=False, then cluster_send), and merges them in rank order by Chan's
    formula: the row's (mean, M2), the same in every CTA. Every part holds cfg.part columns
    (no padding)."""
    slots, at = cluster_receive(cfg, step, peers)
    mean, m2 = slots[(row_in_cta, 0, 0, at)], slots[(row_in_cta, 0, 1, at)]
    for r in cute.range_constexpr(1, cfg.cluster):
        mean, m2 = merge_mean_m2((mean, m2), (slots[(row_in_cta, r, 0, at)], slots[(row_in_cta, r, 1, at)]),
                                 r * cfg.part, cfg.part)
    return mean, m2


@cute.jit
def warp_mean_m2(x, cfg: RowConfig, width: int = 32):
    """(mean, M2) of the values of `width` lanes (each holding cfg.vec * cfg.vectors values of x,
    none of them padding): each thread's own about its own mean, then merged by a butterfly;
    every lane gets the same result."""
    values = cfg.vec * cfg.vectors
    mean = fold(x, "sum") * (1.0 / values)
    centered = x - mean
    return butterfly_merge((mean, fold(centered * centered, "sum")), merge_mean_m2, values, width)


@cute.jit
def warp_mean_m2_counted(x, cfg: RowConfig, lane, width: int = 32):
    """(mean, M2, count) of the row's values that `width` lanes hold (x read as 0 past N; `lane`
    the thread's lane in the row, its CTA's rank in the cluster included, as thread_place gives
    it): each thread's own over the columns it holds (none:
    (0, 0, 0)), then merged by a butterfly of merge_counted, the lower lane's partial first so
    that both lanes of a pair get the same result."""
    count = cute.Float32(cfg.vec * cfg.vectors)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            count = count - cute.where(_column(lane, i, cfg) < cfg.n, 0.0, float(cfg.vec))
    mean = fold(x, "sum") / cute.arch.fmax(count, 1.0)
    centered = x - mean
    # The squares past N cleared vector by vector (not times column_mask: a walk's loop would
    # hoist that loop-invariant mask, a register a value, and spill).
    squares = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    squares.store(centered * centered)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(cfg.guarded(i)):
            if _column(lane, i, cfg) >= cfg.n:
                squares[(None, i)].fill(0.0)
    partial = (mean, fold(squares.load(), "sum"), count)
    return butterfly_merge(partial, lambda a, b, count_a, count_b: merge_counted(a, b), 0, width, lane)


def merge_counted(a: tuple, b: tuple) -> tuple:
    """Chan's formula over partials (mean, M2, count) whose counts are run-time values (either
    may be 0)."""
    count = a[2] + b[2]
    share = b[2] / cute.arch.fmax(count, 1.0)
    delta = b[0] - a[0]
    return a[0] + delta * share, a[1] + b[1] + delta * delta * a[2] * share, count


def butterfly_merge(partial: tuple, merge, count: int, width: int, lane=None) -> tuple:
    """Each lane's `partial` (a tuple over `count` items) merged with the other `width` - 1
    lanes' of its group by a butterfly: merge(a, b, count_a, count_b), every lane the same
    result where merge is symmetric for equal counts; with `lane` (the thread's lane) the lower
    lane's partial goes first in each pair, so that any merge gives both lanes the same."""
    offset = width // 2
    while offset >= 1:
        other = tuple(cute.arch.shuffle_sync_bfly(v, offset, width=width) for v in partial)
        if lane is not None:
            upper = (lane & offset) != 0
            partial, other = (tuple(cute.where(upper, b, a) for a, b in zip(partial, other)),
                              tuple(cute.where(upper, a, b) for a, b in zip(partial, other)))
        partial = merge(partial, other, count, count)
        count, offset = count * 2, offset // 2
    return partial


def merge_mean_m2(a: tuple, b: tuple, count_a: int, count_b: int) -> tuple:
    """Chan's formula: the (mean, M2) of partials `a` over `count_a` values and `b` over
    `count_b`. Symmetric in a and b where the counts are equal, so that both lanes of a
    butterfly get the same result."""
    delta = b[0] - a[0]
    if count_a == count_b:
        mean = (a[0] + b[0]) * 0.5
    else:
        mean = a[0] + delta * (count_b / (count_a + count_b))
    return mean, a[1] + b[1] + delta * delta * (count_a * count_b / (count_a + count_b))


@cute.jit
def walk_cluster_rows(mX: cute.Tensor, cfg: RowConfig, lane, start, finish, fill=0.0, prologue=None) -> None:
    """The pipelined walk over rows split across a cluster (one row per cluster at a time, each
    cluster every groups-th row), shared by the forwards whose row parts trade statistics once:
    that trip waits for the cluster's slowest CTA, so a CTA starts the next row before it
    receives this row's, and the row after next is already loading into registers.
    `start(x, held, step, context)` takes a row part (Float32, `fill` past N), stores what the output
    needs into `held` and sends exchange `step` (cluster_send; sets=4 in cluster_peers: sends
    run one exchange ahead); what it returns (a Float32, or None) comes back for that row.
    `finish(held, kept, row, step, context)` receives exchange `step` and writes row `row`.
    `prologue()`, if given, runs while the first row loads; what it returns is passed to
    `start` and `finish` as their last argument."""
    group, groups = cta_group(cfg)
    rows = mX.shape[0]
    ahead = cute.make_rmem_tensor((cfg.vec, cfg.vectors), mX.element_type)
    held = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    held_next = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    fetch_row(mX, group, lane, cfg, ahead, fill)
    context = prologue() if prologue is not None else None
    kept = _start_walk_row(mX, group + groups, rows, ahead, held, cfg, lane, start, 0, fill, context)
    k = 0                                           # rows done: their exchanges' steps
    for row in range(group, rows, groups):
        kept_next = kept
        if row + groups < rows:
            kept_next = _start_walk_row(mX, row + 2 * groups, rows, ahead, held_next, cfg, lane, start, k + 1, fill,
                                        context)
        finish(held.load(), kept, row, k, context)
        held.store(held_next.load())
        kept = kept_next
        k = k + 1


@cute.jit
def _start_walk_row(mX, following, rows, ahead, held, cfg: RowConfig, lane, start, step, fill, context):
    """Takes a row part from `ahead`, starts loading row `following` there, and starts it."""
    x = ahead.load().to(cute.Float32)
    fetch_row(mX, clamp_row(following, rows), lane, cfg, ahead, fill)
    return start(x, held, step, context)


@cute.jit
def cluster_send(values: tuple, cfg: RowConfig, lane, row_in_cta, step, peers) -> None:
    """Starts exchange `step`: lane r of each row sends this CTA's values to CTA r, into set
    step % sets of the slots, counted on that set's mbarrier (which this CTA arms for its own
    incoming bytes). A fast CTA cannot overwrite a set a peer still reads. With two sets, each
    exchange received before the next is sent: a CTA needs the peer's next values first, which
    the peer sends after its CTA-wide barrier of the next fold, so after all its threads read
    this set. With four, sends one exchange ahead of receives: a CTA sends exchange j after
    receiving j - 2, which the peer sent after receiving j - 4 (and its next barrier), so set
    j % 4 is free again."""
    _require_cluster_args(cfg, step, peers, len(values))
    at = step % peers.sets
    bar = peers.bars + at
    tidx, _, _ = cute.arch.thread_idx()
    local = lane % cfg.threads_per_row
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(bar, cfg.rows * cfg.cluster * len(values) * 4)
    if local < cfg.cluster:
        rank = cta_rank(cfg)
        for k in cute.range_constexpr(len(values)):
            slot = peers.slots.iterator + peers.slots.layout((row_in_cta, rank, k, at))
            cute.arch.store_shared_remote(values[k], slot, bar, local)


@cute.jit
def cluster_receive(cfg: RowConfig, step, peers):
    """Waits for exchange `step` (cluster_send) from every CTA: (slots, set), CTA r's value k
    of the row at slots[(row_in_cta, r, k, set)]. Each set's barrier completes a phase per use:
    its parity flips every `sets` steps."""
    at = step % peers.sets
    cute.arch.mbarrier_wait(peers.bars + at, (step // peers.sets) % 2)
    return peers.slots, at


@cute.jit
def cluster_reduce_received(count: int, op, cfg: RowConfig, row_in_cta, step, peers) -> tuple:
    """The other half of row_reduce under a cluster when the send ran ahead (row_reduce with
    cluster_wide=False, then cluster_send): receives exchange `step` and folds each of its
    `count` values over the CTAs in rank order (the same result in every CTA)."""
    combine = cute.arch.fmax if op == "max" else (lambda a, b: a + b)
    slots, at = cluster_receive(cfg, step, peers)
    return _fold_slots(slots, row_in_cta, cfg.cluster, count, at, combine)


# -- the one-phase exchange: each warp's values straight to every CTA of the cluster (quack's) ------

# quack's shape over a cluster: CTAs of 256 threads holding up to 64 16-bit values each.
DIRECT_THREADS, DIRECT_VALUES = 256, 64


def direct_config(n: int, vec: int, short: bool = False) -> RowConfig | None:
    """quack's shape for 16-bit rows split over a cluster (the one-phase exchange's): one row per
    cluster of 2 to MAX_CLUSTER CTAs of DIRECT_THREADS threads holding up to DIRECT_VALUES values
    in 16-byte vectors (`vec` 8); None for rows one CTA holds, rows past MAX_CLUSTER CTAs and
    narrower vectors. `short`: also rows one CTA holds past half its values (8192 to 16384
    16-bit columns) that two CTAs holding up to half as many each cover without padding
    (12288, 16384: padded ones were measured both faster and slower, 14000 and 10000)."""
    per_cta = DIRECT_THREADS * DIRECT_VALUES
    if vec != 8 or not (per_cta // 2 if short else per_cta) < n <= per_cta * MAX_CLUSTER:
        return None
    cfg = direct_cluster_config(n, vec, DIRECT_VALUES, 2)
    return None if n <= per_cta and cfg.padding else cfg


def direct_cluster_config(n: int, vec: int, values: int, fewest: int) -> RowConfig:
    """One row of `n` per cluster of DIRECT_THREADS-thread CTAs holding up to `values` values each:
    the fewest CTAs, a power of two from `fewest`, that cover the row (quack's shapes, 16-bit
    and Float32)."""
    cluster = fewest
    while cluster * DIRECT_THREADS * values < n:
        cluster *= 2
    return RowConfig(n, vec, DIRECT_THREADS, DIRECT_THREADS, cluster)


def _require_direct(cfg: RowConfig) -> None:
    """The one-phase exchange takes one row of whole warps per CTA over a cluster of up to 32, a
    power of two of entries in all (direct_fold's lanes each merge every 32nd entry, the same
    number each: 7 CTAs of 8 warps would leave entries 32-55 out of the row's sums)."""
    if cfg.cluster == 1 or cfg.cluster > 32 or cfg.rows != 1 or cfg.threads_per_row % 32:
        raise ValueError(f"the one-phase exchange takes a row over a cluster, one row per CTA; got {cfg}")
    entries = direct_entries(cfg)
    if entries & (entries - 1):
        raise ValueError(f"the one-phase exchange folds a power of two of warps over the cluster; got {cfg.cluster} "
                         f"CTAs of {cfg.threads_per_row // 32} warps ({cfg})")


def direct_entries(cfg: RowConfig) -> int:
    """Entries of the one-phase exchange: one per warp of each CTA of the cluster (a power of two:
    _require_direct)."""
    return cfg.threads_per_row // 32 * cfg.cluster


@cute.jit
def open_direct(cfg: RowConfig, values: int):
    """direct_exchange's buffers: (slots of `values` Float32 per entry, their mbarrier), the
    barrier initialized and this CTA's arrival at the cluster barrier made (a kernel calls it
    first; direct_exchange waits for the cluster, so that wait runs under the row's loads)."""
    _require_direct(cfg)
    slots = cute.arch.alloc_smem(cute.Float32, (direct_entries(cfg) * values,))
    bar = cute.arch.alloc_smem(cute.Int64, (1,), alignment=8).iterator
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        cute.arch.mbarrier_init(bar, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive_relaxed()
    return slots, bar


@cute.jit
def direct_exchange(values: tuple, cfg: RowConfig, slots, bar) -> None:
    """Sends this warp's `values` (the same in every lane) to every CTA of the cluster and waits
    for every warp's of every CTA: value k of entry e (CTA rank * warps + warp) lands at
    slots[e + k * entries] (open_direct's slots, used once). Without a CTA-wide fold first, where
    row_reduce folds the CTA's warps in shared memory (a barrier) before its exchange."""
    warps = cfg.threads_per_row // 32
    entries = direct_entries(cfg)
    cute.arch.cluster_wait()                        # every peer's barrier is initialized
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(bar, entries * len(values) * 4)
    lane = cute.arch.lane_idx()
    if lane < cfg.cluster:
        entry = cta_rank(cfg) * warps + tidx // 32
        for k in cute.range_constexpr(len(values)):
            cute.arch.store_shared_remote(values[k], slots.iterator + (entry + k * entries), bar, lane)
    cute.arch.mbarrier_wait(bar, 0)


@cute.jit
def direct_fold(cfg: RowConfig, slots, values: int, merge, ordered: bool = False) -> tuple:
    """The row's `values` values from the entries direct_exchange left in `slots`: lane l of
    each warp merges entries l, l + 32, ... in order (entry l mod the entries where fewer than
    32), then a butterfly merges the lanes'. `merge(a, b, count_a, count_b)` merges tuples a and
    b of partials over count_a and count_b entries; every thread gets the same result where it
    is symmetric for equal counts, or any merge where `ordered` (butterfly_merge's lane order)."""
    entries = direct_entries(cfg)
    width = min(entries, 32)
    at = cute.arch.lane_idx() % width
    partial = tuple(slots[at + k * entries] for k in range(values))
    for i in cute.range_constexpr(1, entries // width):
        partial = merge(partial, tuple(slots[at + i * 32 + k * entries] for k in range(values)), i, 1)
    if cute.const_expr(ordered):
        return butterfly_merge(partial, merge, entries // width, width, at)
    return butterfly_merge(partial, merge, entries // width, width)


def _require_cluster_args(cfg: RowConfig, step, peers, values: int) -> None:
    if peers is None or step is None:
        raise ValueError("row_reduce under a cluster needs the kernel's cluster_peers(cfg) and its reduction step")
    if values > MAX_VALUES_PER_REDUCTION or cfg.threads_per_row <= 32:
        # (the CTA-wide barrier of a row of several warps is what orders the slot sets)
        raise ValueError(f"cluster reductions take up to {MAX_VALUES_PER_REDUCTION} values and rows of several warps")


def _fold_slots(slots: cute.Tensor, row_in_cta, count: int, values: int, at, combine) -> tuple:
    """Each of `values` values folded over slots 0 .. count-1 of the row, in order."""
    folded = []
    for k in cute.range_constexpr(values):
        total = slots[(row_in_cta, 0, k, at)]
        for w in cute.range_constexpr(1, count):
            total = combine(total, slots[(row_in_cta, w, k, at)])
        folded.append(total)
    return tuple(folded)


def fold(values, op):
    """A thread's TensorSSA folded to one Float32 (a tree: short dependency chains)."""
    if op == "max":
        return values.reduce(cute.ReductionOp.MAX)
    return values.reduce(cute.ReductionOp.ADD)


def fold_products(a, b, chains: int = 4):
    """sum(a * b) over a thread's TensorSSAs: every product an fma into one of `chains`
    accumulators (a tree of products and sums takes a mul and an add per element; short
    chains keep the dependency latency down), the chains then added."""
    xs, ys = a.elements(), b.elements()
    sums = [xs[i] * ys[i] for i in range(min(chains, len(xs)))]
    for i in range(len(sums), len(xs)):
        sums[i % chains] = cute.math.fma(xs[i], ys[i], sums[i % chains])
    while len(sums) > 1:
        sums = [sums[i] + sums[i + 1] if i + 1 < len(sums) else sums[i] for i in range(0, len(sums), 2)]
    return sums[0]


_RESIDENT: dict = {}


def persistent_groups(m: int, cfg: RowConfig, resident: int) -> int:
    """A persistent grid, in groups of cfg.cluster CTAs: as many as run at once (`resident`:
    resident_groups), at most one per block of rows; each group walks every groups-th block.
    csrc/torch/RowOps.cpp computes the same (persistentGroups)."""
    return max(1, min(-(-m // cfg.rows), resident))


def walking_groups(host, args: tuple, constexprs: tuple, m: int, cfg: RowConfig, device: int) -> int:
    """persistent_groups for a walk of `host` (a @cute.jit taking `*args, groups, *constexprs`)
    over m rows: its kernel, compiled with groups 1 (a memory-cache hit after the first call),
    asked how many groups run at once."""
    compiled = host.compile(*args, 1, *constexprs)
    return persistent_groups(m, cfg, resident_groups(compiled, cfg, device))


def unless_it_spills(compile_for, cfg: RowConfig, wider: RowConfig | None, gains: bool = False) -> RowConfig:
    """`cfg` (a portable cluster of MAX_CLUSTER holding more values a thread than its kernel asked),
    or `wider` (NON_PORTABLE_CLUSTER CTAs holding fewer) where ptxas spills `cfg`'s kernel, or
    where the caller knows it `gains` otherwise, and `wider`'s padding is at most a quarter of the
    row; `compile_for(c)` compiles the kernel for a shape (a memory-cache hit after the first
    call). Fraction of copy, 8 -> 16, H200 / H100:
    - spilled: log_softmax forward bf16 262144 0.70 / 0.73 -> 0.83 / 0.96 (92 bytes), Float32
      200000 0.69 / 0.72 -> 0.87 / 0.99 (204), 262144 0.55 / 0.58 -> 0.93 / 1.00 (380); LayerNorm
      forward bf16 262144 0.30 / 0.31 -> 0.84 / 0.95 (456); softmax backward Float32 262144 0.76 /
      0.85 -> 0.92 / 0.99 (228), bf16 262144 0.83 / 0.94 -> 0.98 / 0.90 (96).
    - not spilled, 16 lost: LayerNorm forward bf16 200000 0.74 -> 0.42 (H200), softmax backward
      Float32 200000 1.00 -> 0.85 (H200).
    - spilled, 16 CTAs' padding 31 % of a bf16 row of 200000: log_softmax forward 0.73 / 0.82 ->
      0.53 / 0.67 (64 bytes); softmax backward 0.77 / 0.91 -> 0.97 / 0.77 (28). Both keep 8."""
    if wider is None or 4 * wider.padding > wider.n:
        return cfg
    if gains:
        return wider
    return wider if spills(lambda: compile_for(cfg)) else cfg


def spills(compile_it, accepted: int = 0) -> bool:
    """Whether ptxas spills a kernel of `compile_it()` (a compiled function) more than `accepted`
    bytes a thread, whose SpillWarning is not shown: the caller launches another shape then."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cute.SpillWarning)
        return any((k.get("spill_stores") or 0) > accepted for k in compile_it().kernels)


def resident_groups(compiled, cfg: RowConfig, device: int, smem: int = 0) -> int:
    """Groups of the first kernel of `compiled` (cfg.cluster CTAs each, `smem` bytes of dynamic
    shared memory) that run at once on `device` (its GPCs may leave SMs over that a cluster
    cannot span: fewer than SMs / cluster size), asked of the driver once per kernel shape."""
    kernel = compiled.kernels[0]
    key = (cfg.threads, cfg.cluster, kernel.get("registers"), kernel.get("static_smem"), smem, device)
    if key not in _RESIDENT:
        _RESIDENT[key] = compiled.max_active_clusters(smem, device)
    return _RESIDENT[key]


# Peak DRAM bytes per second per SM above which memory outruns what a CTA's one row in flight
# keeps busy between its rows (fast_memory): an H100 SXM feeds 25 GB/s per SM, an H200 37.
FAST_MEMORY_PER_SM = 30e9
_FAST_MEMORY: dict = {}


def fast_memory(device: int | None) -> bool:
    """Whether `device`'s memory feeds each SM faster than FAST_MEMORY_PER_SM (peak bandwidth:
    2 transfers a clock of the memory bus, over the SMs). Kernels whose CTAs hold one row at a
    time leave that memory idle while a row's reductions and exchanges run, so on such a card
    they walk rows with the next one loading (softmax.forward_walk and backward_walk,
    norm_shapes.FAST_MEMORY_WALKS), and several measured shapes follow it too
    (norm_shapes.backward_config, unwalked_ctas, cross_entropy.forward_shape). False without a
    GPU, and for no device (None, or negative: what compile-only descriptions take)."""
    if device in _FAST_MEMORY:                      # (asked on every call of the Python entries)
        return _FAST_MEMORY[device]
    if device is None or device < 0 or not torch.cuda.is_available():
        return False
    p = torch.cuda.get_device_properties(device)
    clock_khz, bus_bits = getattr(p, "memory_clock_rate", 0), getattr(p, "memory_bus_width", 0)
    _FAST_MEMORY[device] = 2 * clock_khz * 1e3 * bus_bits / 8 / p.multi_processor_count > FAST_MEMORY_PER_SM
    return _FAST_MEMORY[device]


def launch_grid(rows, cfg: RowConfig, blocks_per_group: int = 1):
    """One group of CTAs (one cluster) per `blocks_per_group` blocks of `cfg.rows` rows."""
    blocks = (rows + cfg.rows - 1) // cfg.rows
    return ((blocks + blocks_per_group - 1) // blocks_per_group * cfg.cluster, 1, 1)


def launch_cluster(cfg: RowConfig):
    """The launch's cluster shape (None without one)."""
    return None if cfg.cluster == 1 else (cfg.cluster, 1, 1)
