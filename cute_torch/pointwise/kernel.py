"""The `cute::pointwise` kernel, written in the DSL, and its builder.

The C++ op (csrc/torch/Pointwise.cpp) broadcasts the inputs, coalesces the dimensions of the
output and all inputs together (rank 1 for contiguous tensors), and chooses a Plan: the rank,
each input's innermost stride class ('1' contiguous, '0' broadcast, 's' any), the vector width
and the index width. Sizes and strides are run-time values, so one kernel serves every shape
of its plan. The host entry's arguments, in the order the C++ side packs them:

    out0_ptr .. outM_ptr, x0_ptr .. xN_ptr, numel, size[0..rank), then for each input the strides of
    dims 0..rank-2, and of dim rank-1 if its class is 's'      (all i32, or i64 when `wide`)

Each thread handles ITERS vectors of `vec` elements, strided by the block so that a warp's
accesses are contiguous; every output expression is computed from the same loaded elements;
with vec > 1 every contiguous input and the output move in 16-byte accesses (the C++ side
checks alignment and divisibility first). Whole tiles load everything
before computing; the last, partial tile goes element by element.

With `segments` S > 1 (cute::pointwise.foreach_into: one launch for S independent calls of the
same expressions, such as every parameter's optimizer update) the plan is rank 1 and the
arguments are

    per segment: out0_ptr .. outM_ptr, x0_ptr .. xN_ptr; then the numel of each segment

and the host entry adds, for the kernel, the end of each segment's blocks (a running sum of
its tiles).

Each block finds its segment by comparing its index with the ends (S selects of pointers, not
S copies of the code) and runs the one-segment code on that segment's tensors.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..dsl.control import range_constexpr
from ..dsl.jit import Constexpr, jit, kernel
from ..dsl.layout import Layout
from ..dsl.numeric import Int32, Int64, Uint32, Uint64, convert, where
from ..dsl import arch
from ..dsl.tensor import TensorArg, make_tensor, numeric_of_torch_dtype
from ..dsl.tensor_ssa import TensorSSA
from .dtypes import node_types
from .emit import compute_type, emit
from .expr import parse

THREADS = 256
ITERS = 2  # 4 held more registers and ran math-heavy expressions 4-5% slower (docs/torch.md)
SEPARATOR = "\x1e"  # joins the expressions of cute::pointwise.multi (OpCommon.h's kExprSeparator)


class Plan(NamedTuple):
    expr: str          # one expression per output, joined by SEPARATOR
    in_dtypes: tuple   # torch dtype names, e.g. "bfloat16"
    zero_dims: tuple   # which inputs are 0-dim (they promote like scalars)
    out_dtype: str     # per output, joined by ","
    rank: int
    inner: str         # per input: '1', '0' or 's'
    vec: int
    wide: bool
    segments: int = 1  # > 1: cute::pointwise.foreach_into's segmented kernel (rank 1)

    def dtypes(self) -> tuple:
        return tuple(getattr(torch, d) for d in self.in_dtypes)

    def exprs(self) -> list:
        return self.expr.split(SEPARATOR)

    def out_dtypes(self) -> list:
        return self.out_dtype.split(",")


# -- device code ------------------------------------------------------------------------------------

def _index_type(plan: Plan):
    return Uint64 if plan.wide else Uint32


class _Operands(NamedTuple):
    """The kernel's arguments unpacked, emitted once at its entry and used by both paths."""
    outs: tuple
    inputs: tuple
    n: object
    sizes: list
    strides: list   # per input, per dim: 0, 1 or a run-time value
    tid: object


def _unpack(plan: Plan, values: tuple) -> _Operands:
    m, k = len(plan.out_dtypes()), len(plan.in_dtypes)
    u = _index_type(plan)
    outs, inputs = values[:m], values[m:m + k]
    n = convert(values[m + k], u)
    rest = [convert(v, u) for v in values[m + k + 1:]]
    sizes, rest = rest[:plan.rank], rest[plan.rank:]
    strides = []
    for cls in plan.inner:
        outer = rest[:plan.rank - 1]
        rest = rest[plan.rank - 1:]
        if cls == "s":
            inner, rest = rest[0], rest[1:]
        else:
            inner = int(cls)
        strides.append(outer + [inner])
    return _Operands(outs, inputs, n, sizes, strides, convert(arch.thread_idx()[0], u))


