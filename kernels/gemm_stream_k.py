"""Stream-K for the persistent GEMM: the tiles that would make a partial last wave, shared among
all CTAs by k-tiles, so that every CTA ends at about the same time.

A persistent grid of G CTAs over T output tiles runs ceil(T / G) waves; where T is not a
multiple of G the last wave leaves SMs idle (512 tiles of 128 x 256 at 4096^3 on 132 SMs: 3.88
waves of work in 4 waves of time). Here the tiles of that partial wave (with the wave before it
where it is less than half a wave: stream_k_tiles) are laid end to end as k-tiles and cut into G
equal ranges, one per CTA, which runs its range after its whole tiles (Walk). A tile cut between
ranges is finished by the CTA that holds its last k-tiles: it adds the partial accumulators the
others left in a workspace (publish_partial, gather_partials), then runs the epilogue.

The order matters as much as the balance. A first version ran each range from its first k-tile
(the tail of one tile, then the head of the next) and was 13-29 % slower than no stream-K on an
H100 (2048 x 8192 x 8192: 0.725 of cuBLAS against 0.994): the CTAs ran at k-tiles scattered over
the whole of K, so that no two shared an operand tile in L2, and the shared phase ran from DRAM.
Each range now runs its pieces last one first: the head of a tile (from k-tile 0), then any whole
tiles, then the tail of the previous tile. All CTAs start the shared phase at k-tile 0 and move
in step; the tails run K - (a range's length) k-tiles ahead, so the CTAs are in two cohorts a
fixed distance apart, as near in K as the balance allows.

    walk = Walk(tiles, k_tiles, first, step, first, step, stream_k=True)
    for u in range(*walk.units()):
        tile_id, k0, k1 = walk.unit(u)          # the k-tiles [k0, k1) of tile tile_id
"""

from __future__ import annotations

import torch

import cute_torch as cute
from cute_torch import Constexpr


def stream_k_tiles(tiles, ctas):
    """The tiles stream-K shares among all CTAs: the last partial wave's (tiles % ctas), with the
    wave before it where that is less than half a wave (each CTA then runs 1 to 1.5 tiles' worth
    of k-tiles, not slivers); none when the tiles fill their waves."""
    rest = tiles % ctas
    wider = cute.where(tiles >= rest + ctas, rest + ctas, rest)
    return cute.where(rest == 0, 0, cute.where(rest * 2 < ctas, wider, rest))


