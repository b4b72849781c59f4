"""Softmax and log-softmax over the last dimension, forward and backward, one pass over memory.

Forward: a thread holds its part of a row in registers (kernels/row_reduce.py), so the max and
the sum of exponentials are two reductions over registers, not two passes over memory:

    m = max(x);  e = exp2((x - m) * log2(e));  s = sum(e)
    softmax = e / s;  log_softmax = (x - m) - log(s)

Backward, from the forward's output y and the incoming gradient dy:

    softmax:      dx = y * (dy - sum(dy * y))
    log_softmax:  dx = dy - exp(y) * sum(dy)

Statistics are Float32 whatever the input type (bfloat16, float16, float32).

Rows over row_reduce.MAX_N elements do not fit a CTA's registers: up to REGISTER_N they are
split over a cluster of CTAs (kernels/row_reduce.py), still one pass; the forward's CTAs
trade their parts' max and sum of exponentials once and combine them (_cluster_max_sum). Longer rows are read in
chunks (kernels/row_chunks.py), the forward's log-sum-exp online in one pass and the output in
a second (two reads and one write), the backward's sum in one pass and dx in a second (four
reads and one write).
"""

from __future__ import annotations

import math

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_chunks import chunk_config, chunks, load_chunk, online_logsumexp, store_chunk
from .row_reduce import (MAX_CLUSTER, MAX_N, RowConfig, clamp_row, cluster_exchange, cluster_peers, dynamic_rows,
                         fold, launch_cluster, launch_grid, load_row, row_config, row_reduce, store_row, thread_place)

LOG2_E = math.log2(math.e)
# Rows of up to this many elements stay in registers (over a cluster past MAX_N).
REGISTER_N = MAX_N * MAX_CLUSTER


def values_per_thread(n: int) -> int:
    """64 values of a row per thread, 32 past 16384 columns: there the row spreads over twice
    the CTAs (a cluster from 32768 on), measured faster both ways (and the backward's y and dy
    fit its registers)."""
    return 64 if n <= MAX_N // 2 else 32


