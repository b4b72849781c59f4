"""Independent in-place kernels of the same expressions as one launch (the runtime of
fallback="aten", after in_place.py).

A compiled optimizer step is, after in_place.py, one `cute::pointwise.into` per parameter, each
the same expressions over that parameter's tensors: P launches where one would do. Such calls
with the same expressions, input dtypes (and which inputs are 0-dim) and output dtypes merge
into one `cute::pointwise.foreach_into` (one segment each), placed where the last of them was.
Moving a call later is safe when, for every call merged:
- no other member reads or writes what it writes, or writes what it reads (the segments run
  at once);
- no node between it and the merged position uses a tensor it writes, or writes one it reads
  (tensors compared by storage, so views count): nothing sees the old value where it saw the
  new, or the reverse.
A call that breaks a rule starts a new group; groups of one stay as they were.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .fusion import fake_value

_into = torch.ops.cute.pointwise.into


def _storage(value):
    """An id of the storage of a fake tensor, or None when it has none to compare."""
    try:
        return value.untyped_storage()._cdata
    except (AttributeError, RuntimeError, NotImplementedError):
        return None


def _storages(arg, cache: dict) -> set:
    """The storages of the tensors `arg` (a node or a list of them) is or holds; "?" for a node
    whose value is not known (treated as touching everything)."""
    found = set()
    for node in arg if isinstance(arg, (list, tuple)) else [arg]:
        if not isinstance(node, fx.Node):
            continue
        if node not in cache:
            cache[node] = _node_storages(node)
        found |= cache[node]
    return found


def _node_storages(node: fx.Node) -> set:
    value = fake_value(node)
    if node.target is _into:            # it writes through its outs and returns nothing
        return set()
    if value is None:
        return {"?"} if node.op == "call_function" else set()
    values = value if isinstance(value, (list, tuple)) else [value]
    return {"?" if i is None else i for i in (_storage(v) for v in values if isinstance(v, torch.Tensor))}


def _key(node: fx.Node):
    """What must agree for calls to share one kernel, or None when the call's values are unknown."""
    exprs, inputs, outs = node.args
    values = [fake_value(x) for x in list(inputs) + list(outs)]
    if not all(isinstance(v, torch.Tensor) for v in values):
        return None
    ins, written = values[:len(inputs)], values[len(inputs):]
    return (tuple(exprs), tuple((v.dtype, v.dim() == 0) for v in ins), tuple(v.dtype for v in written),
            ins[0].device)


class _Group:
    def __init__(self, node: fx.Node, cache: dict):
        self.members: list = []
        self.reads: set = set()
        self.writes: set = set()
        self.cache = cache
        self.add(node)

    def add(self, node: fx.Node) -> None:
        _, inputs, outs = node.args
        self.members.append(node)
        self.reads |= _storages(list(inputs), self.cache)
        self.writes |= _storages(list(outs), self.cache)

    def independent_of(self, node: fx.Node) -> bool:
        _, inputs, outs = node.args
        reads, writes = _storages(list(inputs), self.cache), _storages(list(outs), self.cache)
        if "?" in reads | writes:
            return False
        return not (writes & (self.reads | self.writes) or reads & self.writes)

    def untouched_by(self, node: fx.Node) -> bool:
        """Whether `node` (between two members) may run before all of them: it uses nothing they
        write, and writes nothing they read."""
        used = set()
        for arg in list(node.args) + list(node.kwargs.values()):
            used |= _storages(arg, self.cache)
        return not ("?" in used or used & self.writes or (_mutates(node) and used & self.reads))


def _mutates(node: fx.Node) -> bool:
    """Whether `node` may write one of its arguments (unknown calls may)."""
    if node.op != "call_function":
        return node.op in ("call_method", "call_module")
    if isinstance(node.target, torch._ops.OpOverload):
        return any(a.alias_info is not None and a.alias_info.is_write for a in node.target._schema.arguments)
    return node.target is not operator.getitem


def merge_in_place(gm: fx.GraphModule) -> int:
    """Rewrites gm's graph in place (see the module docstring); returns the foreach_into calls made."""
    graph = gm.graph
    cache: dict = {}
    open_groups: dict = {}   # key -> the group being gathered
    done: list = []
    for node in list(graph.nodes):
        key = _key(node) if node.target is _into and not node.users else None
        for other_key, group in list(open_groups.items()):
            if other_key != key and not group.untouched_by(node):
                done.append(open_groups.pop(other_key))
        if key is None:
            continue
        group = open_groups.get(key)
        if group is not None and group.independent_of(node):
            group.add(node)
            continue
        if group is not None:
            done.append(group)
        open_groups[key] = _Group(node, cache)
    done += open_groups.values()
    merged = 0
    for group in done:
        if len(group.members) < 2:
            continue
        last = group.members[-1]
        exprs = list(last.args[0])
        inputs = [x for member in group.members for x in member.args[1]]
        outs = [x for member in group.members for x in member.args[2]]
        with graph.inserting_before(last):
            graph.call_function(torch.ops.cute.pointwise.foreach_into, (exprs, inputs, outs))
        for member in group.members:
            graph.erase_node(member)
        merged += 1
    return merged
