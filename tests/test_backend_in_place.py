"""backend/in_place.py on hand-built graphs (CPU): which `copy_(input, kernel output)` the
kernel may do itself, and which it may not (a later reader, a view, a value used twice)."""

import operator

import pytest
import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

import cute_torch.ops  # noqa: F401 - registers torch.ops.cute
from cute_torch.backend.in_place import write_in_place
from cute_torch.ops import registration

aten, cute = torch.ops.aten, torch.ops.cute


@pytest.fixture(autouse=True)
def _ops():
    registration.load()


class Builder:
    """An ATen-style graph with a fake value on every node (what write_in_place reads)."""

    def __init__(self):
        self.graph = fx.Graph()
        self.mode = FakeTensorMode()

    def input(self, name, *shape):
        node = self.graph.placeholder(name)
        with self.mode:
            node.meta["val"] = torch.empty(shape)
        return node

    def call(self, target, *args):
        node = self.graph.call_function(target, args)
        values = [a.meta["val"] if isinstance(a, fx.Node) else a for a in args]
        values = [[v.meta["val"] if isinstance(v, fx.Node) else v for v in a] if isinstance(a, list) else a
                  for a in values]
        with self.mode:
            node.meta["val"] = target(*values)
        return node

    def module(self, *outputs):
        self.graph.output(tuple(outputs))
        return fx.GraphModule(torch.nn.Module(), self.graph)


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_a_kernel_writes_the_input_it_updates():
    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    new = b.call(cute.pointwise.default, "x0 * 0.9 + x1", [p, g], torch.float32)
    b.call(aten.copy_.default, p, new)
    gm = b.module()
    assert write_in_place(gm) == 1
    assert targets(gm) == [cute.pointwise.into]
    (into,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.into)
    assert into.args == (["x0 * 0.9 + x1"], [p, g], [p])


def test_every_output_of_a_multi_kernel_or_none():
    b = Builder()
    p, m, g = b.input("p", 8, 4), b.input("m", 8, 4), b.input("g", 8, 4)
    outs = b.call(cute.pointwise.multi, ["x1 + x2", "x0 - x1"], [p, m, g], [torch.float32] * 2)
    m_new, p_new = b.call(operator.getitem, outs, 0), b.call(operator.getitem, outs, 1)
    b.call(aten.copy_.default, m, m_new)
    b.call(aten.copy_.default, p, p_new)
    gm = b.module()
    assert write_in_place(gm) == 1
    (into,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.into)
    assert into.args[2] == [m, p]
    assert aten.copy_.default not in targets(gm) and operator.getitem not in targets(gm)

    b = Builder()                            # one output is a graph output too: nothing changes
    p, m, g = b.input("p", 8, 4), b.input("m", 8, 4), b.input("g", 8, 4)
    outs = b.call(cute.pointwise.multi, ["x1 + x2", "x0 - x1"], [p, m, g], [torch.float32] * 2)
    m_new, p_new = b.call(operator.getitem, outs, 0), b.call(operator.getitem, outs, 1)
    b.call(aten.copy_.default, m, m_new)
    gm = b.module(p_new)
    assert write_in_place(gm) == 0


def test_the_new_values_other_readers_read_the_input():
    # An optimizer's step count: incremented in place, and the updates read the new count.
    b = Builder()
    step, g = b.input("step"), b.input("g", 8, 4)
    new = b.call(cute.pointwise.default, "x0 + 1", [step], torch.float32)
    scaled = b.call(cute.pointwise.default, "x1 * x0", [new, g], torch.float32)
    b.call(aten.copy_.default, step, new)
    gm = b.module(scaled)
    assert write_in_place(gm) == 1
    (into,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.into)
    (reader,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.default)
    assert into.args[2] == [step] and reader.args[1] == [step, g]


def test_an_input_read_after_the_kernel_is_not_written_early():
    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    new = b.call(cute.pointwise.default, "x0 + x1", [p, g], torch.float32)
    later = b.call(aten.sum.default, p)      # the old value, read after the kernel
    b.call(aten.copy_.default, p, new)
    gm = b.module(later)
    assert write_in_place(gm) == 0
    assert aten.copy_.default in targets(gm)


def test_an_input_read_before_the_kernel_is_written():
    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    before = b.call(aten.sum.default, p)     # a fresh value, computed before the kernel writes p
    new = b.call(cute.pointwise.default, "x0 + x1", [p, g], torch.float32)
    b.call(aten.copy_.default, p, new)
    gm = b.module(before)
    assert write_in_place(gm) == 1


def test_a_view_taken_before_the_kernel_keeps_the_copy():
    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    flat = b.call(aten.view.default, p, [32])   # its readers may run after the kernel
    new = b.call(cute.pointwise.default, "x0 + x1", [p, g], torch.float32)
    total = b.call(aten.sum.default, flat)
    b.call(aten.copy_.default, p, new)
    gm = b.module(total)
    assert write_in_place(gm) == 0


def test_a_value_the_graph_returns_or_of_another_dtype_keeps_the_copy():
    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    new = b.call(cute.pointwise.default, "x0 + x1", [p, g], torch.float32)
    b.call(aten.copy_.default, p, new)
    gm = b.module(new)                        # the new value is also a graph output
    assert write_in_place(gm) == 0

    b = Builder()
    p, g = b.input("p", 8, 4), b.input("g", 8, 4)
    new = b.call(cute.pointwise.default, "x0 + x1", [p, g], torch.bfloat16)
    b.call(aten.copy_.default, p, new)        # copy_ casts: the kernel would write bf16 into fp32
    gm = b.module()
    assert write_in_place(gm) == 0


def test_into_checks_its_outputs():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="2 expressions but 1 outs"):
        cute.pointwise.into(["x0 * 2", "x0"], [x], [x])
    with FakeTensorMode():
        a = torch.empty(4, 8)
        with pytest.raises(ValueError, match=r"outs\[0\] must be a contiguous tensor of shape \[4, 8\], got \[4, 7\]"):
            cute.pointwise.into(["x0 * 2"], [a], [torch.empty(4, 7)])
    with pytest.raises(RuntimeError, match="runs on CUDA tensors"):
        cute.pointwise.into(["x0 * 2"], [x], [x])
