"""Row reductions: softmax, log_softmax and LayerNorm nodes of an AOTAutograd graph become the
row kernels' ops (cute_torch/ops/row_ops.py), forward and backward.

    aten._softmax(x, -1, False)                       -> cute.softmax(x, False)
    aten._log_softmax(x, -1, False)                   -> cute.softmax(x, True)
    aten._softmax_backward_data(dy, y, -1, dtype)     -> cute.softmax_backward(y, dy, False)
    aten._log_softmax_backward_data(dy, y, -1, dtype) -> cute.softmax_backward(y, dy, True)
    aten.native_layer_norm(x, [N], w, b, eps)         -> cute.layer_norm(x, w, b, None, eps, False)
    aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, mask)
                                                      -> cute.layer_norm_backward(x, w, dy, rstd, mean, ...)

    aten.sum.dim_IntList(x, dims, keepdim)            -> cute.column_sum(x) (viewed as the sum's shape)
                                                         where dims are every dim but the last

These ops are core ATen, so the backend's decompositions keep them whole. Conditions: the
last dimension, for LayerNorm at most 262144 elements (kernels/norms.MAX_NORM_N; softmax
takes any length), float32/bfloat16/float16,
a device type the options allow. LayerNorm's mean and rstd keep their (..., 1) shapes and the
dtype the graph gave them. RMSNorm (composite: after AOTAutograd it is pow/mean/rsqrt) and
cross-entropy (log_softmax + nll_loss) are matched before AOTAutograd, as torch calls
(backend/torch_calls.py).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ..kernels.norms import MAX_NORM_N
from .fusion import fake_value
from .options import Options

aten = torch.ops.aten
cute = torch.ops.cute
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
SOFTMAX = {aten._softmax.default: False, aten._log_softmax.default: True}
SOFTMAX_BACKWARD = {aten._softmax_backward_data.default: False, aten._log_softmax_backward_data.default: True}


def _rows_ok(node, dim, options: Options, longest: int = MAX_NORM_N) -> bool:
    """Whether `node`'s value is rows the kernels take, reduced over `dim` (rows of at most
    `longest` elements: softmax takes any length)."""
    v = fake_value(node)
    if v is None or v.dtype not in FLOATS or v.dim() == 0 or v.device.type not in options.devices:
        return False
    n = v.shape[-1]
    return dim in (-1, v.dim() - 1) and isinstance(n, int) and 1 <= n <= longest


def _call(graph: fx.Graph, fake_mode, target, args):
    node = graph.call_function(target, args)
    if fake_mode is not None:
        with fake_mode:
            node.meta["val"] = target(*[fake_value(a) if isinstance(a, fx.Node) else a for a in args])
    return node


def _item(graph, fake_mode, node, i):
    item = graph.call_function(operator.getitem, (node, i))
    if "val" in node.meta:
        item.meta["val"] = node.meta["val"][i]
    return item


def _convert(graph, fake_mode, node, dtype):
    """`node` in `dtype` (itself if it is already)."""
    v = fake_value(node)
    if v is None or v.dtype == dtype:
        return node
    out = graph.call_function(aten._to_copy.default, (node,), {"dtype": dtype})
    if fake_mode is not None:
        with fake_mode:
            out.meta["val"] = v.to(dtype)
    return out


def _as(graph, fake_mode, node, like):
    """`node` viewed to `like`'s shape and converted to its dtype (like: a fake value)."""
    return _convert(graph, fake_mode, _call(graph, fake_mode, aten.view.default, (node, list(like.shape))), like.dtype)


def _flat_f32(graph, fake_mode, node):
    return _convert(graph, fake_mode, _call(graph, fake_mode, aten.reshape.default, (node, [-1])), torch.float32)


def _replace_items(node: fx.Node, items: dict) -> None:
    """Points the users `getitem(node, i)` at items[i]."""
    for user in list(node.users):
        if user.target is operator.getitem and user.args[1] in items:
            user.replace_all_uses_with(items[user.args[1]])


