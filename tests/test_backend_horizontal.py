"""backend/horizontal.py on hand-built graphs (CPU): which `cute::pointwise.into` calls merge into
one `cute::pointwise.foreach_into`, and which may not (one reads what another writes, a node
between them uses a tensor they write, a view of one, other dtypes); cute::pointwise.foreach_into's
own checks."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cute_torch.ops  # noqa: F401 - registers torch.ops.cute
from cute_torch.backend.horizontal import merge_in_place
from cute_torch.backend.reference import ReferenceInterpreter
from cute_torch.ops import registration
from test_backend_in_place import Builder, targets

aten, cute = torch.ops.aten, torch.ops.cute
UPDATE = ["x0 - 0.1 * x1"]


@pytest.fixture(autouse=True)
def _ops():
    registration.load()


def update(b, p, g, expr=UPDATE):
    return b.call(cute.pointwise.into, expr, [p, g], [p])


def test_independent_updates_become_one_launch_where_the_last_was():
    b = Builder()
    params = [(b.input(f"p{i}", *shape), b.input(f"g{i}", *shape)) for i, shape in enumerate([(8, 4), (5,), (3,)])]
    update(b, *params[0])
    done = b.call(aten.add.Tensor, params[0][1], 1.0)   # reads a gradient only: the group goes on
    for p, g in params[1:]:
        update(b, p, g)
    gm = b.module(done)
    assert merge_in_place(gm) == 1
    assert targets(gm) == [aten.add.Tensor, cute.pointwise.foreach_into]
    (merged,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.foreach_into)
    assert merged.args == (UPDATE, [x for pair in params for x in pair], [p for p, _ in params])

    # The merged graph computes what the calls did, one after another.
    gen = torch.Generator().manual_seed(11)
    values = [torch.randn(n.meta["val"].shape, generator=gen) for n in gm.graph.find_nodes(op="placeholder")]
    expected = [v.clone() for v in values]
    for i in range(0, len(expected), 2):
        expected[i] -= 0.1 * expected[i + 1]
    ReferenceInterpreter(gm).run(*values)
    for got, want in zip(values, expected):
        torch.testing.assert_close(got, want)


def test_a_node_between_that_writes_what_a_call_reads_ends_the_group():
    b = Builder()
    (p0, g0), (p1, g1) = [(b.input(f"p{i}", 6), b.input(f"g{i}", 6)) for i in range(2)]
    update(b, p0, g0)
    b.call(aten.mul_.Tensor, g0, 2.0)         # p0's update read g0 before this
    update(b, p1, g1)
    gm = b.module()
    assert merge_in_place(gm) == 0


def test_a_call_that_reads_what_another_writes_is_not_merged():
    b = Builder()
    p, g, q = b.input("p", 8, 4), b.input("g", 8, 4), b.input("q", 8, 4)
    update(b, p, g)
    update(b, q, p)                            # reads p's new value
    gm = b.module()
    assert merge_in_place(gm) == 0
    assert targets(gm) == [cute.pointwise.into] * 2


def test_a_node_between_that_reads_a_written_tensor_ends_the_group():
    b = Builder()
    (p0, g0), (p1, g1), (p2, g2) = [(b.input(f"p{i}", 6), b.input(f"g{i}", 6)) for i in range(3)]
    update(b, p0, g0)
    total = b.call(aten.sum.default, p0)      # p0's new value: p0's update cannot move past it
    update(b, p1, g1)
    update(b, p2, g2)
    gm = b.module(total)
    assert merge_in_place(gm) == 1
    assert targets(gm) == [cute.pointwise.into, aten.sum.default, cute.pointwise.foreach_into]
    (merged,) = gm.graph.find_nodes(op="call_function", target=cute.pointwise.foreach_into)
    assert merged.args[2] == [p1, p2]


def test_a_view_of_a_written_tensor_read_between_ends_the_group():
    b = Builder()
    (p0, g0), (p1, g1) = [(b.input(f"p{i}", 8, 4), b.input(f"g{i}", 8, 4)) for i in range(2)]
    flat = b.call(aten.view.default, p0, [32])
    update(b, p0, g0)
    total = b.call(aten.sum.default, flat)    # reads p0's storage through the view
    update(b, p1, g1)
    gm = b.module(total)
    assert merge_in_place(gm) == 0


def test_other_expressions_or_dtypes_are_other_groups():
    b = Builder()
    p0, g0 = b.input("p0", 8), b.input("g0", 8)
    p1, g1 = b.input("p1", 8), b.input("g1", 8)
    p2, g2 = b.input("p2", 8), b.input("g2", 8)
    p3, g3 = b.input("p3"), b.input("g3")      # 0-dim: promotes like a scalar, typed apart
    with b.mode:
        p2.meta["val"], g2.meta["val"] = torch.empty(8, dtype=torch.bfloat16), torch.empty(8, dtype=torch.bfloat16)
    update(b, p0, g0)
    update(b, p1, g1, ["x0 - 0.2 * x1"])
    update(b, p2, g2)
    update(b, p3, g3)
    gm = b.module()
    assert merge_in_place(gm) == 0


def test_groups_of_different_expressions_interleave():
    b = Builder()
    pairs = [(b.input(f"p{i}", 8), b.input(f"g{i}", 8)) for i in range(4)]
    for i, (p, g) in enumerate(pairs):        # two parameter groups, alternating
        update(b, p, g, UPDATE if i % 2 == 0 else ["x0 - 0.2 * x1"])
    gm = b.module()
    assert merge_in_place(gm) == 2
    merged = gm.graph.find_nodes(op="call_function", target=cute.pointwise.foreach_into)
    assert sorted(tuple(n.args[2]) for n in merged) == [(pairs[0][0], pairs[2][0]), (pairs[1][0], pairs[3][0])]


def test_foreach_into_checks_its_segments():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="3 outs are not segments of one out per expression \\(2\\)"):
        cute.pointwise.foreach_into(["x0 * 2", "x0"], [x, x, x], [x, x, x])
    with pytest.raises(ValueError, match="3 inputs do not split into 2 segments"):
        cute.pointwise.foreach_into(["x0 * 2"], [x, x, x], [x, x])
    with pytest.raises(ValueError, match="needs at least one expression"):
        cute.pointwise.foreach_into([], [x], [x])
    with FakeTensorMode():
        a = torch.empty(4, 8)
        with pytest.raises(ValueError, match=r"outs\[0\] must be a contiguous tensor of shape \[4, 8\], got \[4, 7\]"):
            cute.pointwise.foreach_into(["x0 * 2"], [a, a], [a, torch.empty(4, 7)])
    with pytest.raises(RuntimeError, match="runs on CUDA tensors"):
        cute.pointwise.foreach_into(["x0 * 2"], [x, x], [x, x])


def test_the_runtime_reports_the_graph_it_runs(tmp_path, capfd):
    # fallback="aten"'s runtime: each update's copy_ becomes the kernel writing in place, the
    # two in-place kernels one launch; a line says so and <name>.runtime.py is that graph.
    from cute_torch.backend import Options, _runtime_forward
    b = Builder()
    for i in range(2):
        p, g = b.input(f"p{i}", 8, 4), b.input(f"g{i}", 8, 4)
        b.call(aten.copy_.default, p, b.call(cute.pointwise.default, UPDATE[0], [p, g], torch.float32))
    gm = b.module()
    _runtime_forward(gm, Options(log_graphs=True, debug_dir=str(tmp_path)), "g")
    line = ("cute backend [g]: runtime: 2 kernels write the inputs they update (in_place.py), 1 launches merge "
            "several (horizontal.py), 0 views as one call (views.py)")
    assert line in capfd.readouterr().err
    text = (tmp_path / "g.runtime.py").read_text()
    assert text.count("torch.ops.cute.pointwise.foreach_into(") == 1 and text.endswith(f"# {line}\n")