class Walk:
    """The work units one CTA (or one ping-pong warpgroup) walks: whole tiles `start`, `start +
    stride`, ... below `tiles`, and with stream-K, after them, its range of the shared k-tiles,
    its pieces last one first.

    CTA b takes the b-th range, so that a tile's last k-tiles go to the CTA of the highest index
    among those sharing it. That CTA, the tile's finisher, runs them last of its range and waits
    for the others' partials: CTAs of lower indices, which start no later and publish their
    partial first, before any wait (only a range's last piece can end inside a tile: each CTA
    publishes at most one partial)."""

    def __init__(self, tiles, k_tiles, start, stride, first, ctas, stream_k: bool):
        self.tiles, self.k_tiles, self.start, self.stride, self.stream_k = tiles, k_tiles, start, stride, stream_k
        if stream_k:
            self.whole = tiles - stream_k_tiles(tiles, ctas)     # tiles run whole, as without stream-K
            self.count = (self.whole - start + stride - 1) // stride
            self.ctas, self.total = ctas, (tiles - self.whole) * k_tiles      # the shared k-tiles
            self.rank = first                             # this CTA's range: the rank-th
            self.f0, self.f1 = self.begin(self.rank), self.begin(self.rank + 1)
            self.ranges = cute.where(self.f1 > self.f0, (self.f1 - 1) // k_tiles - self.f0 // k_tiles + 1, 0)

    def begin(self, rank):
        """The first shared k-tile of the rank-th range (k-tiles of the shared tiles end to end)."""
        return rank * self.total // self.ctas

    def units(self) -> tuple:
        """The range of the walk's loop: its units by index, or without stream-K its tiles."""
        return (0, self.count + self.ranges, 1) if cute.const_expr(self.stream_k) else \
            (self.start, self.tiles, self.stride)

    def unit(self, i):
        """(tile_id, k0, k1) of the loop's i: the unit's tile and its k-tiles [k0, k1)."""
        if cute.const_expr(not self.stream_k):
            return i, 0, self.k_tiles
        whole = i < self.count
        t = self.f0 // self.k_tiles + (self.count + self.ranges - 1 - i)   # a piece's tile, last piece first
        k0 = cute.math.max(self.f0 - t * self.k_tiles, 0)
        k1 = cute.math.min(self.f1 - t * self.k_tiles, self.k_tiles)
        return (cute.where(whole, self.start + i * self.stride, self.whole + t), cute.where(whole, 0, k0),
                cute.where(whole, self.k_tiles, k1))


def _slot(partials, values: int, cta, thread, threads: int):
    """The values of thread `thread` (of the `threads` holding a tile's accumulators) in CTA
    cta's workspace slot: value v at v * threads (a warp's access to one value is 128 contiguous
    bytes). One pointer and constant offsets: the addresses of a slot indexed whole would be
    loop-invariant, and LLVM would hoist all of them out of the walk's loop (128 registers and
    808 bytes of spills)."""
    at = partials.iterator + (cta * values * threads + thread)
    return cute.make_tensor(at, cute.make_layout(values, stride=threads))


@cute.jit
def publish_partial(acc, shared, cta, thread, threads: Constexpr, barrier_id: Constexpr):
    """A piece that ends inside its tile: its accumulators into CTA `cta`'s workspace slot,
    then, once the `threads` holding them have stored (named barrier `barrier_id`), the CTA's
    flag raised (release: a GPU-scope fence before the atomic)."""
    partials, flags = shared
    slot = _slot(partials, cute.size(acc), cta, thread, threads)
    for v in cute.range_constexpr(cute.size(acc)):
        slot[v] = acc[v]
    cute.arch.barrier(barrier_id=barrier_id, number_of_threads=threads)
    if thread == 0:
        cute.arch.fence_acq_rel_gpu()
        cute.arch.atomic_add(flags, cta, 1)


@cute.jit
def gather_partials(acc, shared, walk, tile_id, thread, threads: Constexpr, barrier_id: Constexpr):
    """A finisher's accumulators plus the partials of its tile's other pieces: the ranks before
    this CTA's that end after the tile's start. The first thread waits for each flag (acquire:
    a GPU-scope fence after it) and lowers it again, so that a launch leaves the flags as it
    found them; a barrier then lets every thread read the partials."""
    partials, flags = shared
    start = (tile_id - walk.whole) * walk.k_tiles
    if thread == 0:
        rank = walk.rank - 1
        while rank >= 0 and walk.begin(rank + 1) > start:
            if walk.begin(rank + 1) > walk.begin(rank):  # (an empty range publishes nothing)
                while cute.arch.atomic_add(flags, rank, 0) == 0:
                    pass
                cute.arch.fence_acq_rel_gpu()
                cute.arch.atomic_add(flags, rank, -1)
            rank = rank - 1
    cute.arch.barrier(barrier_id=barrier_id, number_of_threads=threads)
    rank = walk.rank - 1
    while rank >= 0 and walk.begin(rank + 1) > start:
        if walk.begin(rank + 1) > walk.begin(rank):
            slot = _slot(partials, cute.size(acc), rank, thread, threads)
            for v in cute.range_constexpr(cute.size(acc)):
                acc[v] = acc[v] + slot[v]
        rank = rank - 1


def workspace(device, ctas: int, tile_elements: int) -> tuple:
    """Stream-K's partial accumulators (a Float32 slot of one tile's elements per CTA) and flags
    (one Int32 per CTA, zeros). Every finisher lowers the flags it waited on, so a launch leaves
    them as it found them; each call takes fresh ones all the same (the caching allocator's, in
    stream order), so that a launch that failed midway leaves nothing behind."""
    return (torch.empty(ctas * tile_elements, device=device, dtype=torch.float32),
            torch.zeros(ctas, device=device, dtype=torch.int32))
