"""Copy-bound kernels written the CuTe way: tiles from zipped_divide, a thread-value layout
(make_layout_tv) that gives each thread 16 contiguous bytes per access, TensorSSA load/store,
and for the transpose a swizzled shared-memory tile so both its row writes and its column
reads avoid bank conflicts.

Each kernel runs whole tiles through the vectorized path and tiles cut by the tensor's edge
through a per-element guarded one.
"""

from __future__ import annotations

import torch

import cute_torch as cute
from cute_torch import Constexpr

TRANSPOSE_TILE = 64


def _vector_elements(dtype: torch.dtype) -> int:
    """Elements in one 16-byte access."""
    return 16 // torch.empty((), dtype=dtype).element_size()


# -- elementwise add -------------------------------------------------------------------------------

@cute.kernel
def _add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, shape: Constexpr, tiler: Constexpr,
                tv_layout: Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    block = ((None, None), bidx)
    # This thread's values of this block's tile: (thread, value) -> element.
    thrA = cute.composition(gA[block], tv_layout)[(tidx, None)]
    thrB = cute.composition(gB[block], tv_layout)[(tidx, None)]
    thrC = cute.composition(gC[block], tv_layout)[(tidx, None)]
    tiles_m = cute.size(gC, mode=[1, 0])
    m0 = (bidx % tiles_m) * tiler[0]
    n0 = (bidx // tiles_m) * tiler[1]
    if m0 + tiler[0] <= shape[0] and n0 + tiler[1] <= shape[1]:
        thrC.store(thrA.load() + thrB.load())
    else:
        for v in cute.range_constexpr(cute.size(tv_layout, mode=[1])):
            r, c = cute.idx2crd(tv_layout((tidx, v)), tiler)
            if m0 + r < shape[0] and n0 + c < shape[1]:
                thrC[v] = thrA[v] + thrB[v]


@cute.jit
def _add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, tiler: Constexpr, tv_layout: Constexpr):
    gA = cute.zipped_divide(a, tiler)
    gB = cute.zipped_divide(b, tiler)
    gC = cute.zipped_divide(c, tiler)
    _add_kernel(gA, gB, gC, c.shape, tiler, tv_layout).launch(
        grid=(cute.size(gC, mode=[1]), 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1))


_ADD_LAYOUTS: dict = {}


def _add_layouts(dtype: torch.dtype):
    """128 threads as 4 rows of 32; each thread 4 rows of one 16-byte vector."""
    found = _ADD_LAYOUTS.get(dtype)
    if found is None:
        vec = _vector_elements(dtype)
        thr = cute.make_layout((4, 32), stride=(32, 1))
        val = cute.make_layout((4, vec), stride=(vec, 1))
        found = _ADD_LAYOUTS[dtype] = cute.make_layout_tv(thr, val)
    return found


def elementwise_add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a + b for same-shape, same-dtype CUDA tensors (viewed as 2-D: rows x last dim)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"elementwise_add: shapes {tuple(a.shape)} / {tuple(b.shape)} and dtypes {a.dtype} / "
                         f"{b.dtype} must match")
    out = torch.empty_like(a) if out is None else out
    tiler, tv = _add_layouts(a.dtype)
    view = (lambda t: t.reshape(-1, t.shape[-1])) if a.dim() != 2 else (lambda t: t)
    _add(view(a), view(b), view(out), tiler, tv)
    return out


# -- transpose ------------------------------------------------------------------------------------------

@cute.kernel
def _transpose_kernel(gIn: cute.Tensor, gOut: cute.Tensor, shape: Constexpr, tiler: Constexpr,
                      tv_layout: Constexpr, smem_layout: Constexpr):
    T = TRANSPOSE_TILE
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tiles_m = cute.size(gIn, mode=[1, 0])
    bm = bidx % tiles_m
    bn = bidx // tiles_m
    tile_in = gIn[((None, None), (bm, bn))]
    tile_out = gOut[((None, None), (bn, bm))]
    if (bm + 1) * T <= shape[0] and (bn + 1) * T <= shape[1]:
        smem = cute.arch.alloc_smem(gIn.element_type, smem_layout, alignment=128)
        # The same shared tile read transposed: (i, j) -> smem(j, i).
        smem_t = cute.composition(smem, cute.make_layout((T, T), stride=(T, 1)))
        parts = cute.size(cute.zipped_divide(tile_in, tiler), mode=[1])

        def thread_part(tensor, i):
            return cute.composition(cute.zipped_divide(tensor, tiler)[((None, None), i)], tv_layout)[(tidx, None)]

        # All of a thread's global loads are issued before its first shared store, so they are in
        # flight together whatever the instruction scheduler does.
        values = [thread_part(tile_in, i).load() for i in cute.range_constexpr(parts)]
        for i in cute.range_constexpr(parts):
            thread_part(smem, i).store(values[i])
        cute.arch.sync_threads()
        for i in cute.range_constexpr(parts):
            cute.copy(thread_part(smem_t, i), thread_part(tile_out, i))
    else:
        threads = cute.size(tv_layout, mode=[0])
        for v in cute.range_constexpr(T * T // threads):
            k = tidx + v * threads
            r = k % T
            c = k // T
            if bm * T + r < shape[0] and bn * T + c < shape[1]:
                tile_out[(c, r)] = tile_in[(r, c)]


@cute.jit
def _transpose(src: cute.Tensor, dst: cute.Tensor, tiler: Constexpr, tv_layout: Constexpr, smem_layout: Constexpr):
    T = TRANSPOSE_TILE
    gIn = cute.zipped_divide(src, (T, T))
    gOut = cute.zipped_divide(dst, (T, T))
    _transpose_kernel(gIn, gOut, src.shape, tiler, tv_layout, smem_layout).launch(
        grid=(cute.size(gIn, mode=[1]), 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1))


_TRANSPOSE_LAYOUTS: dict = {}


def _transpose_layouts(dtype: torch.dtype):
    """256 threads as 32 rows of 8, each thread one 16-byte vector of a row per part, so every
    warp-wide global access covers whole 128-byte lines (a thread owning two adjacent vectors
    would make each of its two instructions touch every 32-byte sector half). The shared tile is
    row-major under Swizzle<3, log2(vec), log2(T)>: reading the tile transposed, a warp's 8
    threads of one output row read input rows `vec` apart, which the swizzle sends to 8
    different 16-byte bank groups; the 16-byte row vectors stay whole."""
    found = _TRANSPOSE_LAYOUTS.get(dtype)
    if found is None:
        T = TRANSPOSE_TILE
        vec = _vector_elements(dtype)
        thr = cute.make_layout((32, 8), stride=(8, 1))
        val = cute.make_layout((1, vec), stride=(vec, 1))
        tiler, tv = cute.make_layout_tv(thr, val)
        smem = cute.make_composed_layout(cute.make_swizzle(3, 4, T.bit_length() - 1), 0,
                                         cute.make_layout((T, T), stride=(T, 1)))
        found = _TRANSPOSE_LAYOUTS[dtype] = (tiler, tv, smem)
    return found


def transpose(src: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """src.T materialized (a new row-major tensor) for a 2-D CUDA tensor."""
    if src.dim() != 2:
        raise ValueError(f"transpose takes a 2-D tensor, got {src.dim()}-D")
    out = torch.empty((src.shape[1], src.shape[0]), dtype=src.dtype, device=src.device) if out is None else out
    _transpose(src, out, *_transpose_layouts(src.dtype))
    return out
