"""Kernel outputs written straight into the graph inputs they update (the runtime of
fallback="aten").

A functionalized graph that updates its inputs (a compiled optimizer's step: each parameter
and its two moments) computes the new values, then ends with `copy_(input, value)`: one more
read and write of each value. Where one pointwise kernel computes every such value it has,
`write_in_place` makes it write them into the inputs (cute::pointwise.into) and drops the
copies. It does so only when, for each input written:
- it is a graph input, contiguous, of its value's shape and dtype, and written once;
- the value is not a graph output (its other readers read the input instead, which then holds
  it: an optimizer's step count, incremented and read by every update);
- nothing reads the input's old value after the kernel: no node after it in graph order, and
  no view of it taken before (a view's readers may come later). The kernel reading the input
  itself is fine: each element is read before it is written, by the thread that writes it.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .fusion import fake_value, same_shape

_copy_ = torch.ops.aten.copy_.default


def _kernel_output(value: fx.Node) -> tuple:
    """(kernel node, output index) where `value` is an output of a pointwise kernel."""
    if value.target is torch.ops.cute.pointwise.default:
        return value, 0
    if (value.target is operator.getitem and isinstance(value.args[0], fx.Node)
            and value.args[0].target is torch.ops.cute.pointwise.multi):
        return value.args[0], value.args[1]
    return None, None


def _written_input(copy: fx.Node):
    """(kernel, output index, value, input) for `copy_(input, value)` that the kernel could write
    itself (the conditions on the input and the value in the module docstring), else None."""
    if copy.target is not _copy_ or copy.users or len(copy.args) != 2 or copy.kwargs:
        return None
    dst, value = copy.args
    if not (isinstance(dst, fx.Node) and dst.op == "placeholder" and isinstance(value, fx.Node)):
        return None
    kernel, index = _kernel_output(value)
    d, v = fake_value(dst), fake_value(value)
    if (kernel is None or any(u.op == "output" for u in value.users) or not isinstance(d, torch.Tensor)
            or not isinstance(v, torch.Tensor) or d.dtype != v.dtype or d.device != v.device
            or not same_shape(d.shape, v.shape) or not d.is_contiguous()):
        return None
    return kernel, index, value, dst


def _shares_storage(node: fx.Node, dst: fx.Node) -> bool:
    a, b = fake_value(node), fake_value(dst)
    if not isinstance(a, torch.Tensor):
        return False
    try:
        return a.untyped_storage()._cdata == b.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return True   # unknown: assume a view


def _unread_after(kernel: fx.Node, dst: fx.Node, copies: set, order: dict) -> bool:
    for user in dst.users:
        if user is kernel or user in copies:
            continue
        if order.get(user, len(order)) > order[kernel] or _shares_storage(user, dst):   # new nodes: after
            return False
    return True


def write_in_place(gm: fx.GraphModule) -> int:
    """Rewrites gm's graph in place (see the module docstring); returns the kernels rewritten."""
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    plans: dict = {}   # kernel -> {output index: (copy_, value, input)}
    for copy in graph.nodes:
        found = _written_input(copy)
        if found:
            kernel, index, value, dst = found
            plans.setdefault(kernel, {})[index] = (copy, value, dst)
    rewritten = 0
    for kernel, outs in plans.items():
        single = kernel.target is torch.ops.cute.pointwise.default
        exprs = [kernel.args[0]] if single else list(kernel.args[0])
        values = {v for _, v, _ in outs.values()}   # a single-output kernel is its own value
        # Every output goes to an input, and (multi) the kernel's only users are those outputs.
        # (A single-output kernel's value is the kernel: its readers move to the input below.)
        if sorted(outs) != list(range(len(exprs))) or (not single and set(kernel.users) != values):
            continue
        copies = {c for c, _, _ in outs.values()}
        dsts = [outs[i][2] for i in range(len(exprs))]
        if len(set(dsts)) != len(dsts) or not all(_unread_after(kernel, d, copies, order) for d in dsts):
            continue
        with graph.inserting_before(kernel):
            graph.call_function(torch.ops.cute.pointwise.into, (exprs, kernel.args[1], dsts))
        for copy in copies:
            graph.erase_node(copy)
        for _, value, dst in outs.values():
            value.replace_all_uses_with(dst)
        for value in values - {kernel}:
            graph.erase_node(value)
        graph.erase_node(kernel)
        rewritten += 1
    return rewritten
