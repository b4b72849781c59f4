"""Row reductions that Dynamo's graph still holds as single calls become the row ops before
AOTAutograd traces the graph: their registered autograd formulas (cute_torch/ops/row_ops.py)
then give the backward graph its backward ops, where after AOTAutograd only a decomposition
into pointwise ops and sums would be left to match.

    torch.rms_norm(x, [N], w, eps)             (F.rms_norm, nn.RMSNorm)  -> row_ops.rms_norm
    F.cross_entropy(logits, target, ...)       (nn.CrossEntropyLoss)     -> row_ops.cross_entropy_loss

Conditions: as backend/rows.py's (the last dim, N <= 32768 for the norm, float dtypes, a device
type the options allow); cross-entropy with (M, V) logits, (M,) integer targets, no class
weights and no label smoothing. A hand-written RMSNorm (x * rsqrt(mean(x^2) + eps) * w) is not
recognized.
"""

from __future__ import annotations

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
    if eps is None:                       # torch's default: the input dtype's machine epsilon
        eps = torch.finfo(fake_value(x).dtype).eps
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
    if _argument(node, 2, "weight", None) is not None or _argument(node, 7, "label_smoothing", 0.0):
        return None
    if _argument(node, 3, "size_average", None) is not None or _argument(node, 5, "reduce", None) is not None:
        return None
    ignore_index, reduction = _argument(node, 4, "ignore_index", -100), _argument(node, 6, "reduction", "mean")
    if not isinstance(ignore_index, int) or reduction not in ("none", "sum", "mean"):
        return None
    return graph.call_function(row_ops.cross_entropy_loss, (logits, target, ignore_index, reduction))


def replace_calls(gm: fx.GraphModule, options: Options) -> list:
    """Rewrites Dynamo's graph in place; returns descriptions of the calls replaced."""
    if not options.rows:
        return []
    done = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
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