def _segment(plan: Plan, values: tuple, tile: int) -> tuple:
    """The operands of the segment this block works on, and the block's first element in it."""
    m, k, count = len(plan.out_dtypes()), len(plan.in_dtypes), plan.segments
    u = _index_type(plan)
    per = m + k
    tensors = values[:count * per]
    numels = [convert(v, u) for v in values[count * per:count * per + count]]
    ends = [convert(v, u) for v in values[count * per + count:]]
    block = convert(arch.block_idx()[0], u)
    pointers, n, first = [t.iterator for t in tensors[:per]], numels[0], u(0)
    for s in range(1, count):   # the last segment whose first block is at or below this one
        here = block >= ends[s - 1]
        pointers = [where(here, t.iterator, p) for t, p in zip(tensors[s * per:(s + 1) * per], pointers)]
        n, first = where(here, numels[s], n), where(here, ends[s - 1], first)
    views = [make_tensor(p, t.layout) for p, t in zip(pointers, tensors)]
    strides = [[int(cls)] for cls in plan.inner]   # '1' contiguous, '0' one element for all
    ops = _Operands(tuple(views[:m]), tuple(views[m:]), n, [n], strides, convert(arch.thread_idx()[0], u))
    return ops, (block - first) * tile


def _offsets(plan: Plan, idx, sizes, strides) -> list:
    """Each input's element offset for output element `idx` (row-major over `sizes`)."""
    if plan.rank == 1:
        return [s if isinstance(s, int) and s == 0 else idx if isinstance(s, int) else idx * s
                for (s,) in strides]
    coords, rest = [], idx
    for d in range(plan.rank - 1, 0, -1):
        coords.append(rest % sizes[d])
        rest = rest // sizes[d]
    coords.append(rest)
    coords.reverse()
    result = []
    for per_dim in strides:
        total = 0
        for c, s in zip(coords, per_dim):
            if not (isinstance(s, int) and s == 0):
                total = total + (c if isinstance(s, int) else c * s)
        result.append(total)
    return result


def _view(tensor, offset, count: int):
    """`count` contiguous elements at `offset`, known to be a multiple of `count`."""
    return tensor.with_layout(Layout(count, 1) if count > 1 else Layout(1, 0), offset, count)


def _element(tensor, offset, count: int):
    """`count` elements at `offset` (a TensorSSA), or one (a scalar) for count 1."""
    view = _view(tensor, offset, count)
    return view.load() if count > 1 else view[0]


def _outputs(plan: Plan) -> list:
    """Per output: (tree, node types, element type)."""
    return [(parse(e), node_types(e, plan.dtypes(), plan.zero_dims), numeric_of_torch_dtype(getattr(torch, d)))
            for e, d in zip(plan.exprs(), plan.out_dtypes())]


def _compute(plan: Plan, columns: list, count: int, types: dict, tree) -> list:
    """The expression for `count` elements; columns[i] is input i's TensorSSA or scalar."""
    in_types = [compute_type(d) for d in plan.dtypes()]
    results = []
    for j in range(count):
        env = []
        for column, t in zip(columns, in_types):
            value = column[j] if isinstance(column, TensorSSA) else column
            env.append(convert(value, t))
        results.append(emit(tree, env, types))
    return results


