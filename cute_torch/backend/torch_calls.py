"""Row reductions that Dynamo's graph still holds as single calls become the row ops before
AOTAutograd traces the graph: their autograd formulas (csrc/torch/RowAutograd.cpp) then give
the backward graph its backward ops, where after AOTAutograd only a decomposition into
pointwise ops and sums would be left to match.

    torch.rms_norm(x, [N], w, eps)             (F.rms_norm, nn.RMSNorm)  -> row_ops.rms_norm
    F.cross_entropy(logits, target, ...)       (nn.CrossEntropyLoss)     -> row_ops.cross_entropy_loss

    x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) [* w]                  -> row_ops.rms_norm
      (written out, as Hugging Face's LlamaRMSNorm does: casts to float32 and back around it,
       x * x or x ** 2 for the square, the weight on either side)

Conditions: as backend/rows.py's (the last dim, N <= 262144 for the norm, float dtypes, a device
type the options allow); the written-out RMSNorm's result in x's dtype (the kernel rounds once,
where the written form may round before the weight); cross-entropy with (M, V) logits, (M,)
integer targets and no class weights (label smoothing, a constant, goes to the kernel).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from ..ops import row_ops
from .fusion import fake_value
from .options import Options
from .rows import FLOATS, _rows_ok

RMS_NORM = (torch.rms_norm, F.rms_norm)


def _argument(node: fx.Node, index: int, name: str, default):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _rms_norm(graph: fx.Graph, node: fx.Node, options: Options):
    x, shape = node.args[0], _argument(node, 1, "normalized_shape", None)
    weight, eps = _argument(node, 2, "weight", None), _argument(node, 3, "eps", None)
    if shape is None or len(shape) != 1 or not _rows_ok(x, -1, options):
        return None
    if eps is None:
        eps = row_ops.DEFAULT_RMS_EPS
    if not isinstance(eps, float) or (weight is not None and fake_value(weight) is None):
        return None
    return graph.call_function(row_ops.rms_norm, (x, weight, eps))


def _cross_entropy(graph: fx.Graph, node: fx.Node, options: Options):
    logits, target = node.args[0], _argument(node, 1, "target", None)
    lv, tv = fake_value(logits), fake_value(target)
    if lv is None or tv is None or lv.dim() != 2 or tv.dim() != 1 or tv.is_floating_point():
        return None
    if lv.dtype not in FLOATS or lv.device.type not in options.devices:
        return None
    smoothing = _argument(node, 7, "label_smoothing", 0.0)
    if _argument(node, 2, "weight", None) is not None or not isinstance(smoothing, (int, float)):
        return None
    if _argument(node, 3, "size_average", None) is not None or _argument(node, 5, "reduce", None) is not None:
        return None
    ignore_index, reduction = _argument(node, 4, "ignore_index", -100), _argument(node, 6, "reduction", "mean")
    if not isinstance(ignore_index, int) or reduction not in ("none", "sum", "mean"):
        return None
    return graph.call_function(row_ops.cross_entropy_loss, (logits, target, ignore_index, reduction,
                                                            float(smoothing)))


# -- a written-out RMSNorm ------------------------------------------------------------------------------

MUL = (operator.mul, torch.mul)
CASTS = ("to", "float", "type_as")


def _is(node, functions=(), methods=()) -> bool:
    if not isinstance(node, fx.Node):
        return False
    return (node.op == "call_function" and node.target in functions) or (
        node.op == "call_method" and node.target in methods)


def _uncast(node):
    """The value under a chain of dtype casts (x.float(), x.to(torch.float32), ...)."""
    while _is(node, methods=CASTS) and fake_value(node) is not None and fake_value(node.args[0]) is not None \
            and fake_value(node).shape == fake_value(node.args[0]).shape:
        node = node.args[0]
    return node


def _squared(node):
    """x when `node` is x ** 2 / x.pow(2) / x * x / torch.square(x), else None."""
    if _is(node, (operator.pow, torch.pow), ("pow",)) and len(node.args) == 2 and node.args[1] == 2:
        return node.args[0]
    if _is(node, MUL, ("mul",)) and node.args[0] is node.args[1]:
        return node.args[0]
    if _is(node, (torch.square,), ("square",)):
        return node.args[0]
    return None


def _mean_last(node):
    """x when `node` is x.mean(-1, keepdim=True) (or torch.mean, dim=[-1]), else None."""
    if not _is(node, (torch.mean,), ("mean",)):
        return None
    dim = _argument(node, 1, "dim", None)
    dim = dim[0] if isinstance(dim, (list, tuple)) and len(dim) == 1 else dim
    x = fake_value(node.args[0])
    if x is None or not _argument(node, 2, "keepdim", False) or dim not in (-1, x.dim() - 1):
        return None
    return node.args[0]


def _rsqrt_of_mean_square(node):
    """(x, eps) when `node` is rsqrt(mean(x^2, -1, keepdim) + eps), x under its casts."""
    if not _is(node, (torch.rsqrt,), ("rsqrt",)):
        return None
    total = node.args[0]
    if not _is(total, (operator.add, torch.add), ("add",)) or len(total.args) != 2:
        return None
    mean, eps = total.args if isinstance(total.args[1], float) else total.args[::-1]
    if not isinstance(eps, float):
        return None
    square = _mean_last(mean)
    x = _squared(square) if square is not None else None
    return None if x is None else (_uncast(x), eps)


def _computed_from(last: fx.Node, stops: set) -> set:
    """The calls `last` is computed from, walking back no further than `stops`."""
    found, stack = set(), [last]
    while stack:
        node = stack.pop()
        if node in stops or node in found or node.op not in ("call_function", "call_method"):
            continue
        found.add(node)
        stack.extend(node.all_input_nodes)
    return found


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _written_rms_norm(graph: fx.Graph, rsqrt: fx.Node, options: Options):
    """(last node of the written-out RMSNorm around `rsqrt`, its replacement) or None."""
    found = _rsqrt_of_mean_square(rsqrt)
    if found is None:
        return None
    x, eps = found
    scaled = _only_user(rsqrt)
    if not _is(scaled, MUL, ("mul",)):
        return None
    if _uncast(scaled.args[0] if scaled.args[1] is rsqrt else scaled.args[1]) is not x:
        return None
    xv = fake_value(x)
    if xv is None or not _rows_ok(x, -1, options):
        return None
    last, weight = scaled, None
    while (user := _only_user(last)) is not None and _is(user, methods=CASTS):
        last = user
    user = _only_user(last)
    if _is(user, MUL, ("mul",)) and len(user.args) == 2:
        other = user.args[0] if user.args[1] is last else user.args[1]
        ov = fake_value(other)
        if ov is not None and tuple(ov.shape) == (xv.shape[-1],) and ov.dtype in FLOATS:
            last, weight = user, other
    out = fake_value(last)
    if out is None or out.dtype != xv.dtype or out.shape != xv.shape:
        return None
    with graph.inserting_before(last):
        new = graph.call_function(row_ops.rms_norm, (x, weight, eps))
    return last, new, _computed_from(last, {x, weight})


def replace_calls(gm: fx.GraphModule, options: Options) -> list:
    """Rewrites Dynamo's graph in place; returns descriptions of the calls replaced."""
    if not options.rows:
        return []
    done = []
    for node in list(gm.graph.nodes):
        if node.op not in ("call_function", "call_method"):
            continue
        if _is(node, (torch.rsqrt,), ("rsqrt",)):
            found = _written_rms_norm(gm.graph, node, options)
            if found is not None:
                last, new, chain = found
                new.meta.update(last.meta)
                last.replace_all_uses_with(new)
                done.append(f"{last.name} (written-out RMSNorm)")
                _erase_unused(gm.graph, chain)
            continue
        make = _rms_norm if node.target in RMS_NORM else _cross_entropy if node.target is F.cross_entropy else None
        if make is None:
            continue
        with gm.graph.inserting_before(node):
            new = make(gm.graph, node, options)
        if new is None:
            continue
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        done.append(f"{node.name} ({getattr(node.target, '__name__', node.target)})")
    if done:
        gm.graph.lint()
        gm.recompile()
    return done


def _erase_unused(graph: fx.Graph, nodes) -> None:
    """Erases the matched nodes nothing reads any more, readers first. (Not the graph's dead
    code elimination: Dynamo's graph holds in-place calls that it would take for dead.)"""
    for node in sorted(nodes, key=lambda n: -_position(graph, n)):
        if not node.users and node.op in ("call_function", "call_method"):
            graph.erase_node(node)


def _position(graph: fx.Graph, node: fx.Node) -> int:
    for i, n in enumerate(graph.nodes):
        if n is node:
            return i
    return -1