@cute.kernel
def _forward_kernel(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    peers = cluster_peers(cfg)
    rows = mX.shape[0]
    x = load_row(mX, clamp_row(row, rows), lane, cfg, fill=-math.inf)
    if cute.const_expr(peers is not None):
        m, s, e = _cluster_max_sum(x, cfg, lane, row_in_cta, peers)
    else:
        m = row_reduce(fold(x, "max"), "max", cfg, lane, row_in_cta)
        e = cute.math.exp2(x * LOG2_E - m * LOG2_E)
        s = row_reduce(fold(e, "sum"), "sum", cfg, lane, row_in_cta)
    if cute.const_expr(log):
        y = x - (m + cute.math.log(s))
    else:
        y = e * (1.0 / s)
    if row < rows:
        store_row(mY, row, lane, cfg, y)


@cute.jit
def _cluster_max_sum(x, cfg: Constexpr, lane, row_in_cta, peers):
    """(max, sum of exp(x - max), exp(x - max)) of a row split over a cluster, with one trip
    through distributed shared memory (two would put two cluster round trips on each row's
    path): each CTA folds its own part's max, then its exponentials about that max, and sends
    both; every CTA combines the parts (s = sum of s_r * exp(m_r - m)) and rescales its own
    exponentials. A part whose columns are all -inf takes its exponentials about 0 (all 0) and
    sends its max as -inf, which weighs its sum (0) by 0 whatever the row's max."""
    local = row_reduce(fold(x, "max"), "max", cfg, lane, row_in_cta, 0, peers, cluster_wide=False)
    e = cute.math.exp2(x * LOG2_E - cute.where(local == -math.inf, 0.0, local) * LOG2_E)
    total = row_reduce(fold(e, "sum"), "sum", cfg, lane, row_in_cta, 1, peers, cluster_wide=False)
    slots, at = cluster_exchange((local, total), cfg, lane, row_in_cta, 0, peers)
    parts = [r for r in range(cfg.cluster) if cfg.n - r * cfg.part > 0]     # the CTAs holding columns
    m = slots[(row_in_cta, parts[0], 0, at)]
    for r in cute.range_constexpr(1, len(parts)):
        m = cute.arch.fmax(m, slots[(row_in_cta, parts[r], 0, at)])
    s = 0.0
    for r in cute.range_constexpr(len(parts)):
        part_max, part_sum = slots[(row_in_cta, parts[r], 0, at)], slots[(row_in_cta, parts[r], 1, at)]
        s = s + part_sum * cute.math.exp2((part_max - m) * LOG2_E)
    return m, s, e * cute.math.exp2((local - m) * LOG2_E)


@cute.kernel
def _backward_kernel(mY: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, cfg: Constexpr, log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    peers = cluster_peers(cfg)
    step = 0 if cute.const_expr(peers is not None) else None
    rows = mY.shape[0]
    src = clamp_row(row, rows)
    y = load_row(mY, src, lane, cfg)
    dy = load_row(mDY, src, lane, cfg)
    if cute.const_expr(log):
        total = row_reduce(fold(dy, "sum"), "sum", cfg, lane, row_in_cta, step, peers)
        dx = dy - cute.math.exp2(y * LOG2_E) * total
    else:
        dot = row_reduce(fold(dy * y, "sum"), "sum", cfg, lane, row_in_cta, step, peers)
        dx = y * (dy - dot)
    if row < rows:
        store_row(mDX, row, lane, cfg, dx)


@cute.kernel
def _long_forward_kernel(mX: cute.Tensor, mY: cute.Tensor, cfg: Constexpr, exact: Constexpr, log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    rows = mX.shape[0]
    src = clamp_row(row, rows)
    lse = online_logsumexp(mX, src, lane, row_in_cta, cfg, exact)
    for chunk in range(chunks(mX, cfg)):
        x = load_chunk(mX, src, lane, chunk, cfg, exact, 0.0)
        y = x - lse if cute.const_expr(log) else cute.math.exp2(x * LOG2_E - lse * LOG2_E)
        if row < rows:
            store_chunk(mY, row, lane, chunk, cfg, exact, y)


@cute.kernel
def _long_backward_kernel(mY: cute.Tensor, mDY: cute.Tensor, mDX: cute.Tensor, cfg: Constexpr, exact: Constexpr,
                          log: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    rows = mY.shape[0]
    src = clamp_row(row, rows)
    total = 0.0
    for chunk in range(chunks(mY, cfg)):
        dy = load_chunk(mDY, src, lane, chunk, cfg, exact, 0.0)
        if cute.const_expr(log):
            total = total + fold(dy, "sum")
        else:
            total = total + fold(dy * load_chunk(mY, src, lane, chunk, cfg, exact, 0.0), "sum")
    total = row_reduce(total, "sum", cfg, lane, row_in_cta)
    for chunk in range(chunks(mY, cfg)):
        y = load_chunk(mY, src, lane, chunk, cfg, exact, 0.0)
        dy = load_chunk(mDY, src, lane, chunk, cfg, exact, 0.0)
        dx = dy - cute.math.exp2(y * LOG2_E) * total if cute.const_expr(log) else y * (dy - total)
        if row < rows:
            store_chunk(mDX, row, lane, chunk, cfg, exact, dx)


@cute.jit
def _long_forward(x: cute.Tensor, y: cute.Tensor, cfg: Constexpr, exact: Constexpr, log: Constexpr):
    _long_forward_kernel(x, y, cfg, exact, log).launch(grid=launch_grid(x.shape[0], cfg), block=(cfg.threads, 1, 1))


@cute.jit
def _long_backward(y: cute.Tensor, dy: cute.Tensor, dx: cute.Tensor, cfg: Constexpr, exact: Constexpr,
                   log: Constexpr):
    _long_backward_kernel(y, dy, dx, cfg, exact, log).launch(grid=launch_grid(y.shape[0], cfg),
                                                             block=(cfg.threads, 1, 1))


@cute.jit
def _forward(x: cute.Tensor, y: cute.Tensor, cfg: Constexpr, log: Constexpr):
    _forward_kernel(x, y, cfg, log).launch(grid=launch_grid(x.shape[0], cfg), block=(cfg.threads, 1, 1),
                                           cluster=launch_cluster(cfg))


@cute.jit
def _backward(y: cute.Tensor, dy: cute.Tensor, dx: cute.Tensor, cfg: Constexpr, log: Constexpr):
    _backward_kernel(y, dy, dx, cfg, log).launch(grid=launch_grid(y.shape[0], cfg), block=(cfg.threads, 1, 1),
                                                 cluster=launch_cluster(cfg))


def _rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """`t` as (M, N) with unit column stride, the last dim being N (a copy only if needed)."""
    if t.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension")
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _config(*tensors: torch.Tensor) -> RowConfig:
    n = tensors[0].shape[-1]
    size = max(t.element_size() for t in tensors)
    values = values_per_thread(n)
    cfg = row_config(n, size, max_values=values, max_cluster=MAX_CLUSTER)
    # The vector must suit every tensor's rows and address.
    for t in tensors:
        c = row_config(n, size, t.stride(0), t.data_ptr(), values, MAX_CLUSTER)
        if c.vec < cfg.vec:
            cfg = c
    return cfg


def softmax(x: torch.Tensor, log: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax (or log_softmax) over the last dim of a CUDA tensor, in its dtype; any row length."""
    x2 = _rows(x, "x")
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device) if out is None else out.view(x2.shape)
    if x2.numel() and x2.shape[1] > REGISTER_N:
        _long_forward(dynamic_rows(x2), dynamic_rows(y), *chunk_config(x2, y), log)
    elif x2.numel():
        _forward(dynamic_rows(x2), dynamic_rows(y), _config(x2, y), log)
    return y.view(x.shape)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, log: bool = False) -> torch.Tensor:
    """The gradient of softmax (or log_softmax) from its output `y` and the gradient `dy`."""
    if y.shape != dy.shape:
        raise ValueError(f"softmax_backward: y {tuple(y.shape)} and dy {tuple(dy.shape)} differ in shape")
    y2, dy2 = _rows(y, "y"), _rows(dy, "dy")
    dx = torch.empty(y2.shape, dtype=dy.dtype, device=y.device)
    if y2.numel() and y2.shape[1] > REGISTER_N:
        _long_backward(dynamic_rows(y2), dynamic_rows(dy2), dynamic_rows(dx), *chunk_config(y2, dy2, dx), log)
    elif y2.numel():
        _backward(dynamic_rows(y2), dynamic_rows(dy2), dynamic_rows(dx), _config(y2, dy2, dx), log)
    return dx.view(y.shape)