def _layer_norm(graph, fake_mode, node) -> bool:
    x, shape, w, b, eps = node.args[:5]
    outs = fake_value(node)
    if outs is None:
        return False
    with graph.inserting_before(node):
        new = _call(graph, fake_mode, cute.layer_norm.default, (x, w, b, None, eps, False))
        _replace_items(node, {0: _item(graph, fake_mode, new, 0),
                              1: _as(graph, fake_mode, _item(graph, fake_mode, new, 3), outs[1]),
                              2: _as(graph, fake_mode, _item(graph, fake_mode, new, 2), outs[2])})
    return True


def _layer_norm_backward(graph, fake_mode, node) -> bool:
    dy, x, shape, mean, rstd, w, b, mask = node.args[:8]
    if not mask[0]:
        return False
    with graph.inserting_before(node):
        new = _call(graph, fake_mode, cute.layer_norm_backward.default,
                    (x, w, dy, _flat_f32(graph, fake_mode, rstd), _flat_f32(graph, fake_mode, mean),
                     bool(mask[1] and w is not None), bool(mask[2] and b is not None)))
        _replace_items(node, {i: _item(graph, fake_mode, new, i) for i in range(3)})
    return True


def _column_sum(graph, fake_mode, node, options: Options) -> bool:
    """sum over every dim but the last (a bias's gradient) in the input's dtype -> cute.column_sum."""
    x, dims = node.args[0], node.args[1]
    v, out = fake_value(x), fake_value(node)
    if v is None or out is None or v.dim() < 2 or v.dtype not in FLOATS or out.dtype != v.dtype \
            or v.device.type not in options.devices or not isinstance(v.shape[-1], int) \
            or dims is None or sorted(d % v.dim() for d in dims) != list(range(v.dim() - 1)):
        return False
    with graph.inserting_before(node):
        new = _call(graph, fake_mode, cute.column_sum.default, (x,))
        if out.dim() != 1:                                   # keepdim
            new = _call(graph, fake_mode, aten.view.default, (new, list(out.shape)))
    node.replace_all_uses_with(new)
    return True


def fuse_rows(gm: fx.GraphModule, fake_mode, options: Options) -> dict:
    """Rewrites `gm` in place; returns {"rows": [descriptions of the nodes replaced]}."""
    graph = gm.graph
    done = []
    if not options.rows:
        return {"rows": done}
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        target = node.target
        if target in SOFTMAX and not node.args[2] and _rows_ok(node.args[0], node.args[1], options, 1 << 31):
            with graph.inserting_before(node):
                new = _call(graph, fake_mode, cute.softmax.default, (node.args[0], SOFTMAX[target]))
            node.replace_all_uses_with(new)
        elif target in SOFTMAX_BACKWARD and _rows_ok(node.args[1], node.args[2], options, 1 << 31) \
                and fake_value(node.args[0]) is not None and node.args[3] == fake_value(node.args[0]).dtype:
            with graph.inserting_before(node):
                new = _call(graph, fake_mode, cute.softmax_backward.default,
                            (node.args[1], node.args[0], SOFTMAX_BACKWARD[target]))
            node.replace_all_uses_with(new)
        elif target is aten.native_layer_norm.default and len(node.args[1]) == 1 \
                and _rows_ok(node.args[0], -1, options):
            if not _layer_norm(graph, fake_mode, node):
                continue
        elif target is aten.native_layer_norm_backward.default and len(node.args[2]) == 1 \
                and _rows_ok(node.args[1], -1, options):
            if not _layer_norm_backward(graph, fake_mode, node):
                continue
        elif target is aten.sum.dim_IntList and len(node.args) >= 2:
            if not _column_sum(graph, fake_mode, node, options):
                continue
        else:
            continue
        done.append(f"{node.name} ({target.__name__.split('.')[0]})")
    if done:
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return {"rows": done}
