"""Column sums: out[j] = sum over the rows i of x[i, j], for x (M, N) with N contiguous. A
linear's bias gradient is one (the output gradient summed over the tokens), and the norms'
dweight and dbias end with one (their partial rows, kernels/norms.py).

Two launches, deterministic (a fixed order of additions, no atomics):

1. The rows are cut into `groups` slabs. A CTA takes one slab and one tile of 32 vectors of
   columns (16 bytes each: 8 16-bit values, 4 Float32; single elements where N, the row stride or
   the address forbid 16 bytes): its SUM_WARPS warps take every
   SUM_WARPS-th row of the slab, each lane one vector, summed in Float32 registers (the loop is
   unrolled 4 times: 4 loads in flight per thread); the warps' sums are folded through shared
   memory in warp order into one Float32 partial row per slab.
2. The `groups` partial rows are summed the same way into the output, in its dtype.

The first grid is as many CTAs as run at once (the compiled kernel's occupancy), so every SM
streams; slabs have at least MIN_SLAB_ROWS rows. At a transformer's linears (8192 x 2048 to
8192 x 8192) the partial rows are about 1 MB, a few percent of x's bytes.
"""

from __future__ import annotations

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_reduce import dynamic_rows

SUM_WARPS = 8          # warps per CTA
MIN_SLAB_ROWS = 32     # rows per slab at least (4 per warp)


def _tiles(n: int, vec: int) -> int:
    return -(-n // (32 * vec))


@cute.jit
def sum_rows(src, out, first, end, tile, vec: Constexpr):
    """Rows [first, end) of `src` summed over this CTA's tile of columns (`tile`: 32 vectors of
    `vec` columns) into `out` (a row of N values, written in its dtype by warp 0)."""
    tidx, _, _ = cute.arch.thread_idx()
    lane, warp = tidx % 32, tidx // 32
    n = out.shape[0]
    columns = cute.make_layout((vec, 32, _tiles(n, vec)), stride=(1, vec, 32 * vec))
    inside = (tile * 32 + lane) * vec < n               # N is a multiple of vec: whole vectors
    total = cute.make_rmem_tensor((vec,), cute.Float32)
    total.fill(0.0)
    if inside:
        for r in cute.range(first + warp, end, SUM_WARPS, unroll=4):
            total.store(total.load() + cute.composition(src[(r, None)], columns)[(None, lane, tile)].load().to(
                cute.Float32))
    folded = cute.arch.alloc_smem(cute.Float32, (vec, 32, SUM_WARPS))
    folded[(None, lane, warp)].store(total.load())
    cute.arch.sync_threads()
    if warp == 0:
        if inside:
            for w in cute.range_constexpr(1, SUM_WARPS):
                total.store(total.load() + folded[(None, lane, w)].load())
            cute.composition(out, columns)[(None, lane, tile)].store(total.load().to(out.element_type))


@cute.kernel
def _slab_kernel(mX, mPartial, groups: cute.Int32, vec: Constexpr):
    """Partial row g: the sum of slab g's rows."""
    tile, g, _ = cute.arch.block_idx()
    m = mX.shape[0]
    rows = (m + groups - 1) // groups
    first = g * rows
    sum_rows(mX, mPartial[(g, None)], first, cute.math.min(m, first + rows), tile, vec)


@cute.kernel
def sum_partials_kernel(mPartialA, mPartialB, mA, mB, groups: cute.Int32, vec: Constexpr):
    """mA and mB (either may be None): the `groups` partial rows of mPartialA and mPartialB
    summed, in the outputs' dtypes (the norms' dweight and dbias take both at once)."""
    tile, _, _ = cute.arch.block_idx()
    if cute.const_expr(mPartialA is not None):
        sum_rows(mPartialA, mA, 0, groups, tile, vec)
    if cute.const_expr(mPartialB is not None):
        sum_rows(mPartialB, mB, 0, groups, tile, vec)


def partial_vec(n: int) -> int:
    """The vector width of the second launch (Float32 rows of N: 16 bytes where N allows)."""
    return 4 if n % 4 == 0 else 1


@cute.jit
def launch_sum_partials(partial_a, partial_b, a, b, groups: cute.Int32):
    """The second launch: a and b (either None) from their partial rows."""
    n = a.shape[0] if cute.const_expr(a is not None) else b.shape[0]
    vec = partial_vec(n)
    sum_partials_kernel(partial_a, partial_b, a, b, groups, vec).launch(
        grid=(_tiles(n, vec), 1, 1), block=(32 * SUM_WARPS, 1, 1))


@cute.jit
def _column_sum(x, partial, out, groups: cute.Int32, vec: Constexpr):
    _slab_kernel(x, partial, groups, vec).launch(grid=(_tiles(out.shape[0], vec), groups, 1),
                                                 block=(32 * SUM_WARPS, 1, 1))
    launch_sum_partials(partial, None, out, None, groups)


def vector_width(n: int, row_stride: int, address: int, element_size: int) -> int:
    """16-byte vectors where N, the row stride and the address allow, else single elements."""
    vec = 16 // element_size
    return vec if n % vec == 0 and row_stride % vec == 0 and address % 16 == 0 else 1


def slab_groups(m: int, resident: int) -> int:
    """Slabs of rows: one per CTA that runs at once (`resident`, per tile of columns), each of
    at least MIN_SLAB_ROWS rows. csrc/torch/RowOps.cpp computes the same."""
    return max(1, min(resident, -(-m // MIN_SLAB_ROWS)))


def resident_slabs(compiled, n: int, vec: int, device: int) -> int:
    """Slabs that run at once: the first launch's resident CTAs over its tiles of columns."""
    return max(1, compiled.max_active_clusters(0, device) // _tiles(n, vec))


_RESIDENT: dict = {}


def column_sum(x: torch.Tensor) -> torch.Tensor:
    """x summed over every dim but the last, in Float32, returned in x's dtype (torch.sum's)."""
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16) or x.dim() == 0:
        raise ValueError(f"column_sum takes float32, bfloat16 or float16 tensors of at least one dimension, got "
                         f"{x.dtype} of shape {tuple(x.shape)}")
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    x2 = x2 if x2.stride(-1) == 1 or n == 1 else x2.contiguous()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    m = x2.shape[0]
    if m == 0 or n == 0:
        return out.zero_()
    vec = vector_width(n, x2.stride(0), x2.data_ptr(), x2.element_size())
    key = (n, x2.stride(0), vec, x.dtype, x.device.index)
    if key not in _RESIDENT:
        one = torch.empty(1, n, dtype=torch.float32, device=x.device)
        compiled = _column_sum.compile(dynamic_rows(x2), dynamic_rows(one), out, 1, vec)
        _RESIDENT[key] = resident_slabs(compiled, n, vec, x.device.index)
    groups = slab_groups(m, _RESIDENT[key])
    partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    _column_sum(dynamic_rows(x2), dynamic_rows(partial), out, groups, vec)
    return out
