"""The Python side of a row op's cache miss (csrc/torch/RowOps.cpp): compile the row kernel
(kernels/softmax.py, norms.py, cross_entropy.py, column_sums.py) for the operands' static
description and say how the C++ side fills its arguments.

C++ describes each operand as "kind;dtype;n;row_stride;alignment;wide", or "-" for an absent
one. Kinds: "r" rows (M, n), M a run-time value, the row stride compile-time, as
kernels/row_reduce.dynamic_rows makes; "v" a per-row vector (M,); "c" a per-column vector (n,);
"s" one element. The kernels' own configuration functions pick the CTA shape from these
descriptions as they would from the tensors (the alignment stands in for the address).

The result is (host entry, runtime, rows per CTA group, threads per CTA, CTAs per group (the
cluster), groups that run at once (the persistent grids of the norm backward, the pipelined walks
of LayerNorm's forward and softmax's forward and backward, the column sum's slabs;
0 for the others), *recipe, compiled function):
the recipe lists, per argument slot of the compiled host function, kind * 1000 + index, kinds
0 operand `index`'s data pointer, 1 its number of rows, 4 float scalar `index` (as float32),
5 int scalar `index`.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ..dsl.tensor import TensorArg, numeric_of_torch_dtype

POINTER, ROWS, FLOAT, INT = 0, 1, 4, 5


class _Described:
    """An operand as the kernels' configuration functions see a tensor."""

    def __init__(self, text: str, device: int):
        kind, dtype, n, stride, alignment, wide = text.split(";")
        self.kind, self.dtype = kind, getattr(torch, dtype)
        self.n, self.row_stride, self.alignment, self.wide = int(n), int(stride), int(alignment), wide == "1"
        self.shape = (2, self.n) if kind == "r" else (2,) if kind == "v" else (self.n,) if kind == "c" else (1,)
        self.device = device

    def dim(self) -> int:
        return len(self.shape)

    def stride(self, d: int) -> int:
        return self.row_stride if self.kind == "r" and d == 0 else 1

    def data_ptr(self) -> int:
        return self.alignment

    def element_size(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def arg(self) -> TensorArg:
        numeric = numeric_of_torch_dtype(self.dtype)
        if self.kind == "r":
            arg = TensorArg.describe(numeric, (1, self.n), (self.row_stride, 1), self.alignment, self.device, self.wide)
            return arg.mark_compact_shape_dynamic(0, stride_order=(1, 0))
        if self.kind == "v":
            return TensorArg.describe(numeric, (1,), (1,), self.alignment, self.device, False) \
                .mark_compact_shape_dynamic(0)
        return TensorArg.describe(numeric, self.shape, (1,), self.alignment, self.device, False)


def _operands(descriptions: str, device: int) -> list:
    return [None if text == "-" else _Described(text, device) for text in descriptions.split("|")]


def _recipe(operands: list, floats: int = 0, ints: int = 0) -> list[int]:
    """Slots in the host ABI's order: each present operand's pointer (then its rows when M is a
    run-time value), then the scalars, float ones first, as the kernels' hosts take them."""
    slots = []
    for i, op in enumerate(operands):
        if op is not None:
            slots.append(POINTER * 1000 + i)
            if op.kind in ("r", "v"):
                slots.append(ROWS * 1000 + i)
    return slots + [FLOAT * 1000 + j for j in range(floats)] + [INT * 1000 + j for j in range(ints)]


def build(op: str, descriptions: str, flags: str, device: int, arch: str | None = None):
    """See the module docstring. `flags` is a string of 0/1 (the op's booleans); `arch` (tests
    without a GPU) overrides the device's."""
    from ..kernels import cross_entropy, norm_shapes, norms, softmax
    from ..kernels.row_chunks import chunk_config
    from ..kernels.row_reduce import fast_memory, resident_groups

    ops = _operands(descriptions, device)
    resident = 0                        # co-resident groups of a persistent grid (0: not asked, or none)
    args = [None if o is None else o.arg() for o in ops]
    bits = [f == "1" for f in flags]
    options = {"arch": arch} if arch else None
    if op in ("softmax", "softmax_backward"):
        log = bits[0]
        present = [o for o in ops if o is not None]
        long = softmax.takes_chunks(*present)
        if op == "softmax":
            host = softmax._long_forward if long else softmax._forward
        else:
            host = softmax._long_backward if long else softmax._backward
        grouped = not long                          # (its groups: a persistent walk's grid; its walk)
        if long:
            (cfg, *exact), walk = chunk_config(*present), []
        else:
            shape = softmax.forward_shape if op == "softmax" else softmax.backward_shape
            cfg, chosen = shape(tuple(args), tuple(present), log, device, options)
            exact, walk = [], [chosen]
        compiled = host.compile(*args, *([1] if grouped else []), cfg, *exact, log, *walk, options=options)
        recipe = _recipe(ops, ints=int(grouped))
        if arch is None and walk in (["persistent"], [True]):
            resident = resident_groups(compiled, cfg, device)
    elif op == "layer_norm":            # x, residual, weight, bias, y, residual_out, rstd, mean
        cfg, walk, ctas = norms.forward_shape((*args, 1e-5), ops[:6], bits[0], device, options)
        compiled = norms._forward.compile(*args, 1e-5, 1, cfg, bits[0], walk, ctas, options=options)
        recipe = _recipe(ops, floats=1, ints=1)
        pipelined = norm_shapes.pipelined_forward(cfg, walk, 8 * ops[0].element_size(), bits[0], ops[1] is not None)
        if arch is None and pipelined:
            resident = resident_groups(compiled, cfg, device)
    elif op == "layer_norm_backward":   # x, weight, dy, rstd, mean, dx, dweight and dbias partials, dweight, dbias
        cfg = norms.backward_shape(ops[0].n, tuple(args), (ops[0], ops[1], ops[2], ops[5]), ops[4] is not None, device,
                                   options)
        compiled = norms._backward.compile(*args, 1, cfg, options=options)
        recipe = _recipe(ops, ints=1)
        if arch is None:    # (tests without a GPU name the arch: nothing to ask then)
            sizes = tuple(0 if o is None else o.element_size() for o in (ops[0], ops[2], ops[1]))
            resident = resident_groups(compiled, cfg, device, norm_shapes.backward_ring(cfg, *sizes)[1])
    elif op == "cross_entropy":          # logits, target, loss, lse; flags: label smoothing
        cfg, exact, direct = cross_entropy.forward_shape(ops[0], bits[0], fast_memory(device))
        compiled = cross_entropy._forward.compile(*args, 0.0, -100, cfg, exact, bits[0], direct, options=options)
        recipe = _recipe(ops, floats=1, ints=1)
    elif op == "cross_entropy_backward":  # logits, target, lse, dloss, dlogits; flags: label smoothing
        cfg, exact = cross_entropy.backward_shape(ops[0], ops[4])
        compiled = cross_entropy._backward.compile(*args, 0.0, -100, cfg, exact, ops[3].kind == "s", bits[0],
                                                   options=options)
        recipe = _recipe(ops, floats=1, ints=1)
    elif op == "column_sum":            # x, the partial rows, out
        from ..kernels import column_sums
        x = ops[0]
        vec = column_sums.vector_width(x.n, x.row_stride, x.alignment, x.element_size())
        compiled = column_sums._column_sum.compile(*args, 1, vec, options=options)
        recipe = _recipe(ops, ints=1)
        if arch is None:
            resident = column_sums.resident_slabs(compiled, x.n, vec, device)
        cfg = SimpleNamespace(rows=column_sums.MIN_SLAB_ROWS, threads=32 * column_sums.SUM_WARPS, cluster=1)
    else:
        raise ValueError(f"unknown row op {op!r}")
    entry = compiled.host_entry()
    return (entry.address, entry.runtime, cfg.rows, cfg.threads, cfg.cluster, resident, *recipe, compiled)