def _vector_tile(plan: Plan, ops: _Operands, start):
    outputs = _outputs(plan)
    loaded = []
    for it in range(ITERS):  # all loads first: ITERS x inputs accesses in flight
        idx = start + (ops.tid + it * THREADS) * plan.vec
        offsets = _offsets(plan, idx, ops.sizes, ops.strides)
        loaded.append((idx, [_element(x, off, 1 if cls == "0" else plan.vec)
                             for x, off, cls in zip(ops.inputs, offsets, plan.inner)]))
    for idx, columns in loaded:
        for out, (tree, types, out_t) in zip(ops.outs, outputs):
            results = _compute(plan, columns, plan.vec, types, tree)
            _view(out, idx, plan.vec).store(
                TensorSSA.from_elements([convert(r, out_t) for r in results], out_t, plan.vec))


def _tail_index(plan: Plan, ops: _Operands, start, e: int):
    it, j = divmod(e, plan.vec)
    return start + (ops.tid + it * THREADS) * plan.vec + j


def _tail_element(plan: Plan, ops: _Operands, idx):
    offsets = _offsets(plan, idx, ops.sizes, ops.strides)
    columns = [_element(x, off, 1) for x, off in zip(ops.inputs, offsets)]
    for out, (tree, types, _) in zip(ops.outs, _outputs(plan)):
        (result,) = _compute(plan, columns, 1, types, tree)
        out[idx] = result


def _operands(plan: Plan, values: tuple, tile: int) -> tuple:
    """The block's operands and its first element."""
    if plan.segments > 1:
        return _segment(plan, values, tile)
    return _unpack(plan, values), convert(arch.block_idx()[0], _index_type(plan)) * tile


@kernel
def _pointwise_kernel(plan: Constexpr, *values):
    tile = THREADS * ITERS * plan.vec
    ops, start = _operands(plan, values, tile)
    if start + tile <= ops.n:
        _vector_tile(plan, ops, start)
    else:
        for e in range_constexpr(ITERS * plan.vec):
            idx = _tail_index(plan, ops, start, e)
            if idx < ops.n:
                _tail_element(plan, ops, idx)


@jit
def _pointwise_host(plan: Constexpr, *values):
    tile = THREADS * ITERS * plan.vec
    if plan.segments > 1:
        values = _with_segment_ends(values, plan.segments, tile)
        blocks = values[-1]   # the last segment's end
    else:
        blocks = (values[len(plan.out_dtypes()) + len(plan.in_dtypes)] + (tile - 1)) // tile
    _pointwise_kernel(plan, *values).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))


def _with_segment_ends(values: tuple, segments: int, tile: int) -> tuple:
    """The host's arguments (tensors, then each segment's numel) and the end of each segment's
    blocks, a running sum of its tiles."""
    ends, total = [], 0
    for n in values[-segments:]:
        total = total + (n + (tile - 1)) // tile
        ends.append(total)
    return (*values, *ends)


# -- building -------------------------------------------------------------------------------------

def _operand(dtype_name: str, plan: Plan, device: int) -> TensorArg:
    dtype = numeric_of_torch_dtype(getattr(torch, dtype_name))
    width = torch.empty((), dtype=getattr(torch, dtype_name)).element_size()
    return TensorArg.describe(dtype, (1,), (1,), 16 if plan.vec > 1 else width, device, plan.wide)


def stand_ins(plan: Plan, device: int) -> list:
    """Arguments with the plan's kinds and types (values are irrelevant: only keys matter)."""
    index = Int64 if plan.wide else Int32
    operands = [_operand(d, plan, device) for d in plan.out_dtypes() + list(plan.in_dtypes)]
    if plan.segments > 1:   # rank 1, no strides: each segment's numel
        return operands * plan.segments + [index(1)] * plan.segments
    strides = sum((plan.rank - 1) + (cls == "s") for cls in plan.inner)
    return operands + [index(1)] * (1 + plan.rank + strides)


def build(plan: Plan, device: int):
    """Compiles (or loads from the disk cache) the kernel of `plan` for `device`; returns
    (host entry address, runtime artifact address, the object that keeps both alive)."""
    compiled = _pointwise_host.compile(plan, *stand_ins(plan, device))
    entry = compiled.host_entry()
    return entry.address, entry.runtime, compiled

