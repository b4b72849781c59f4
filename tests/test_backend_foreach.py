"""backend/foreach.py: each pointwise foreach overload split into per-tensor ops computes what
the foreach op computes (eager, CPU), and a compiled step has no foreach op left."""

import pytest
import torch

from cute_torch.backend.foreach import foreach_decompositions

TABLE = foreach_decompositions()


def _arguments(schema, g):
    """(args, kwargs) from the schema: three tensors of different shapes per list (positive,
    so sqrt, log and pow stay finite), a Scalar per scalar list entry, 0-dim tensors for
    Tensor; keyword-only numbers (alpha) by name."""
    shapes = [(5, 3), (7,), (2, 2, 2)]
    args, kwargs = [], {}
    for a in schema.arguments:
        if a.kwarg_only:
            if str(a.type) == "number":
                kwargs[a.name] = -1.5
            continue
        kind = str(a.type)
        if kind == "List[Tensor]":
            args.append([torch.rand(s, generator=g, dtype=torch.float64) + 0.5 for s in shapes])
        elif kind == "List[number]":
            args.append([0.25, 1.5, 0.75])
        elif kind == "number":
            args.append(0.625)
        elif kind == "Tensor":
            args.append(torch.rand((), generator=g, dtype=torch.float64) + 0.5)
        elif a.has_default_value():
            break
        else:
            raise AssertionError(f"no argument for {a.name}: {kind}")
    return args, kwargs


def test_the_table_covers_the_optimizers_ops_and_keeps_the_reductions():
    names = {f"{op._opname}.{op._overloadname}" for op in TABLE}
    assert {"_foreach_add.List", "_foreach_add.Scalar", "_foreach_addcmul.Scalar", "_foreach_addcdiv.ScalarList",
            "_foreach_lerp.Scalar", "_foreach_pow.ScalarAndTensor", "_foreach_sqrt.default",
            "_foreach_maximum.List", "_foreach_copy.default"} <= names
    assert not {"_foreach_norm.Scalar", "_foreach_max.default", "_foreach_addcmul.Tensor"} & names
    assert not any(n.endswith("out") or n.split(".")[0].endswith("_") for n in names)


@pytest.mark.parametrize("op", sorted(TABLE, key=str), ids=str)
def test_a_split_foreach_op_matches_the_foreach_op(op):
    g = torch.Generator().manual_seed(6)
    args, kwargs = _arguments(op._schema, g)
    want = op(*args, **kwargs)
    got = TABLE[op](*args, **kwargs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_keyword_arguments_bind_by_name():
    g = torch.Generator().manual_seed(7)
    xs, ys = ([torch.rand(4, generator=g, dtype=torch.float64) for _ in range(2)] for _ in range(2))
    op = torch.ops.aten._foreach_add.List
    for a, b in zip(TABLE[op](xs, ys, alpha=-3), op(xs, ys, alpha=-3)):
        torch.testing.assert_close(a, b)


def test_a_scalar_list_passed_by_name_becomes_each_tensors_value():
    g = torch.Generator().manual_seed(8)
    xs, ys, zs = ([torch.rand(4, generator=g, dtype=torch.float64) for _ in range(2)] for _ in range(3))
    op = torch.ops.aten._foreach_addcmul.ScalarList
    for a, b in zip(TABLE[op](xs, ys, zs, scalars=[0.5, -2.0]), op(xs, ys, zs, scalars=[0.5, -2.0])):
        torch.testing.assert_close(a, b)
