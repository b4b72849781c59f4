"""Finds the pointwise regions of an ATen FX graph (what becomes one cute::pointwise call each).

1. Every node whose op is in aten_ops.POINTWISE, whose operands are tensors of supported dtypes
   on one allowed device (or Python numbers the language can spell), is *fusible*; its
   expression refers to its fusible operands (to be inlined) and to *leaves* (graph values the
   kernel reads). A view (aten_ops.VIEWS) of a fusible value is fusible too when every tensor
   that value is computed from has its shape (or is 0-dim): the view is then pushed onto
   those leaves, view(f(x, y)) == f(view(x), view(y)), and re-indexes them outside the kernel.
2. A fusible node is *realized* (the kernel writes it to memory) when something that is not
   fusible uses it (an ATen op, the graph's output), or when its expression is large and used
   twice; every other fusible node is inlined into its users (recomputed, never stored).
3. Realized nodes are grouped: a realized node joins the group of a realized node it is computed
   from, or else of one that reads the same input, or else, for 0-dim values, of any 0-dim
   group (up to MAX_SCALAR_GROUP outputs: an optimizer's step counts, one per parameter, are
   one kernel instead of a launch each), when both have the same shape and device and no path
   leaves the group and comes back (the kernel would need its own output). A group is one
   kernel; its extra members are the intermediates used outside (cute::pointwise.multi).

Shapes are read from the nodes' fake values; SymInt sizes are compared only when the answer
is known without a guard, so dynamic dimensions stay symbolic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..pointwise.dtypes import SUPPORTED_DTYPES
from .aten_ops import POINTWISE, TAKES_RESULT_DTYPE, VIEWS, literal

# A node whose expression grows past this many characters is stored, not inlined, when it has
# several users (inlining copies the text into each).
MAX_INLINE_CHARS = 2000
# Independent 0-dim values grouped into one kernel, at most this many (each adds arguments).
MAX_SCALAR_GROUP = 32


def fake_value(node):
    """The node's fake tensor (AOTAutograd graphs: meta['val']; Dynamo graphs: 'example_value')."""
    if not isinstance(node, fx.Node):
        return None
    return node.meta.get("val", node.meta.get("example_value"))


def same_shape(a, b) -> bool:
    """Shapes equal without guarding on a SymInt."""
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


@dataclass(frozen=True)
class Leaf:
    """A kernel input: a graph value, with the pushed views applied in order
    (each (op, other args, kwargs items))."""
    node: fx.Node
    views: tuple = ()


@dataclass(frozen=True)
class _Ref:
    """A fusible operand, seen through `views`."""
    node: fx.Node
    views: tuple = ()


@dataclass
class Region:
    outputs: list                 # realized nodes, in graph order: the kernel's outputs
    exprs: list                   # one expression per output, over x0 .. x{len(leaves)-1}
    leaves: list                  # Leaf per input
    nodes: set = field(default_factory=set)  # every node the region computes
    device: torch.device = None

    @property
    def identity(self) -> bool:
        """True when no output computes anything (a lone clone): not worth a kernel."""
        return all(re.fullmatch(r"x\d+", e) for e in self.exprs)


_PLACEHOLDER = re.compile("\x01(\\d+)\x02")


