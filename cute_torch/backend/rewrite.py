"""Replaces each region (fusion.py) by one torch.ops.cute.pointwise call in the graph.

A region's kernel is built once here, for the layout of its example inputs' plan family
(contiguous rank 1), so that a region the DSL or the compiler cannot handle stays ATen, with
one warning (or an error under `strict`), instead of failing at run time. Run-time plans hit
the disk cache or build in milliseconds.
"""

from __future__ import annotations

import functools
import operator
import re
import warnings

import torch
import torch.fx as fx

from ..pointwise.dtypes import dtype_name
from ..pointwise.kernel import SEPARATOR, Plan, build
from .fusion import Leaf, Region, fake_value, same_shape


class BackendError(RuntimeError):
    """A region failed to build under options={"strict": True}."""


def check_builds(region: Region) -> None:
    """Compiles the region's kernel (through the disk cache); raises what the build raises."""
    values = [fake_value(leaf.node) for leaf in region.leaves]
    plan = Plan(SEPARATOR.join(region.exprs), tuple(dtype_name(v.dtype) for v in values),
                tuple(v.dim() == 0 for v in values), ",".join(dtype_name(fake_value(o).dtype) for o in region.outputs),
                1, "".join("0" if v.dim() == 0 else "1" for v in values), 1, False)
    build(plan, region.device.index or 0)


def _set_fake(node: fx.Node, fake_mode, fn, *args) -> None:
    """node.meta['val'] from running `fn` on the fake values of `args`' nodes."""
    def value(a):
        if isinstance(a, fx.Node):
            return fake_value(a)
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a
    if fake_mode is None:
        return
    with fake_mode:
        node.meta["val"] = fn(*[value(a) for a in args])


def _materialize(graph: fx.Graph, leaf: Leaf, fake_mode, replaced: dict) -> fx.Node:
    """The leaf's node (or the kernel output that replaced it) with its pushed views applied
    (view ops before the kernel)."""
    current = replaced.get(leaf.node, leaf.node)
    for target, args, kwargs in leaf.views:
        node = graph.call_function(target, (current, *args), dict(kwargs))
        _set_fake(node, fake_mode, functools.partial(target, **dict(kwargs)), current, *args)
        current = node
    return current


def apply(gm: fx.GraphModule, regions: list, fake_mode, strict: bool, check: bool = True) -> dict:
    """Rewrites `gm` in place; returns {"fused": [regions], "fallback": [(region, error)]}."""
    graph = gm.graph
    fused, fallback = [], []
    replaced: dict = {}  # region outputs -> the kernel results that took their place
    order: dict = {}     # node -> position, for the first user of each region's outputs
    for region in regions:
        if check:
            try:
                check_builds(region)
            except Exception as e:  # the DSL, the compiler or ptxas: any failure means ATen
                where = source_line(region)
                if strict:
                    raise BackendError(f"{where}cute backend: the kernel of region {describe(region)} failed to "
                                       f"build: {type(e).__name__}: {e}") from e
                warnings.warn(f"{where}cute backend: region {describe(region)} stays ATen; its kernel failed to "
                              f"build: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", stacklevel=2)
                fallback.append((region, e))
                continue
        users = [u for o in region.outputs for u in o.users if u not in region.nodes]
        if any(u not in order for u in users):
            # Renumbered only when a user is new (an earlier kernel call): inserting nodes
            # keeps the old ones' relative order, and renumbering per region is quadratic.
            order = {n: i for i, n in enumerate(graph.nodes)}
        anchor = min(users, key=order.__getitem__)
        with graph.inserting_before(anchor):
            inputs = [_materialize(graph, leaf, fake_mode, replaced) for leaf in region.leaves]
            dtypes = [fake_value(o).dtype for o in region.outputs]
            if len(region.outputs) == 1:
                call = graph.call_function(torch.ops.cute.pointwise.default, (region.exprs[0], inputs, dtypes[0]))
                _set_fake(call, fake_mode, torch.ops.cute.pointwise.default, region.exprs[0], inputs, dtypes[0])
                results = [call]
            else:
                call = graph.call_function(torch.ops.cute.pointwise.multi, (region.exprs, inputs, dtypes))
                _set_fake(call, fake_mode, torch.ops.cute.pointwise.multi, region.exprs, inputs, dtypes)
                results = []
                for i, o in enumerate(region.outputs):
                    item = graph.call_function(operator.getitem, (call, i))
                    if "val" in call.meta:
                        item.meta["val"] = call.meta["val"][i]
                    results.append(item)
        wrong = [(old, new) for old, new in zip(region.outputs, results)
                 if "val" in new.meta and not same_shape(new.meta["val"].shape, fake_value(old).shape)]
        if wrong:  # e.g. an expand of 0-dim values: the kernel's shape is its inputs' broadcast
            old, new = wrong[0]
            fallback.append((region, ValueError(f"the kernel's shape {tuple(new.meta['val'].shape)} is not "
                                                f"{old.name}'s {tuple(fake_value(old).shape)}")))
            continue  # the nodes just added are unused; dead-code elimination removes them
        for old, new in zip(region.outputs, results):
            # Nodes inlined into this kernel keep their operands; they are dead after this.
            old.replace_all_uses_with(new, delete_user_cb=lambda user: user not in region.nodes)
            replaced[old] = new
        fused.append(region)
    stable_topological_sort(graph)
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()
    return {"fused": fused, "fallback": fallback}


def source_line(region: Region) -> str:
    """'file.py:12 in f: <code>\n' for the user's line that computes the region's first
    output (Dynamo records it in each node's stack_trace); '' when unknown."""
    for node in region.outputs:
        trace = (node.meta.get("stack_trace") or "").strip().splitlines()
        frames = [i for i, line in enumerate(trace) if line.strip().startswith("File ")]
        if frames:
            match = re.match(r'\s*File "(.*)", line (\d+), in (.*)', trace[frames[-1]])
            if match:
                code = trace[frames[-1] + 1].strip() if frames[-1] + 1 < len(trace) else ""
                return f"{match[1]}:{match[2]} in {match[3]}{': ' + code if code else ''}\n"
    return ""


def describe(region: Region) -> str:
    names = ", ".join(o.name for o in region.outputs)
    return f"[{names}] = {' ; '.join(region.exprs)}"


def stable_topological_sort(graph: fx.Graph) -> None:
    """Moves nodes only where an input comes after its user (a kernel was placed before its
    first user, and one of its inputs may be computed later in the original order)."""
    placed: set = set()
    on_path: set = set()  # nodes whose inputs are being placed: meeting one again is a cycle
    order = []
    for root in graph.nodes:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in placed:
                continue
            if expanded:
                on_path.discard(node)
                placed.add(node)
                order.append(node)
                continue
            if node in on_path:
                raise RuntimeError(f"cute backend: the rewritten graph has a cycle through {node.name}")
            on_path.add(node)
            stack.append((node, True))
            for i in reversed(node.all_input_nodes):
                if i not in placed:
                    stack.append((i, False))
    previous = order[0]
    for node in order[1:]:
        if previous.next is not node:
            previous.append(node)
        previous = node
