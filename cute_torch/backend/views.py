"""The views of a graph that runs as ATen (fallback="aten"), each as one cheap call at run time.

A view op (view, permute, reshape, alias, a split's pieces, ...) costs about 2.5 us of host
time through the dispatcher; a transformer block's training step has about 70 of them in its
two graphs. The graph knows each view's size, stride and storage offset from its fake tensors,
so a view of static shape becomes torch's `_reinterpret_tensor(base, size, stride,
offset_increment)` (what Inductor's generated code calls for its views, about 0.6 us). The
offset is an increment over the base's, so a base that arrives with another storage offset
than it was traced with still gets the right view. A view whose shape is symbolic (a dynamic
batch), or whose fake tensors are missing, stays the op it was.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch._C._dynamo.guards import _reinterpret_tensor
from torch.multiprocessing.reductions import StorageWeakRef


def _static_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) and all(
        isinstance(v, int) for v in (*value.shape, *value.stride(), value.storage_offset()))


def _view_base(node: fx.Node) -> fx.Node | None:
    """The tensor `node` is a view of, where `node` is a view op's single result or one piece
    of a multi-result view op (split_with_sizes, unbind) taken by getitem; else None."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        source = node.args[0]
        if not isinstance(source, fx.Node) or source.op != "call_function":
            return None
        op = source.target
        node = source
    else:
        op = node.target
    if not isinstance(op, torch._ops.OpOverload) or not op.is_view or not node.args:
        return None
    base = node.args[0]
    return base if isinstance(base, fx.Node) else None


def reinterpret_views(gm: fx.GraphModule) -> int:
    """Replaces the graph's static-shape views by _reinterpret_tensor calls in place; returns
    how many. A multi-result view op whose pieces were all replaced is removed."""
    graph = gm.graph
    replaced = 0
    for node in list(graph.nodes):
        base = _view_base(node)
        if base is None:
            continue
        out, source = node.meta.get("val"), base.meta.get("val")
        # reshape is a view only where the strides allow it: the storage says which it was.
        if not (_static_tensor(out) and _static_tensor(source) and out.dtype == source.dtype
                and StorageWeakRef(out.untyped_storage()) == StorageWeakRef(source.untyped_storage())):
            continue
        args = (base, tuple(out.shape), tuple(out.stride()), out.storage_offset() - source.storage_offset())
        with graph.inserting_before(node):
            view = graph.call_function(_reinterpret_tensor, args)
        view.meta = dict(node.meta)
        node.replace_all_uses_with(view)
        split = node.args[0] if node.target is operator.getitem else None
        graph.erase_node(node)
        if split is not None and not split.users:
            graph.erase_node(split)
        replaced += 1
    return replaced
