"""Rows longer than one CTA's registers hold (a 128K vocabulary), read in chunks of cfg.n columns
(chunk_config: CHUNK) by the same threads (kernels/row_reduce.py's layout within a chunk: a
thread's 16-byte vectors `threads_per_row` apart). Cross-entropy reads its logits this way
(except 16-bit rows of 16385-131072 columns without label smoothing: softmax's cluster shape),
and softmax takes this path past softmax.REGISTER_N and for 16-bit rows past MAX_N that it
would read in narrower vectors (softmax.takes_chunks).

The log-sum-exp of such a row takes one pass: each thread keeps a running max m and a running
sum s of exp(x - m) over the values it has seen, rescaling s when m grows; after the last chunk
one max and one sum over the row's threads give lse = M + log(sum of s * exp(m - M)).

Rows whose length or stride is not a multiple of a 16-byte vector (GPT-2's vocabulary of 50257)
would be read one element at a time. Where every operand starts 16-byte aligned and they share a
row stride, their rows are "peeled" instead (RowConfig.peeled): each row is read in 16-byte
vectors from its first 16-byte boundary on (Pointer.align), and the up to vec - 1 elements
before it and after its last whole vector one each by the row's first 2 vec threads (the row's
"edges": load_edge, store_edge). Every operand's row r then splits at the same columns.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_reduce import RowConfig, row_config, row_reduce

LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)
CHUNK = 8192


def scaled(m):
    """A row's max (or log-sum-exp) in exp2's units, m log2(e), rounded once. Every exponential
    about it (exp_about) carries the same rounding, a common factor that cancels in a ratio of
    sums and that log_sum_exp takes back out; rescaling by exp2 of a difference of scaled
    values keeps it common."""
    return m * LOG2_E


def exp_about(x, shift):
    """exp(x - m) for x <= m, shift = scaled(m): one fma (x log2(e) - shift, rounded once) and
    the hardware's ex2 (cute.math.exp2 with fastmath) per element. Results below 2^-126 flush
    to 0, which a probability summed or rounded to 16 bits never misses; libdevice's exp2
    scales such results and costs about six SASS instructions where this takes two. (Scaling
    x - m instead rounds twice; x log2(e) - m log2(e), two products, rounds each element's
    exponent independently, and makes an fma impossible.)"""
    return cute.math.exp2(cute.math.fma(x, LOG2_E, -shift), fastmath=True)


def log_sum_exp(m, shift, s):
    """log(sum(exp(x))) of a row with max m from s = sum of exp_about(x, shift), shift =
    scaled(m): m + log(s) less the rounding of shift (fma(m, log2(e), -shift) is exact)."""
    return m + (cute.math.log2(s) - cute.math.fma(m, LOG2_E, -shift)) * LN_2


def rescale(m, shift):
    """exp(m - m'), shift = scaled(m'), for a sum of exponentials taken about scaled(m): exp2 of
    scaled(m) - shift, so the sum's terms keep one common rounding (0 where m is -inf)."""
    return cute.math.exp2(scaled(m) - shift, fastmath=True)


def absorb(m, s, top, sum_about):
    """Online softmax's step: the pair (m, s), a max and the sum of exponentials about it, after
    values whose max is `top` join it; `sum_about(shift)`: their exponentials' sum about shift
    (0 weight for a max of -inf)."""
    m_new = cute.arch.fmax(m, top)
    shift = scaled(cute.where(m_new == -math.inf, 0.0, m_new))     # no (-inf) - (-inf)
    added = sum_about(shift)
    return m_new, s * rescale(m, shift) + added


def absorb_values(m, s, x):
    """absorb for the values of a TensorSSA `x`."""
    return absorb(m, s, x.reduce(cute.ReductionOp.MAX),
                  lambda shift: exp_about(x, shift).reduce(cute.ReductionOp.ADD))


def merge_max_sum(m1, s1, m2, s2):
    """Two (max, sum of exponentials about it) pairs as one."""
    return absorb(m1, s1, m2, lambda shift: s2 * rescale(m2, shift))