class _Graph:
    def __init__(self, graph: fx.Graph, devices: tuple):
        self.devices = devices
        self.order = {n: i for i, n in enumerate(graph.nodes)}
        self.tokens: dict = {}     # fusible node -> [text | _Ref | Leaf, ...]
        self.uniform: dict = {}    # fusible node -> its operands all have its shape (or are 0-dim)
        self.size: dict = {}       # fusible node -> length of its text with every operand inlined
        self.ancestors: dict = {}  # node -> bitmask of the nodes it depends on
        for node in graph.nodes:
            mask = 0
            for i in node.all_input_nodes:
                mask |= self.ancestors[i] | (1 << self.order[i])
            self.ancestors[node] = mask
            if node.op == "call_function":
                self._visit(node)
        self.realized = [n for n in self.tokens if self._must_store(n)]

    # -- step 1 --------------------------------------------------------------------------------

    def _tensor_ok(self, value, device) -> bool:
        return (isinstance(value, torch.Tensor) and value.dtype in SUPPORTED_DTYPES
                and value.device.type in self.devices and (device is None or value.device == device))

    def _visit(self, node: fx.Node):
        value = fake_value(node)
        if not self._tensor_ok(value, None):
            return
        if node.target in VIEWS:
            source = node.args[0]
            tensor_args = any(isinstance(fake_value(a), torch.Tensor) for a in node.args[1:])
            # Pushed only into a pointwise user: a view stored as it is costs nothing as ATen.
            feeds_pointwise = any(u.target in POINTWISE for u in node.users)
            if source in self.tokens and self.uniform[source] and not tensor_args and feeds_pointwise:
                view = (node.target, _hashable(node.args[1:]), _hashable(tuple(sorted(node.kwargs.items()))))
                self.tokens[node] = [_Ref(source, (view,))]
                self.uniform[node] = True
                self.size[node] = self.size[source]
            return
        spell = POINTWISE.get(node.target)
        if spell is None:
            return
        refs = []

        def operand(arg):
            if isinstance(arg, fx.Node):
                v = fake_value(arg)
                if not self._tensor_ok(v, value.device):
                    raise _NotFusible
                refs.append(_Ref(arg) if arg in self.tokens else Leaf(arg))
                return f"\x01{len(refs) - 1}\x02"
            if isinstance(arg, (bool, int, float)):
                text = literal(arg)
                if text is None:
                    raise _NotFusible
                return text
            if isinstance(arg, (list, tuple)) and any(isinstance(a, fx.Node) for a in arg):
                raise _NotFusible
            return arg

        kwargs = {**node.kwargs, "dtype": value.dtype} if node.target in TAKES_RESULT_DTYPE else node.kwargs
        try:
            # Keyword flags (pin_memory, non_blocking) stay Python bools; operands are spelled.
            text = spell(*[operand(a) for a in node.args],
                         **{k: v if isinstance(v, bool) else operand(v) for k, v in kwargs.items()})
        except (_NotFusible, TypeError):
            return
        if text is None:
            return
        parts = _PLACEHOLDER.split(text)
        tokens = [refs[int(p)] if i % 2 else p for i, p in enumerate(parts) if p]
        self.tokens[node] = tokens
        self.uniform[node] = all(
            fake_value(r.node).dim() == 0 or
            (same_shape(fake_value(r.node).shape, value.shape) and (isinstance(r, Leaf) or self.uniform[r.node]))
            for r in refs)
        self.size[node] = len(text) + sum(self.size[r.node] for r in refs if isinstance(r, _Ref))

    # -- step 2 --------------------------------------------------------------------------------

    def _must_store(self, node: fx.Node) -> bool:
        if any(u not in self.tokens for u in node.users):
            return True
        return self.size[node] > MAX_INLINE_CHARS and len(node.users) > 1

    # -- step 3 --------------------------------------------------------------------------------

    def expand(self, node: fx.Node, views: tuple, group: set, out: list):
        """Appends `node`'s expression seen through `views` to `out` (text and Leafs): fusible
        operands are inlined unless realized outside `group`."""
        for token in self.tokens[node]:
            if isinstance(token, str):
                out.append(token)
            elif isinstance(token, Leaf):
                out.append(self._leaf(token.node, token.views + views))
            elif token.node in self.realized_set and token.node not in group:
                out.append(self._leaf(token.node, token.views + views))
            else:
                self.expand(token.node, token.views + views, group, out)

    @staticmethod
    def _leaf(node: fx.Node, views: tuple) -> Leaf:
        # 0-dim values broadcast as they are; views would not apply to them.
        return Leaf(node, () if fake_value(node).dim() == 0 else views)

    def _leaves(self, node: fx.Node, group: set) -> list:
        out = []
        self.expand(node, (), group, out)
        return [t for t in out if isinstance(t, Leaf)]

    def _depends_on(self, leaf: Leaf, members_mask: int) -> bool:
        nodes = [leaf.node] + [a for view in leaf.views for a in _nodes_in(view)]
        return any(self.ancestors[n] & members_mask or (1 << self.order[n]) & members_mask for n in nodes)

    def groups(self) -> list:
        self.realized_set = set(self.realized)
        groups: list = []   # lists of realized nodes
        group_of: dict = {}
        readers: dict = {}  # graph value -> the groups that read it
        scalar_groups: list = []  # groups of 0-dim values
        for node in self.realized:
            value = fake_value(node)
            producers, siblings = [], []
            leaves = self._leaves(node, set())
            for leaf in leaves:
                g = group_of.get(leaf.node)
                if g is not None and g not in producers:
                    producers.append(g)
                for g in readers.get(leaf.node, ()):
                    if g not in siblings:
                        siblings.append(g)
            # Producers first (the latest is most often the one computed just before), then
            # groups reading the same inputs (one pass over them instead of two).
            candidates = producers[::-1] + [g for g in siblings[::-1] if g not in producers]
            if value.dim() == 0:
                candidates += [g for g in scalar_groups[::-1] if g not in candidates
                               and len(groups[g]) < MAX_SCALAR_GROUP]
            chosen = None
            for g in candidates:
                first = fake_value(groups[g][0])
                if first.device != value.device or not same_shape(first.shape, value.shape):
                    continue
                members = set(groups[g])
                mask = sum(1 << self.order[m] for m in members)
                if not any(self._depends_on(leaf, mask) for leaf in self._leaves(node, members)):
                    chosen = g
                    break
            if chosen is None:
                chosen = len(groups)
                groups.append([])
                if value.dim() == 0:
                    scalar_groups.append(chosen)
            groups[chosen].append(node)
            group_of[node] = chosen
            for leaf in leaves:
                readers.setdefault(leaf.node, []).append(chosen)
        return groups

    def region(self, members: list) -> Region:
        group = set(members)
        leaves: dict = {}
        exprs = []
        covered = set()
        for member in members:
            tokens: list = []
            self.expand(member, (), group, tokens)
            text = []
            for t in tokens:
                if isinstance(t, Leaf):
                    text.append(f"x{leaves.setdefault(t, len(leaves))}")
                else:
                    text.append(t)
            exprs.append("".join(text))
            covered |= self._inlined(member, group)
        return Region(list(members), exprs, list(leaves), covered, fake_value(members[0]).device)

    def _inlined(self, node: fx.Node, group: set) -> set:
        seen = {node}
        for token in self.tokens[node]:
            if isinstance(token, _Ref) and not (token.node in self.realized_set and token.node not in group):
                seen |= self._inlined(token.node, group)
        return seen


class _NotFusible(Exception):
    pass


def _nodes_in(view) -> list:
    found = []

    def walk(v):
        if isinstance(v, fx.Node):
            found.append(v)
        elif isinstance(v, tuple):
            for x in v:
                walk(x)
    walk(view[1:])
    return found


def find_regions(graph: fx.Graph, devices: tuple = ("cuda",)) -> list:
    """The graph's pointwise regions, in graph order (see the module docstring)."""
    analysis = _Graph(graph, devices)
    regions = [analysis.region(members) for members in analysis.groups()]
    return [r for r in regions if not r.identity and r.leaves]   # a lone fill reads nothing

