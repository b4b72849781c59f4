"""What the Hopper and Ampere GEMMs of the library share: the epilogue language (expressions
over the accumulator `acc`, or a gated pair `gate` and `up`, and extra inputs x0..xN), the
column pairs of gated GEMMs, the order in which tiles are visited, the canonical swizzled shared
layouts, and the host's normalization and checks of a problem (shapes, devices, broadcasts).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import torch

import cute_torch as cute
from cute_torch.pointwise.dtypes import node_types
from cute_torch.pointwise.emit import compute_type, emit
from cute_torch.pointwise.expr import ExpressionError, parse

MAX_OUTPUTS = 4
GROUP_M = 8                      # tile rows per rasterization group
_GATED = re.compile(r"\b(gate|up)\b")
_CALL = re.compile(r"\b[A-Za-z_]\w*\s*\(")


def swizzled(rows: int, cols: int, stages: int | None = None, cols_contiguous: bool = True, elem_bytes: int = 2):
    """rows x cols (x stages) of 16-bit elements (or `elem_bytes`), swizzled: the canonical wgmma
    and TMA layouts. With `cols_contiguous` (a K-major operand, or an output box) rows of up to
    128 bytes, swizzled by their width (64 16-bit or 32 fp32 columns: 128 bytes, Sw<3,4,3>; a
    32-column 16-bit box: 64 bytes, Sw<2,4,3>; a 16-column one: 32 bytes, Sw<1,4,3>); else (an
    MN-major operand) columns of 64 rows, tiled down the columns first so that each 64-row slab
    is one TMA box."""
    shape = (rows, cols) if stages is None else (rows, cols, stages)
    if cols_contiguous:
        width = min(cols, 128 // elem_bytes)
        inner = cute.make_layout((8, width), stride=(width, 1))
        swizzle = cute.make_swizzle({128: 3, 64: 2, 32: 1}[width * elem_bytes], 4, 3)
        return cute.tile_to_shape(cute.make_composed_layout(swizzle, 0, inner), shape)
    inner = cute.make_layout((64, 8), stride=(1, 64))
    order = (1, 0) if stages is None else (1, 0, 2)
    return cute.tile_to_shape(cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, inner), shape, order)


def tile_of(tile_id, tiles_m, tiles_n, along_n: bool = False):
    """(m, n, l) of the tile_id-th tile: batch by batch, and within a batch in grouped order,
    GROUP_M tile rows at a time, column by column within a group (or the same with rows and
    columns exchanged, `along_n`)."""
    if along_n:
        n, m, l = tile_of(tile_id, tiles_n, tiles_m)
        return m, n, l
    per_batch = tiles_m * tiles_n
    l, t = tile_id // per_batch, tile_id % per_batch
    per_group = GROUP_M * tiles_n
    first_m = (t // per_group) * GROUP_M
    rows = cute.math.min(tiles_m - first_m, GROUP_M)
    in_group = t % per_group
    return first_m + in_group % rows, in_group // rows, l


def is_gated(epilogues) -> bool:
    """Whether the epilogues are gated: expressions over `gate` and `up` (the two accumulators of
    a column pair, see below) instead of `acc`. Every epilogue of a GEMM is, or none."""
    flags = [isinstance(e, str) and _GATED.search(e) is not None for e in epilogues]
    if any(flags) and not all(flags):
        raise ExpressionError("a gated GEMM's epilogues are all expressions over gate and up (each output column "
                              f"combines one column pair), got {epilogues}")
    return any(flags)


def calls_function(epilogues) -> bool:
    """Whether an expression epilogue calls a function: gelu_tanh(acc + x0) does, acc * 0.5
    does not (Gemm.cpp's callsFunction)."""
    return any(isinstance(e, str) and _CALL.search(e) is not None for e in epilogues)


def accumulators_as_inputs(expr: str, n: int) -> str:
    """`expr` over the pointwise language's inputs x0..: `acc` becomes x{n}, or `gate` and `up`
    become x{n} and x{n+1}, padded to the names' lengths where that fits so that error positions
    stay right."""
    if _GATED.search(expr) is None:
        return re.sub(r"\bacc\b", f"x{n}".ljust(3), expr)
    return re.sub(r"\bup\b", f"x{n + 1}", re.sub(r"\bgate\b", f"x{n}".ljust(4), expr))


def split_gated(acc: torch.Tensor) -> tuple:
    """The inverse of interleave_gated along the last dim: (gate, up) views of accumulators
    whose columns come in groups of 8 gate then 8 up."""
    groups = acc.unflatten(-1, (acc.shape[-1] // 16, 2, 8))
    return tuple(groups.select(-2, h).flatten(-2) for h in (0, 1))


def interleave_gated(gate: torch.Tensor, up: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The B operand (or weight) of a gated GEMM from its gate and up halves: along `dim` (the
    output features: B's columns, -1, or a linear weight's rows, 0), groups of 8 gate features
    then the same 8 up features. A gated epilogue then sees each output feature's gate and up
    accumulators in one thread (wgmma's accumulator layout keeps 8 columns apart in the same
    registers' pairs), e.g. gemm(a, interleave_gated(wg, wu), c, "silu(gate) * up")."""
    if gate.shape != up.shape or gate.shape[dim] % 8:
        raise ValueError(f"interleave_gated: gate {tuple(gate.shape)} and up {tuple(up.shape)} must have one shape "
                         f"with a multiple of 8 features along dim {dim}")
    dim = dim % gate.dim()
    groups = gate.shape[:dim] + (gate.shape[dim] // 8, 1, 8) + gate.shape[dim + 1:]
    pairs = torch.cat([gate.reshape(groups), up.reshape(groups)], dim=dim + 1)
    return pairs.reshape(gate.shape[:dim] + (2 * gate.shape[dim],) + gate.shape[dim + 1:])


@functools.lru_cache(maxsize=256)
def expression(expr: str, dtypes: tuple):
    """(tree, node types) of an epilogue in the pointwise language over `acc` (the fp32
    accumulator), or `gate` and `up` (a gated GEMM's pair), and x0..xN (the extra inputs): the
    accumulators become the inputs after the others. Errors show the user's text and position."""
    n = len(dtypes)
    for stray in re.finditer(r"\bx(\d+)\b", expr):
        if int(stray.group(1)) >= n:
            has = {0: "no inputs", 1: "one input, x0"}.get(n, f"{n} inputs, x0..x{n - 1}")
            raise ExpressionError(f"{stray.group(0)} is not an input: the epilogue has acc and {has}, at position "
                                  f"{stray.start()}:\n  {expr}\n  {' ' * stray.start()}^")
    gated = _GATED.search(expr) is not None
    if gated and (at := re.search(r"\bacc\b", expr)):
        raise ExpressionError(f"a gated epilogue reads gate and up, not acc, at position {at.start()}:\n  {expr}\n  "
                              f"{' ' * at.start()}^")
    renamed = accumulators_as_inputs(expr, n)
    accumulators = 2 if gated else 1
    names = tuple(getattr(torch, d) for d in dtypes) + (torch.float32,) * accumulators
    try:
        return parse(renamed, n + accumulators), node_types(renamed, names, (False,) * (n + accumulators))
    except ExpressionError as e:
        raise ExpressionError(str(e).replace(renamed, expr)) from None


def epilogue_values(epilogues: tuple, accs: list, elements: list, input_dtypes: tuple, out_types: tuple) -> list:
    """One output element of each epilogue, in that output's type, from `accs`: one accumulator
    ([gate, up] for a gated GEMM). An epilogue is None, a DSL function of one accumulator, or an
    expression string over the accumulator(s) and the inputs (`elements` holds each input's
    element at this output element, loaded once for all outputs)."""
    env = [x.to(compute_type(getattr(torch, d))) for x, d in zip(elements, input_dtypes)] + list(accs)
    values = []
    for epilogue, out_type in zip(epilogues, out_types):
        if epilogue is None:
            values.append(accs[0].to(out_type))
        elif not isinstance(epilogue, str):
            values.append(epilogue(accs[0]).to(out_type))
        else:
            tree, types = expression(epilogue, input_dtypes)
            values.append(emit(tree, env, types, out_type.width == 16).to(out_type))
    return values


def check_shapes(a: torch.Tensor, b: torch.Tensor, outs: tuple, inputs, gated: bool = False,
                 m_major_outputs: bool = False) -> None:
    """Errors naming the operand for shapes that do not make a GEMM (a gated one: N / 2 output
    columns from N accumulator columns in interleaved groups of 8, so N a multiple of 16);
    `m_major_outputs`: 16-bit outputs may have M contiguous instead of N (the Hopper kernel's)."""
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError(f"gemm: a and b are (M, K) / (L, M, K) and (K, N) / (L, K, N), got a {tuple(a.shape)} "
                         f"and b {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"gemm: a {tuple(a.shape)} and b {tuple(b.shape)} disagree on K ({a.shape[-1]} vs "
                         f"{b.shape[-2]})")
    batch = [t.shape[0] for t in (a, b) if t.dim() == 3]
    if len(set(batch)) > 1:
        raise ValueError(f"gemm: a {tuple(a.shape)} and b {tuple(b.shape)} have different batch sizes")
    if gated and b.shape[-1] % 16:
        raise ValueError(f"gated gemm: b {tuple(b.shape)} has {b.shape[-1]} columns, not a multiple of 16 (groups of "
                         "8 gate and 8 up columns: interleave_gated)")
    want = (*batch[:1], a.shape[-2], b.shape[-1] // 2 if gated else b.shape[-1])
    for i, out in enumerate(outs):
        if tuple(out.shape) != want:
            raise ValueError(f"gemm: output {i} is {tuple(out.shape)}; a {tuple(a.shape)} @ b {tuple(b.shape)} "
                             f"is {want}")
        if not n_contiguous(out) and not (m_major_outputs and out.stride(-2) == 1 and out.element_size() == 2):
            also = " (or M, for 16-bit outputs)" if m_major_outputs else ""
            raise ValueError(f"gemm: output {i} (strides {out.stride()}) must have N contiguous{also}")
    for t in (a, b, *outs, *inputs):
        if t.device != a.device:
            raise ValueError(f"gemm: every tensor must be on {a.device}, got one on {t.device}")
    for i, x in enumerate(inputs):
        try:
            x.expand(want)
        except RuntimeError:
            raise ValueError(f"gemm: input x{i} of shape {tuple(x.shape)} does not broadcast to the output's "
                             f"{want}") from None


def n_contiguous(out: torch.Tensor) -> bool:
    """Whether an output (M, N[, L]) has N contiguous; else, where check_shapes lets it, M (a
    swapped problem's: gemm_sm90.transposes)."""
    return out.stride(-1) == 1 or out.shape[-1] == 1


def k_major_view(t) -> bool:
    """Whether a kernel's (MN, K) operand view has K contiguous (else MN is)."""
    return isinstance(t.stride[1], int) and t.stride[1] == 1


class Problem(NamedTuple):
    """One GEMM call in the kernels' terms: `views` are a (M, K[, L]) and b as (N, K[, L]) (no
    copies: either may be K- or MN-major), `tensors` the outputs then the inputs broadcast to
    (M, N[, L]), `dtypes` the inputs' dtype names."""
    outs: tuple
    epilogues: tuple
    gated: bool
    batched: bool
    views: tuple
    tensors: list
    dtypes: tuple


def problem(a: torch.Tensor, b: torch.Tensor, c, epilogue=None, inputs=(), m_major_outputs: bool = False) -> Problem:
    """Checks and normalizes gemm(a, b, c, epilogue, inputs): a (M, K) or (L, M, K), b (K, N) or
    (L, K, N), c one output or a tuple of up to MAX_OUTPUTS with one epilogue each."""
    outs = tuple(c) if isinstance(c, (tuple, list)) else (c,)
    epilogues = tuple(epilogue) if isinstance(epilogue, (tuple, list)) else (epilogue,)
    if len(epilogues) != len(outs) or not 1 <= len(outs) <= MAX_OUTPUTS:
        raise ValueError(f"gemm: {len(outs)} outputs and {len(epilogues)} epilogues; give one epilogue per "
                         f"output, 1 to {MAX_OUTPUTS} of them")
    if inputs and not any(isinstance(e, str) for e in epilogues):
        raise ValueError("gemm: inputs= go with an expression epilogue over acc and x0..xN")
    gated = is_gated(epilogues)
    check_shapes(a, b, outs, inputs, gated, m_major_outputs)
    batched = a.dim() == 3 or b.dim() == 3
    if batched:
        limit = 1 << 19  # a three-mode coordinate tensor packs each of M/N and K in 20 bits
        if max(a.shape[-2], a.shape[-1], b.shape[-1]) >= limit:
            raise ValueError(f"batched gemm: M, N and K must be below {limit}, got a {tuple(a.shape)}, b "
                             f"{tuple(b.shape)}")
    shape = outs[0].shape

    def mkl(t):  # (L, rows, cols) -> a (rows, cols, L) view; (rows, cols) stays
        if not batched:
            return t
        return (t if t.dim() == 3 else t.unsqueeze(0).expand(shape[0], *t.shape)).permute(1, 2, 0)
    views = (mkl(a), mkl(b.transpose(-1, -2)))
    tensors = [mkl(out) for out in outs] + [mkl(x.expand(shape)) for x in inputs]
    dtypes = tuple(str(x.dtype).removeprefix("torch.") for x in inputs)
    return Problem(outs, epilogues, gated, batched, views, tensors, dtypes)