def merge_max_sum_pairs(a: tuple, b: tuple, count_a=None, count_b=None) -> tuple:
    """merge_max_sum over (max, sum) tuples, in the form row_reduce.butterfly_merge and
    direct_fold take (the counts do not matter: the merge weighs by the maxes)."""
    return merge_max_sum(*a, *b)


def chunk_config(*tensors: torch.Tensor) -> tuple[RowConfig, bool]:
    """The chunk's configuration, and whether chunks tile the row exactly (no guards). Its
    vector divides the row length (the last vector of a row may not run past it) and suits
    every tensor's rows and address; where that leaves less than 16 bytes, the rows are peeled
    if they can be (module docstring; not exact then)."""
    n = tensors[0].shape[1]
    size = max(t.element_size() for t in tensors)
    cfg = row_config(min(n, CHUNK), size, n)               # n as a "stride": the vector divides it
    for t in tensors:
        c = row_config(min(n, CHUNK), size, t.stride(0) if t.shape[0] > 1 else 0, t.data_ptr())
        cfg = c if c.vec < cfg.vec else cfg
    if cfg.vec * size < 16 and _peelable(tensors, size):
        vec = 16 // size
        # A chunk of whole vectors, at least 16 of them: the edges' 2 vec threads are there.
        width = max(min(CHUNK, -(-n // vec) * vec), 16 * vec)
        return replace(row_config(width, size), peeled=True), False
    exact = n % cfg.n == 0 and cfg.padding == 0
    return cfg, exact


def _peelable(tensors, size: int) -> bool:
    """Whether every tensor's rows split at the same columns when peeled: the same element size,
    unit column strides, the same row stride, 16-byte aligned starts."""
    return all(t.element_size() == size and t.stride(1) == 1 and t.data_ptr() % 16 == 0 for t in tensors) and \
        len({t.stride(0) for t in tensors if t.shape[0] > 1}) <= 1


def chunks(t: cute.Tensor, cfg: RowConfig) -> int:
    return (t.shape[1] + cfg.n - 1) // cfg.n


def _chunk_vectors(t: cute.Tensor, row, lane, chunk, cfg: RowConfig):
    """(this thread's (vec, vectors) elements of chunk `chunk` of row `row` (chunks cfg.n wide),
    the row's columns that whole vectors cover (counted from the first vector; peeled rows: from
    their 16-byte boundary on))."""
    split = cute.make_layout((cfg.vec, cfg.threads_per_row, cfg.vectors, chunks(t, cfg)),
                             stride=(1, cfg.vec, cfg.vec * cfg.threads_per_row, cfg.n))
    line, limit = t[(row, None)], t.shape[1]
    if cute.const_expr(cfg.peeled):
        line, limit, _ = _body(t, row, cfg)
    return cute.composition(line, split)[(None, lane, None, chunk)], limit


@cute.jit
def _body(t: cute.Tensor, row, cfg: Constexpr):
    """(row `row` of a peeled `t` from its first 16-byte boundary on, the columns whole vectors
    cover from there, the columns before it)."""
    start = t[(row, None)].iterator
    aligned = start.align(16)
    head = cute.Int32((aligned.toint() - start.toint()) // (t.element_type.width // 8))
    whole = (t.shape[1] - head) // cfg.vec * cfg.vec
    return cute.make_tensor(aligned, cute.make_layout(t.shape[1])), cute.where(whole > 0, whole, 0), head


@cute.jit
def _edge_column(t: cute.Tensor, row, lane, cfg: Constexpr):
    """The column of row `row` whose element thread `lane` reads or writes one at a time (a
    peeled row's first 2 vec threads: the columns before its 16-byte boundary, then those past
    its last whole vector), or -1."""
    _, whole, head = _body(t, row, cfg)
    column = cute.Int32(-1)
    if lane < cfg.vec:
        if lane < head:
            column = lane
    elif lane < 2 * cfg.vec:
        column = head + whole + lane - cfg.vec
    return cute.where(column < t.shape[1], column, -1)


@cute.jit
def load_edge(t: cute.Tensor, row, lane, cfg: Constexpr, fill):
    """(this thread's edge element of row `row` as Float32 or `fill`, whether it has one)."""
    column = _edge_column(t, row, lane, cfg)
    value = cute.Float32(fill)
    if column >= 0:
        value = cute.Float32(t[(row, column)])
    return value, column >= 0


@cute.jit
def store_edge(t: cute.Tensor, row, lane, cfg: Constexpr, value):
    """Writes this thread's edge element of row `row`; the caller guards row < M."""
    column = _edge_column(t, row, lane, cfg)
    if column >= 0:
        t[(row, column)] = value.to(t.element_type)


@cute.jit
def chunk_of(t: cute.Tensor, row, column, cfg: Constexpr):
    """The chunk whose threads write column `column` of row `row` (a peeled row's edges: chunk
    0's, which load_edge and store_edge are given to)."""
    if cute.const_expr(cfg.peeled):
        _, whole, head = _body(t, row, cfg)
        body = column - head
        return cute.where(body >= 0, cute.where(body < whole, body // cfg.n, 0), 0)
    return column // cfg.n


def _column(i, lane, chunk, cfg: RowConfig):
    return chunk * cfg.n + (i * cfg.threads_per_row + lane) * cfg.vec


@cute.jit
def load_chunk(t: cute.Tensor, row, lane, chunk, cfg: Constexpr, exact: Constexpr, fill, with_sum: Constexpr = False):
    """This thread's values of chunk `chunk` of row `row` as Float32; columns past the row's
    end read as `fill`. With `with_sum`, also the sum of the values inside the row (the fill
    left out, so that a row's own -inf logits still count)."""
    src, limit = _chunk_vectors(t, row, lane, chunk, cfg)
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    total = cute.Float32(0.0)
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(exact):
            frag[(None, i)].store(src[(None, i)].load())
            if cute.const_expr(with_sum):
                total = total + frag[(None, i)].load().to(cute.Float32).reduce(cute.ReductionOp.ADD)
        else:
            frag[(None, i)].fill(fill)
            if _column(i, lane, chunk, cfg) < limit:
                frag[(None, i)].store(src[(None, i)].load())
                if cute.const_expr(with_sum):
                    total = total + frag[(None, i)].load().to(cute.Float32).reduce(cute.ReductionOp.ADD)
    if cute.const_expr(with_sum):
        return frag.load().to(cute.Float32), total
    return frag.load().to(cute.Float32)


@cute.jit
def store_chunk(t: cute.Tensor, row, lane, chunk, cfg: Constexpr, exact: Constexpr, values):
    """Writes this thread's values of chunk `chunk` of row `row`; the caller guards row < M."""
    dst, limit = _chunk_vectors(t, row, lane, chunk, cfg)
    frag = cute.make_rmem_tensor((cfg.vec, cfg.vectors), t.element_type)
    frag.store(values.to(t.element_type))
    for i in cute.range_constexpr(cfg.vectors):
        if cute.const_expr(exact):
            dst[(None, i)].store(frag[(None, i)].load())
        elif _column(i, lane, chunk, cfg) < limit:
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
        m, s = absorb_values(m, s, x)
    if cute.const_expr(cfg.peeled):                                   # the row's edges
        edge, present = load_edge(t, row, lane, cfg, -math.inf)
        if cute.const_expr(with_sum):
            row_sum = row_sum + cute.where(present, edge, 0.0)
        m, s = absorb(m, s, edge, lambda shift: exp_about(edge, shift))
    row_max = row_reduce(m, "max", cfg, lane, row_in_cta)
    row_shift = scaled(row_max)
    total = row_reduce(s * rescale(m, row_shift), "sum", cfg, lane, row_in_cta)
    lse = log_sum_exp(row_max, row_shift, total)
    if cute.const_expr(with_sum):
        return lse, row_reduce(row_sum, "sum", cfg, lane, row_in_cta)
    return lse
