"""Rows longer than one CTA's registers hold (a 128K vocabulary), read in chunks of CHUNK columns
by the same threads (kernels/row_reduce.py's layout within a chunk: a thread's 16-byte vectors
`threads_per_row` apart). Cross-entropy reads its logits this way, and softmax takes this path
for rows over row_reduce.MAX_N.

The log-sum-exp of such a row takes one pass: each thread keeps a running max m and a running
sum s of exp(x - m) over the values it has seen, rescaling s when m grows; after the last chunk
one max and one sum over the row's threads give lse = M + log(sum of s * exp(m - M)).
"""

from __future__ import annotations

import math

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_reduce import RowConfig, row_config, row_reduce

LOG2_E = math.log2(math.e)
CHUNK = 8192


def chunk_config(*tensors: torch.Tensor) -> tuple[RowConfig, bool]:
    """The chunk's configuration, and whether chunks tile the row exactly (no guards). Its
    vector divides the row length (the last vector of a row may not run past it) and suits
    every tensor's rows and address."""
    n = tensors[0].shape[1]
    size = max(t.element_size() for t in tensors)
    cfg = row_config(min(n, CHUNK), size, n)               # n as a "stride": the vector divides it
    for t in tensors:
        c = row_config(min(n, CHUNK), size, t.stride(0) if t.shape[0] > 1 else 0, t.data_ptr())
        cfg = c if c.vec < cfg.vec else cfg
    exact = n % cfg.n == 0 and cfg.padding == 0
    return cfg, exact


def chunks(t: cute.Tensor, cfg: RowConfig) -> int:
    return (t.shape[1] + cfg.n - 1) // cfg.n


def _chunk_vectors(t: cute.Tensor, row, lane, chunk, cfg: RowConfig):
    """This thread's (vec, vectors) elements of chunk `chunk` of row `row` (chunks cfg.n wide)."""
    split = cute.make_layout((cfg.vec, cfg.threads_per_row, cfg.vectors, chunks(t, cfg)),
                             stride=(1, cfg.vec, cfg.vec * cfg.threads_per_row, cfg.n))
    return cute.composition(t[(row, None)], split)[(None, lane, None, chunk)]


def _column(i, lane, chunk, cfg: RowConfig):
    return chunk * cfg.n + (i * cfg.threads_per_row + lane) * cfg.vec


@cute.jit
def load_chunk(t: cute.Tensor, row, lane, chunk, cfg: Constexpr, exact: Constexpr, fill, with_sum: Constexpr = False):
    """This thread's values of chunk `chunk` of row `row` as Float32; columns past the row's
    end read as `fill`. With `with_sum`, also the sum of the values inside the row (the fill
    left out, so that a row's own -inf logits still count)."""
    src = _chunk_vectors(t, row, lane, chunk, cfg)
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    total = cute.Float32(0.0)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(exact):
            frag[(None, i)].store(src[(None, i)].load())
            if cute.const_expr(with_sum):
                total = total + frag[(None, i)].load().to(cute.Float32).reduce(cute.ReductionOp.ADD)
        else:
            frag[(None, i)].fill(fill)
            if _column(i, lane, chunk, cfg) < t.shape[1]:
                frag[(None, i)].store(src[(None, i)].load())
                if cute.const_expr(with_sum):
                    total = total + frag[(None, i)].load().to(cute.Float32).reduce(cute.ReductionOp.ADD)
    if cute.const_expr(with_sum):
        return frag.load().to(cute.Float32), total
    return frag.load().to(cute.Float32)


@cute.jit
def store_chunk(t: cute.Tensor, row, lane, chunk, cfg: Constexpr, exact: Constexpr, values):
    """Writes this thread's values of chunk `chunk` of row `row`; the caller guards row < M."""
    dst = _chunk_vectors(t, row, lane, chunk, cfg)
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    frag.store(values.to(t.element_type))
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(exact):
            dst[(None, i)].store(frag[(None, i)].load())
        elif _column(i, lane, chunk, cfg) < t.shape[1]:
            dst[(None, i)].store(frag[(None, i)].load())


@cute.jit
def online_logsumexp(t: cute.Tensor, row, lane, row_in_cta, cfg: Constexpr, exact: Constexpr,
                     with_sum: Constexpr = False):
    """log(sum(exp(x))) of row `row` of `t` in one pass over its chunks (Float32); with
    `with_sum`, (that, the sum of the row's values) from the same pass."""
    m = -math.inf
    s = 0.0
    row_sum = 0.0
    for chunk in range(chunks(t, cfg)):
        if cute.const_expr(with_sum):
            x, part = load_chunk(t, row, lane, chunk, cfg, exact, -math.inf, True)
            row_sum = row_sum + part
        else:
            x = load_chunk(t, row, lane, chunk, cfg, exact, -math.inf)
        m_new = cute.arch.fmax(m, x.reduce(cute.ReductionOp.MAX))
        shift = cute.where(m_new == -math.inf, 0.0, m_new)         # no (-inf) - (-inf)
        e = cute.math.exp2(x * LOG2_E - shift * LOG2_E)
        s = s * cute.math.exp2((m - shift) * LOG2_E) + e.reduce(cute.ReductionOp.ADD)
        m = m_new
    row_max = row_reduce(m, "max", cfg, lane, row_in_cta)
    total = row_reduce(s * cute.math.exp2((m - row_max) * LOG2_E), "sum", cfg, lane, row_in_cta)
    lse = row_max + cute.math.log(total)
    if cute.const_expr(with_sum):
        return lse, row_reduce(row_sum, "sum", cfg, lane, row_in_cta)
    return lse
