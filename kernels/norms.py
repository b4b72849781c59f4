"""RMSNorm and LayerNorm over the last dimension, forward and backward, one pass over memory.

Forward (a thread's part of a row in registers, kernels/row_reduce.py), optionally after adding
a residual (the sum is written too: the next block's residual stream):

    RMSNorm:    rstd = rsqrt(mean(x^2) + eps);                    y = x * rstd * w
    LayerNorm:  mean = mean(x); rstd = rsqrt(mean((x - mean)^2) + eps);  y = (x - mean) * rstd * w + b

rstd (and mean) are saved per row in Float32 for the backward. LayerNorm's variance is the
two-pass form over registers (no cancellation), the columns past N that a thread holds masked
out of it.

Backward, with x_hat = (x - mean) * rstd and g = dy * w:

    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (RMSNorm: no mean(g) term)
    dw = sum over rows of dy * x_hat,   db = sum over rows of dy

dw and db are reduced in two stages: a persistent grid of CTAs each sums its rows into a
Float32 partial row in registers and writes it; the partial rows are then summed (torch.sum,
a (CTAs x N) read, small next to the (M x N) tensors).

Rows too long for one CTA's registers are split over a cluster of CTAs (kernels/row_reduce.py),
up to 8 x 32768 columns: past forward_values(n, rms) values per thread forward, past
BACKWARD_VALUES backward, where x, dy, w and the dw (and db) partial rows are live at once.
The limits are measured (benchmarks/RESULTS.md): each cluster reduction waits at a cluster
barrier, so fewer, fuller CTAs win until registers spill.
"""

from __future__ import annotations

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_reduce import (MAX_CLUSTER, clamp_row, cluster_peers, column_mask, cta_group, dynamic_rows, fetch_row, fold,
                         launch_cluster, launch_grid, load_row, row_config, row_fragment, row_reduce, store_row,
                         thread_place)

# Rows of up to this many elements: one CTA's registers, times the largest cluster.
MAX_NORM_N = 32768 * MAX_CLUSTER
# Row values a thread holds at most, forward and backward (x, dy, w and the dw and db partial
# rows live at once; RMSNorm's backward measured faster at 32 but spills at 512 threads).
FORWARD_VALUES, BACKWARD_VALUES = 64, 16


AHEAD_BLOCKS = 4     # forward with read-ahead: rows per CTA (cluster), one after the other


def read_ahead(cfg, residual: bool, rms: bool) -> bool:
    """Whether the forward reads the next row while it reduces this one: LayerNorm's rows long
    enough for one per CTA (one CTA per SM, so nothing else hides its two reductions' waits),
    at most 32 values per thread (the next row's 16-bit values then fit beside this row's), no
    residual (its second row would not fit). RMSNorm (one reduction) lost 0.04-0.08 of copy
    with it over clusters, where its 62 registers leave room for two CTAs per SM without."""
    return not rms and cfg.rows == 1 and cfg.vec * cfg.vectors <= 32 and not residual


def forward_values(n: int, rms: bool) -> int:
    """Row values per thread forward (measured on an H100 in bf16, fraction of copy;
    benchmarks/row_configs.py and reductions.py). RMSNorm holds 32 past 32768 columns (a
    cluster twice as wide): 0.98 against 0.96 at 65536, 0.95 against 0.88 at 131072. LayerNorm
    holds 32 at 8193-16384 columns, where it reads the next row ahead (read_ahead): 0.94
    against 0.74-0.76 at 16384; past that 64 stays ahead of 32 with read-ahead (reductions.py:
    0.95 / 0.85 / 0.79 against 0.89 / 0.83 / 0.77 at 32768 / 65536 / 131072)."""
    if rms:
        return 32 if n > 32768 else FORWARD_VALUES
    return 32 if 8192 < n <= 16384 else FORWARD_VALUES


