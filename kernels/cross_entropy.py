"""Cross-entropy over logits (M, V) with integer targets (M,), forward and backward, each one pass
over the logits, for any vocabulary size.

A row is read in chunks (kernels/row_chunks.py: a vocabulary of 128K does not fit one CTA's
registers), or for 16-bit rows past 16384 columns, up to 131072, in 16-byte vectors and without
label smoothing, staged into a cluster's shared memory (forward_shape), its log-sum-exp taken
online in one pass, and

    loss = lse - x[target]

(0 where target == ignore_index; NaN, and no read, for a target outside [0, V): a bad target
shows in the loss instead of reading another row). With label smoothing e (torch's
`label_smoothing`: the target distribution is (1 - e) one-hot + e uniform), the same pass also
sums the row, and

    loss = (1 - e) (lse - x[target]) + e (lse - sum(x) / V)

The forward saves lse; the backward writes, each chunk of a row by its own CTA,

    dlogits = (exp(x - lse) - e / V - (1 - e) [column == target]) * dloss
              (0 for an ignored row, NaN for a bad target)

into a new tensor or over the logits (`inplace`), reading each logit once. Without smoothing
(`smooth` is a compile-time flag) neither kernel does the extra work.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

import cute_torch as cute
from cute_torch import Constexpr

from .row_chunks import (CHUNK, absorb_values, chunk_config, chunk_of, chunks, exp_about, load_chunk, load_edge,
                         log_sum_exp, merge_max_sum_pairs, online_logsumexp, scaled, store_chunk, store_edge)
from .row_reduce import (RowConfig, butterfly_merge, clamp_row, direct_exchange, direct_fold, dynamic_rows,
                         fast_memory, launch_cluster, launch_grid, open_direct, start_staged_row, thread_place)
from .softmax import direct_shape as softmax_direct_shape

# CTAs per SM the forward in softmax's quack shape asks ptxas to fit (48 registers, 32 KB of
# shared memory each; forward_shape).
DIRECT_CTAS = 5

# The backward's chunk of rows in 16-byte vectors, one per 256-thread CTA (backward_shape), and
# the CTAs per SM it asks ptxas to fit: with label smoothing over 16-bit rows four (95 registers
# free, two CTAs; 62 bounded); otherwise three (Float32 rows with smoothing spilled 68-148 bytes
# at four; 80 registers, none). Without smoothing ptxas took 84 free at 7 vectors a thread
# (12289-14336 bf16 columns; 31-78 at other widths, where the bound changes nothing): two CTAs;
# bounded, 80 and no spills, three. bf16 fraction of copy, free -> bounded (2026-11-27, three
# runs each): H200 14000 0.92 -> 1.00; H100 13000 0.98 -> 1.00, 14000 0.99 -> 1.00; 4096-131072
# the same within 0.5 % on both.
BACKWARD_CHUNK = 16384
BACKWARD_SMOOTHING_CTAS, BACKWARD_CTAS = 4, 3
# forward_ctas: the forward over 1024 16-bit columns, four rows a CTA, asks for this many CTAs per
# SM, and ptxas spills up to SHORT_ROW_SPILL bytes a thread so, measured and accepted (no
# SpillWarning: launch's accepted_spill_bytes).
SHORT_ROW_CTAS, SHORT_ROW_SPILL = 12, 4
# forward_shape: rows past CHUNK up to this many columns (7 vectors a thread of 256) take one chunk.
ONE_CHUNK = 14336
# forward_ctas: the one chunk's CTAs per SM by its vectors a thread (ptxas free: 72 registers at 6,
# 96 at 7; bounded 64 and 79, no spills; 128 threads on fast memory past 12288 columns, 13-14
# vectors: bounded 128, spilling up to ONE_CHUNK_SPILL bytes, 12 measured and accepted).
ONE_CHUNK_CTAS = {6: 4, 7: 3, 13: 4, 14: 4}
ONE_CHUNK_SPILL = 16
# forward_shape: on fast memory, one chunk past this many columns runs in 128 threads.
ONE_CHUNK_NARROW = 12288


@cute.kernel
def _forward_kernel(mX: cute.Tensor, mTarget: cute.Tensor, mLoss: cute.Tensor, mLse: cute.Tensor,
                    smoothing: cute.Float32, ignore_index: cute.Int32, cfg: Constexpr, exact: Constexpr,
                    smooth: Constexpr, direct: Constexpr):
    row, lane, row_in_cta = thread_place(cfg)
    rows = mX.shape[0]
    vocab = mX.shape[1]
    # The target first: its trip to memory runs under the row's loads, not after the reductions
    # (a short row's CTA would otherwise end on two dependent trips, the target's and its logit's).
    # H200, bf16 fraction of copy: 4096 columns 0.92 -> 1.00, 8192 0.96 -> 1.01 (quack: 0.88 -> 0.97 of it).
    src = clamp_row(row, rows)
    target = mTarget[src]
    if cute.const_expr(direct):
        lse = _direct_log_sum_exp(mX, src, cfg, lane, row_in_cta)
    elif cute.const_expr(smooth):
        lse, row_sum = online_logsumexp(mX, src, lane, row_in_cta, cfg, exact, True)
        uniform = lse - row_sum / cute.Float32(vocab)    # the cross-entropy against 1/V everywhere
    else:
        lse = online_logsumexp(mX, src, lane, row_in_cta, cfg, exact)
    if row < rows and lane == 0:
        loss = 0.0
        if target != ignore_index:
            loss = math.nan                       # a target out of range: NaN, and no read
            if target >= 0:
                if target < vocab:
                    loss = lse - cute.Float32(mX[(row, cute.Int32(target))])
                    if cute.const_expr(smooth):
                        loss = (1.0 - smoothing) * loss + smoothing * uniform
        mLoss[row] = loss
        mLse[row] = lse


@cute.jit
def _direct_log_sum_exp(mX, row, cfg: Constexpr, lane, row_in_cta):
    """The log-sum-exp of row `row` (one that exists) in softmax's quack shape (forward_shape):
    the CTA's part staged by cp.async, each thread's (max, sum of exponentials) taken online a
    16-byte vector at a time from shared memory, so that no row values stay live (48
    registers: DIRECT_CTAS CTAs per SM), merged over the warp, then one exchange
    (row_reduce.direct_exchange, direct_fold)."""
    slots, bar = open_direct(cfg, 2)
    vectors = start_staged_row(mX, row, lane, row_in_cta, cfg, fill=-math.inf)
    cute.arch.cp_async_wait_group(0)
    m, s = -math.inf, 0.0
    for i in cute.range_constexpr(cfg.vectors):
        m, s = absorb_values(m, s, vectors[(None, i)].load().to(cute.Float32))
    direct_exchange(butterfly_merge((m, s), merge_max_sum_pairs, 1, 32), cfg, slots, bar)
    m, s = direct_fold(cfg, slots, 2, merge_max_sum_pairs)
    return log_sum_exp(m, scaled(m), s)


@cute.kernel
def _backward_kernel(mX: cute.Tensor, mTarget: cute.Tensor, mLse: cute.Tensor, mDLoss: cute.Tensor,
                     mDX: cute.Tensor, smoothing: cute.Float32, ignore_index: cute.Int32, cfg: Constexpr,
                     exact: Constexpr, reduced: Constexpr, smooth: Constexpr):
    row, lane, _ = thread_place(cfg)
    _, chunk, _ = cute.arch.block_idx()             # each CTA one chunk of its rows (_backward)
    rows, vocab = mX.shape[0], mX.shape[1]
    src = clamp_row(row, rows)
    target = mTarget[src]
    scale = cute.Float32(mDLoss[0]) if cute.const_expr(reduced) else cute.Float32(mDLoss[src])
    in_range = cute.where(target >= 0, target < vocab, False)
    scale = cute.where(target == ignore_index, 0.0, cute.where(in_range, scale, math.nan))
    lse = mLse[src]
    lse = cute.where(lse == lse, lse, 0.0)        # a row of -inf has lse NaN: its p = exp(-inf) = 0
    shift = scaled(lse)
    one_hot = scale
    if cute.const_expr(smooth):
        one_hot = (1.0 - smoothing) * scale
        spread = smoothing / cute.Float32(vocab)
    x = load_chunk(mX, src, lane, chunk, cfg, exact, 0.0)
    p = exp_about(x, shift)
    if cute.const_expr(smooth):
        p = p - spread
    if row < rows:
        store_chunk(mDX, row, lane, chunk, cfg, exact, p * scale)
    if cute.const_expr(cfg.peeled):                 # the row's edges (kernels/row_chunks.py), by chunk 0
        if chunk == 0:
            edge = load_edge(mX, src, lane, cfg, 0.0)[0]
            p_edge = exp_about(edge, shift)
            if cute.const_expr(smooth):
                p_edge = p_edge - spread
            if row < rows:
                store_edge(mDX, row, lane, cfg, p_edge * scale)
    # The target's column: the CTA that wrote it takes (1 - e) dloss back off, after the write.
    cute.arch.sync_threads()
    if row < rows and lane == 0 and in_range:
        if target != ignore_index:
            column = cute.Int32(target)
            if chunk_of(mDX, row, column, cfg) == chunk:
                mDX[(row, column)] = cute.Float32(mDX[(row, column)]) - one_hot


@cute.jit
def _forward(x, target, loss, lse, smoothing: cute.Float32, ignore_index: cute.Int32, cfg: Constexpr,
             exact: Constexpr, smooth: Constexpr, direct: Constexpr = False):
    """`direct`: one row per cluster in softmax's quack shape (forward_shape); else a CTA per
    block of rows, read in chunks."""
    ctas = forward_ctas(x.shape[1], x.element_type.width, cfg, smooth, direct)
    _forward_kernel(x, target, loss, lse, smoothing, ignore_index, cfg, exact, smooth, direct).launch(
        grid=launch_grid(x.shape[0], cfg), block=(cfg.threads, 1, 1), cluster=launch_cluster(cfg),
        min_blocks_per_mp=ctas, accepted_spill_bytes=accepted_spill(cfg, ctas))


def accepted_spill(cfg: RowConfig, ctas: int | None) -> int:
    """Bytes a thread the forward may spill, measured and accepted (launch's accepted_spill_bytes):
    SHORT_ROW_SPILL over 1024 columns, ONE_CHUNK_SPILL in one chunk of 128 threads."""
    if ctas == SHORT_ROW_CTAS:
        return SHORT_ROW_SPILL
    return ONE_CHUNK_SPILL if ctas and cfg.threads == 128 and cfg.n > CHUNK else 0


def forward_ctas(n: int, bits: int, cfg: RowConfig, smooth: bool, direct: bool) -> int | None:
    """CTAs per SM the forward asks ptxas to fit (None: no bound): DIRECT_CTAS in softmax's
    shape; over 16-bit rows in chunks, six where one chunk holds the row (95 registers free,
    77-80 bounded), and with label smoothing five up to 32768 columns and over peeled rows,
    four past that (its per-chunk row sum left ptxas free to take 127-155 registers: three
    CTAs of 128 threads). Float32 rows (119-129 registers with smoothing, four CTAs) measured
    the same or 1-2 % slower bounded and stay free. Fraction of copy (the logits read once),
    2026-11-27, free -> bounded (smoothing: free -> 4 -> 5):

    | bf16 columns | H200 | H100 |
    |---|---|---|
    | 2048 / 4096 / 8192 | 0.98 / 1.00 / 1.01 -> 1.01 / 1.04 / 1.04 | 1.01 / 1.02 / 1.02 -> the same |
    | 16384 (not bounded) | 1.01 -> 1.02 | 1.02 -> 1.02 |
    | 4096, smoothing | 0.75 / 0.87 / 0.91 | 0.94 / 1.01 / 1.00 |
    | 8192, smoothing | 0.75 / 0.88 / 0.94 | 0.93 / 1.01 / 1.02 |
    | 32768, smoothing | 0.84 / 0.92 / 0.96 | 0.97 / 1.00 / 0.99 |
    | 50257 (peeled), smoothing | 0.73 / 0.77 / 0.83 | 0.88 / 0.87 / 0.90 |
    | 65536, smoothing | - | 0.95 / 1.00 / 0.95 |
    | 100000, smoothing | - | 0.91 / 0.91 / 0.84 |
    | 131072, smoothing | 0.85 / 0.93 / 0.90 | 0.94 / 0.99 / 0.95 |

    quack 0.2.2 (no smoothing) in the same runs: H200 1.00 / 1.03 / 1.03 at 2048 / 4096 / 8192,
    H100 1.01 / 1.03 / 1.03. At 1024 columns (four rows a CTA, 55 registers free: nine CTAs)
    twelve, H200 bf16 0.96 -> 0.98 (fp16 0.98 -> 0.99; quack 0.99; ten 0.96, eleven 0.98,
    sixteen spilled: 0.45). One chunk over rows past CHUNK (forward_shape): ONE_CHUNK_CTAS.
    Up to 512 columns the SM's 2048 threads (31 registers; 32 free until bf16 lanes widened in
    integer operations, DeviceCodegen.cpp's widenBf16Lanes, then 39: 12 CTAs of 128 threads),
    except 128-512 columns in 16-byte vectors, which run free in half the threads a row
    (forward_shape's _short_16bit_rows)."""
    if direct:
        return DIRECT_CTAS
    if bits != 16:
        return None
    if smooth:
        return 5 if n <= 32768 or cfg.peeled else 4
    if n == 1024 and cfg.rows == 4:
        return SHORT_ROW_CTAS
    if n <= 512:
        return None if _short_16bit_rows(n, cfg) else 2048 // cfg.threads
    if cfg.n > CHUNK and not cfg.peeled:
        return ONE_CHUNK_CTAS.get(cfg.vectors)
    return 6 if 2048 <= n <= CHUNK and not cfg.peeled else None


def forward_shape(logits, smooth: bool, fast: bool = False) -> tuple[RowConfig, bool, bool]:
    """(the CTA shape, whether chunks tile the row exactly, whether it is softmax's quack shape)
    of the forward over `logits`: that shape (softmax.direct_shape: 16-bit rows past 16384
    columns up to 131072, one row per cluster of 256-thread CTAs; _direct_log_sum_exp) without label
    smoothing (whose row sum it does not take); chunks (row_chunks.chunk_config) otherwise.
    `fast`: the device has fast memory (row_reduce.fast_memory).
    bf16 fraction of copy (the logits read once), chunks -> that shape, H100 (2026-11-27):
    20000 0.99 -> 1.04-1.05, 32768 1.00 -> 1.01-1.02, 65536 0.95 -> 1.01, 100000 0.90 -> 1.03,
    128256 0.97 -> 1.02-1.03, 131072 0.98 -> 1.01. Holding its part of the row in registers
    instead (80 registers, three CTAs per SM) lost to the chunks: 0.95 / 0.92 / 0.90 at 32768
    / 65536 / 131072; four CTAs (64 registers) measured the same as five within 1-4 %."""
    direct = None if smooth else softmax_direct_shape((logits,))
    if direct is not None:
        return direct, False, True
    cfg, exact = chunk_config(logits)
    n = logits.shape[1]
    if not smooth and cfg.vec == 8 and not cfg.peeled and CHUNK < n <= ONE_CHUNK:
        # One chunk over the row in 256 threads, not a CHUNK and a mostly empty one; past five
        # 16-byte vectors a thread bounded (ONE_CHUNK_CTAS). bf16 fraction of copy, chunks -> this
        # (quack 0.2.2), H200 / H100 (2026-11-27): 10000 0.74 -> 1.01 (1.03) / 0.94 -> 1.05 (1.04),
        # 12288 0.88 -> 1.03 (0.98) / 1.00 -> 1.03 (1.03), 14000 0.93 -> 0.97 (1.02) / 1.02 ->
        # 1.03 (1.04). Unbounded 256 threads read 0.96 at 12288 and 0.80 at 14000 (H200); 128
        # threads 1.02 and 0.94, bounded to four 1.00 and 1.03 (spilling 12 bytes at 14000). At
        # 16384 two chunks stay ahead (1.02 against 0.84-1.02 in one; softmax's shape starts past
        # it). On fast memory
        # past ONE_CHUNK_NARROW, 128 threads bounded to four CTAs (12 bytes spilled), H200 / H100
        # (2026-11-27, three runs each): 13000 0.93 -> 1.01, 14000 0.96 -> 1.02 (quack 1.03),
        # 14336 0.98 -> 1.00; on the H100 the same within 1 % (14336: 1.02-1.04 -> 1.01-1.02).
        threads = 128 if fast and n > ONE_CHUNK_NARROW else 256
        cfg = RowConfig(-(-n // (8 * threads)) * 8 * threads, 8, threads, threads)
        return cfg, cfg.n == n, False
    short_float32 = fast and logits.element_size() == 4 and n <= 256 and cfg.vectors == 2 and cfg.cluster == 1
    if not smooth and (short_float32 or logits.element_size() == 2 and _short_16bit_rows(n, cfg)):
        # Short rows in twice the vectors in half the threads a row. Fraction of copy (the logits
        # read once; 2026-11-27, three runs each):
        # - Float32 rows of up to 256 columns at 2 vectors a thread, fast memory only: H200 128 0.95
        #   -> 0.97, 256 0.97-0.99 -> 1.00-1.03 (quack 0.2.2 1.03); 512 / 1024 the same either way;
        #   the H100 lost 0.4-0.8 % at 128 / 256.
        # - 16-bit rows of 128-512 columns in 16-byte vectors, every card, free (forward_ctas; 55
        #   registers, bounded to 8 CTAs the same): bf16 H200 128 0.58 -> 0.77, 256 0.83 -> 0.89,
        #   512 0.85 -> 0.93; H100 128 0.75 -> 0.87, 256 0.95 and 512 0.98 the same within 1 %.
        #   Under the 16-CTA bound the shape spilled (256: 0.40); 1024 lost (0.98 -> 0.95).
        cfg = replace(cfg, threads_per_row=cfg.threads_per_row // 2)
    return cfg, exact, False


def _short_16bit_rows(n: int, cfg: RowConfig) -> bool:
    """Whether forward_shape halves the threads of a 16-bit row (and forward_ctas leaves it free)."""
    return 128 <= n <= 512 and cfg.vec == 8 and not cfg.peeled and cfg.cluster == 1


@cute.jit
def _backward(x, target, lse, dloss, dx, smoothing: cute.Float32, ignore_index: cute.Int32, cfg: Constexpr,
              exact: Constexpr, reduced: Constexpr, smooth: Constexpr):
    # A CTA per chunk of a block of rows (grid y: the chunks), not per block of rows: a row's
    # chunks need nothing from each other here, and 1024 rows of 131072 bf16 columns on CTAs
    # of 95 registers (five per SM) made 1.55 waves (0.87 of copy on an H200).
    blocks = launch_grid(x.shape[0], cfg)[0]
    _backward_kernel(x, target, lse, dloss, dx, smoothing, ignore_index, cfg, exact, reduced, smooth).launch(
        grid=(blocks, chunks(x, cfg), 1), block=(cfg.threads, 1, 1),
        min_blocks_per_mp=backward_ctas(cfg, smooth, x.element_type.width))


def backward_ctas(cfg: RowConfig, smooth: bool, bits: int) -> int | None:
    """CTAs per SM the backward's 256-thread chunks ask ptxas to fit (None: no bound):
    BACKWARD_SMOOTHING_CTAS with label smoothing over 16-bit rows, else BACKWARD_CTAS."""
    if cfg.threads != 256:
        return None
    return BACKWARD_SMOOTHING_CTAS if smooth and bits == 16 else BACKWARD_CTAS


def backward_shape(logits, dx) -> tuple[RowConfig, bool]:
    """(the CTA shape, whether chunks tile the row exactly) of the backward: rows of 4096 columns
    or more in 16-byte vectors take a 256-thread CTA per chunk of up to BACKWARD_CHUNK columns
    (quack's shape; up to 64 values a thread), rows of 1024 to 4095 256-thread CTAs of 64
    threads a row; the rest chunk_config's 128-thread CTAs over chunks of CHUNK. bf16 fraction
    of copy, chunk_config's -> this, 2026-11-27:

    | card | 1024 | 2048 | 4096 | 16384 | 32768 | 65536 | 131072 |
    |---|---|---|---|---|---|---|---|
    | H200 | 0.96 -> 0.98 | 0.94 -> 0.98 | 0.96 -> 0.98 | 0.94 -> 0.95 | 0.93 -> 0.94 | 0.90 -> 0.92 | 0.92 -> 0.93 |
    | H100 | 0.99 -> 0.99 | 0.99 -> 0.99 | 0.99 -> 0.99 | 0.97 -> 0.99 | 0.95 -> 0.98 | 0.95 -> 0.97 | 0.95 -> 0.96 |

    (At 1024 / 2048, 64 threads a row beat 32 and 128 in 128- and 256-thread CTAs on both cards;
    quack's 128-thread CTAs of 32 read 0.92 / 0.97 on the H200.)
    Float32 rows, chunk_config's -> this (chunks of 8192 columns in 256 threads read within 0.3 %
    of it), H100, 1024 / 4096 / 8192 / 32768 / 131072: 0.99 / 0.99 / 0.99 / 0.97 / 0.96 -> 1.00 /
    1.00 / 1.00 / 0.98 / 0.96 (quack 0.2.2 was 1-2 % ahead of the chunks there).

    With label smoothing it is bounded to BACKWARD_SMOOTHING_CTAS (H200 0.85-0.87 -> 0.92-0.96 of
    copy at 16384-131072, H100 0.95 -> 0.96-0.99; the 128-thread CTAs read 0.95-0.97 on the
    H100); without, a bound of four (62 registers for 77) lost 1 % past 16384 on both cards, and it
    asks for BACKWARD_CTAS (three) instead (BACKWARD_CHUNK's comment).
    Peeled rows (50257 columns) lost so (H200 0.88 -> 0.84, H100 0.93 -> 0.91) and keep theirs.
    Taking the target's (1 - e) dloss off in the thread that holds its column, before the one
    write, instead of the read-modify-write after the CTA's barrier, lost 0-2 % on the H200."""
    cfg, exact = chunk_config(logits, dx)
    n = logits.shape[1]
    if cfg.vec * logits.element_size() == 16 and not cfg.peeled and n >= 1024:
        # (shorter rows: 64 threads a row, four rows a CTA)
        cfg = RowConfig(min(n, BACKWARD_CHUNK), cfg.vec, 256 if n >= 4096 else 64, 256)
        exact = n % cfg.n == 0 and cfg.padding == 0
    return cfg, exact


def _check(logits: torch.Tensor, target: torch.Tensor) -> None:
    if logits.dim() != 2 or target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy takes logits (M, V) and targets (M,), got {tuple(logits.shape)} and "
                         f"{tuple(target.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"cross_entropy targets are int64 or int32, got {target.dtype}")


def _check_smoothing(label_smoothing: float) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")


def cross_entropy_forward(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                          label_smoothing: float = 0.0):
    """(loss per row, lse per row), both Float32."""
    _check(logits, target)
    _check_smoothing(label_smoothing)
    logits = logits if logits.stride(1) == 1 else logits.contiguous()   # rows read as vectors
    m = logits.shape[0]
    loss = torch.empty(m, dtype=torch.float32, device=logits.device)
    lse = torch.empty(m, dtype=torch.float32, device=logits.device)
    if m:
        cfg, exact, direct = forward_shape(logits, label_smoothing != 0.0, fast_memory(logits.device.index))
        _forward(dynamic_rows(logits), dynamic_rows(target), dynamic_rows(loss), dynamic_rows(lse), label_smoothing,
                 ignore_index, cfg, exact, label_smoothing != 0.0, direct)
    return loss, lse


def cross_entropy_backward(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, dloss: torch.Tensor,
                           ignore_index: int = -100, inplace: bool = False,
                           label_smoothing: float = 0.0) -> torch.Tensor:
    """dlogits from the saved lse and the loss gradient (per row (M,), or one value () for a
    reduced loss whose scale the caller folded in); over the logits when `inplace`."""
    _check(logits, target)
    _check_smoothing(label_smoothing)
    if logits.stride(1) != 1:
        if inplace:
            raise ValueError("cross_entropy_backward in place needs logits with unit column stride")
        logits = logits.contiguous()
    dx = logits if inplace else torch.empty_like(logits)
    if logits.shape[0]:
        cfg, exact = backward_shape(logits, dx)
        reduced = dloss.dim() == 0
        d = dloss.reshape(1).float() if reduced else dloss.float()
        _backward(dynamic_rows(logits), dynamic_rows(target), dynamic_rows(lse), d if reduced else dynamic_rows(d),
                  dynamic_rows(dx), label_smoothing, ignore_index, cfg, exact, reduced, label_smoothing != 0.0)
    return dx