@cute.jit
def _statistics(x, cfg: Constexpr, rms: Constexpr, eps, lane, row_in_cta, peers, step):
    """(mean, rstd) of this thread's row (mean is 0.0 for RMSNorm). `step` counts the kernel's
    reductions so far (row_reduce's slot sets; None: the kernel's only row, without a cluster);
    LayerNorm makes two per row."""
    first, second = (None, None) if cute.const_expr(step is None) else (step, step + 1)
    if cute.const_expr(rms):
        mean = 0.0
        var = row_reduce(fold(x * x, "sum"), "sum", cfg, lane, row_in_cta, first, peers) * (1.0 / cfg.n)
    else:
        mean = row_reduce(fold(x, "sum"), "sum", cfg, lane, row_in_cta, first, peers) * (1.0 / cfg.n)
        centered = x - mean
        if cute.const_expr(cfg.padding):
            centered = centered * column_mask(lane, cfg)
        var = row_reduce(fold(centered * centered, "sum"), "sum", cfg, lane, row_in_cta, second, peers) * (1.0 / cfg.n)
    return mean, cute.math.rsqrt(var + eps)


@cute.kernel
def _forward_kernel(mX: cute.Tensor, mRes, mW, mB, mY: cute.Tensor, mResOut, mRstd: cute.Tensor, mMean,
                    eps: cute.Float32, cfg: Constexpr, rms: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    peers = cluster_peers(cfg)
    rows = mX.shape[0]
    outputs = (mY, mResOut, mRstd, mMean)
    if cute.const_expr(read_ahead(cfg, mRes is not None, rms)):
        # Each CTA (cluster) walks every groups-th block of cfg.rows rows (AHEAD_BLOCKS of them),
        # the next block's x in flight while this one waits at its reductions.
        group, groups = cta_group(cfg)
        x_next = row_fragment(mX, cfg)
        fetch_row(x_next, mX, clamp_row(row, rows), lane, cfg)
        step = 0                                    # row_reduce's slots alternate between rows
        for block in range(group, (rows + cfg.rows - 1) // cfg.rows, groups):
            row = block * cfg.rows + row_in_cta
            x = x_next.load().to(cute.Float32)
            fetch_row(x_next, mX, clamp_row(row + groups * cfg.rows, rows), lane, cfg)
            _normalize_row(x, row, rows, mRes, mW, mB, outputs, eps, cfg, rms, lane, row_in_cta, peers, step)
            step = step + 2                         # LayerNorm's two reductions per row
    else:                                           # one block of rows per CTA (cluster), no loop
        x = load_row(mX, clamp_row(row, rows), lane, cfg)
        _normalize_row(x, row, rows, mRes, mW, mB, outputs, eps, cfg, rms, lane, row_in_cta, peers,
                       0 if cute.const_expr(peers is not None) else None)


@cute.jit
def _normalize_row(x, row, rows, mRes, mW, mB, outputs, eps, cfg: Constexpr, rms: Constexpr, lane, row_in_cta,
                   peers, step):
    """One row (`x`, as load_row read it) normalized and stored with its statistics."""
    mY, mResOut, mRstd, mMean = outputs
    if cute.const_expr(mRes is not None):
        x = x + load_row(mRes, clamp_row(row, rows), lane, cfg)
    mean, rstd = _statistics(x, cfg, rms, eps, lane, row_in_cta, peers, step)
    y = x * rstd if cute.const_expr(rms) else (x - mean) * rstd
    if cute.const_expr(mW is not None):
        y = y * load_row(mW, 0, lane, cfg)
    if cute.const_expr(mB is not None):
        y = y + load_row(mB, 0, lane, cfg)
    if row < rows:
        store_row(mY, row, lane, cfg, y)
        if cute.const_expr(mResOut is not None):
            store_row(mResOut, row, lane, cfg, x)
        if lane == 0:
            mRstd[row] = rstd
            if cute.const_expr(mMean is not None):
                mMean[row] = mean


@cute.kernel
def _backward_kernel(mX: cute.Tensor, mW, mDY: cute.Tensor, mRstd: cute.Tensor, mMean, mDX: cute.Tensor,
                     mDWPartial, mDBPartial, cfg: Constexpr):
    _, lane, row_in_cta = thread_place(cfg)
    peers = cluster_peers(cfg)
    group, groups = cta_group(cfg)
    rows = mX.shape[0]
    dw = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    db = cute.make_rmem_tensor((cfg.vec, cfg.vectors), cute.Float32)
    dw.fill(0.0)
    db.fill(0.0)
    w = load_row(mW, 0, lane, cfg) if cute.const_expr(mW is not None) else 1.0
    # RMSNorm reads x and dy a row ahead: the next row's loads are in flight while this row
    # waits at its reduction (one CTA per SM at 512 threads: nothing else hides that wait).
    # LayerNorm's mean and db partial row leave no registers for it (it spills).
    ahead = mMean is None
    x_next, dy_next = row_fragment(mX, cfg), row_fragment(mDY, cfg)
    if cute.const_expr(ahead):
        first = clamp_row(group * cfg.rows + row_in_cta, rows)
        fetch_row(x_next, mX, first, lane, cfg)
        fetch_row(dy_next, mDY, first, lane, cfg)
    step = 0                                        # row_reduce's slots alternate between iterations
    for block in range(group, (rows + cfg.rows - 1) // cfg.rows, groups):
        row = block * cfg.rows + row_in_cta
        src = clamp_row(row, rows)
        if cute.const_expr(ahead):
            x, dy = x_next.load().to(cute.Float32), dy_next.load().to(cute.Float32)
            following = clamp_row(row + groups * cfg.rows, rows)
            fetch_row(x_next, mX, following, lane, cfg)
            fetch_row(dy_next, mDY, following, lane, cfg)
        else:
            x, dy = load_row(mX, src, lane, cfg), load_row(mDY, src, lane, cfg)
        rstd = mRstd[src]
        x_hat = (x - mMean[src]) * rstd if cute.const_expr(mMean is not None) else x * rstd
        g = dy * w
        if cute.const_expr(mMean is not None):     # both sums in one trip through shared memory
            c1, c2 = row_reduce((fold(g * x_hat, "sum"), fold(g, "sum")), "sum", cfg, lane, row_in_cta, step,
                                peers)
            dx = (g - c2 * (1.0 / cfg.n) - x_hat * (c1 * (1.0 / cfg.n))) * rstd
        else:
            c1 = row_reduce(fold(g * x_hat, "sum"), "sum", cfg, lane, row_in_cta, step, peers) * (1.0 / cfg.n)
            dx = (g - x_hat * c1) * rstd
        if row < rows:
            store_row(mDX, row, lane, cfg, dx)
            if cute.const_expr(mDWPartial is not None):
                dw.store(dw.load() + dy * x_hat)
            if cute.const_expr(mDBPartial is not None):
                db.store(db.load() + dy)
        step = step + 1
    partial_row = group * cfg.rows + row_in_cta
    if cute.const_expr(mDWPartial is not None):
        store_row(mDWPartial, partial_row, lane, cfg, dw.load())
    if cute.const_expr(mDBPartial is not None):
        store_row(mDBPartial, partial_row, lane, cfg, db.load())


@cute.jit
def _forward(x, res, w, b, y, res_out, rstd, mean, eps: cute.Float32, cfg: Constexpr, rms: Constexpr):
    per_group = AHEAD_BLOCKS if read_ahead(cfg, res is not None, rms) else 1
    _forward_kernel(x, res, w, b, y, res_out, rstd, mean, eps, cfg, rms).launch(
        grid=launch_grid(x.shape[0], cfg, per_group), block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg))


@cute.jit
def _backward(x, w, dy, rstd, mean, dx, dw_partial, db_partial, groups: cute.Int32, cfg: Constexpr):
    _backward_kernel(x, w, dy, rstd, mean, dx, dw_partial, db_partial, cfg).launch(
        grid=(groups * cfg.cluster, 1, 1), block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg))


# -- host entries ----------------------------------------------------------------------------------

def _rows(t: torch.Tensor | None, n: int, name: str) -> torch.Tensor | None:
    if t is None:
        return None
    if t.shape[-1] != n:
        raise ValueError(f"{name} has {t.shape[-1]} columns where the input has {n}")
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _vector(t: torch.Tensor | None, n: int, name: str) -> torch.Tensor | None:
    if t is None:
        return None
    if t.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
    return t.contiguous()


def _config(n: int, tensors, max_values: int) -> object:
    present = [t for t in tensors if t is not None]
    size = max(t.element_size() for t in present)
    cfg = row_config(n, size, max_values=max_values, max_cluster=MAX_CLUSTER)
    for t in present:
        c = row_config(n, size, t.stride(0) if t.dim() == 2 else 0, t.data_ptr(), max_values, MAX_CLUSTER)
        cfg = c if c.vec < cfg.vec else cfg
    return cfg


def backward_groups(m: int, cfg, sms: int) -> int:
    """The backward's persistent grid, in groups of cfg.cluster CTAs: enough resident CTAs
    (about 16 warps per SM) to keep loads in flight; each group adds cfg.rows partial rows.
    csrc/torch/RowOps.cpp computes the same."""
    return max(1, min(-(-m // cfg.rows), sms * max(1, 512 // cfg.threads) // cfg.cluster))


def norm_forward(x: torch.Tensor, weight=None, bias=None, residual=None, eps: float = 1e-6, rms: bool = True):
    """(y, residual_out or None, rstd, mean or None): RMSNorm (rms) or LayerNorm of x (+ residual)
    over the last dim; y in x's dtype, residual_out in the residual's, statistics Float32."""
    n = x.shape[-1]
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual has shape {tuple(residual.shape)} where x has {tuple(x.shape)}")
    x2, res2 = _rows(x, n, "x"), _rows(residual, n, "residual")
    w, b = _vector(weight, n, "weight"), _vector(bias, n, "bias")
    m = x2.shape[0]
    y = torch.empty_like(x2)
    res_out = None if residual is None else torch.empty_like(res2)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    mean = None if rms else torch.empty(m, dtype=torch.float32, device=x.device)
    if m:
        cfg = _config(n, (x2, res2, w, b, y, res_out), forward_values(n, rms))
        _forward(dynamic_rows(x2), dynamic_rows(res2), w, b, dynamic_rows(y), dynamic_rows(res_out), dynamic_rows(rstd),
                 dynamic_rows(mean), eps, cfg, rms)
    shape = x.shape
    return y.view(shape), None if res_out is None else res_out.view(shape), rstd, mean


def norm_backward(x: torch.Tensor, weight, dy: torch.Tensor, rstd: torch.Tensor, mean=None,
                  weight_grad: bool = True, bias_grad: bool = False):
    """(dx, dweight or None, dbias or None) of RMSNorm (mean None) or LayerNorm, from the
    forward's input (after the residual add), weight and statistics."""
    n = x.shape[-1]
    if dy.shape != x.shape or rstd.numel() != x.numel() // max(n, 1):
        raise ValueError(f"norm_backward: dy {tuple(dy.shape)} and rstd {tuple(rstd.shape)} do not match x "
                         f"{tuple(x.shape)}")
    x2, dy2 = _rows(x, n, "x"), _rows(dy, n, "dy")
    w = _vector(weight, n, "weight")
    m = x2.shape[0]
    dx = torch.empty_like(x2)
    cfg = _config(n, (x2, dy2, w, dx), BACKWARD_VALUES)
    groups = backward_groups(m, cfg, torch.cuda.get_device_properties(x.device).multi_processor_count)
    partial = (lambda: torch.empty(groups * cfg.rows, n, dtype=torch.float32, device=x.device))
    dw_partial = partial() if weight_grad and weight is not None else None
    db_partial = partial() if bias_grad else None
    if m:
        _backward(dynamic_rows(x2), w, dynamic_rows(dy2), dynamic_rows(rstd), dynamic_rows(mean), dynamic_rows(dx),
                  dynamic_rows(dw_partial), dynamic_rows(db_partial), groups, cfg)
    dw = None if dw_partial is None else (dw_partial.sum(0) if m else dw_partial.new_zeros(n)).to(weight.dtype)
    db = None if db_partial is None else (db_partial.sum(0) if m else db_partial.new_zeros(n)).to(
        weight.dtype if weight is not None else x.dtype)
    return dx.view(x.shape), dw, db
