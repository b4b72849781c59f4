"""The short C entries of the cute:: ops (csrc/torch/PythonEntry.cpp, registration.short_call),
on meta tensors (their fake kernels) so that no GPU is needed: the same results as torch.ops'
route, NotImplemented (then torch.ops' route) for what the entry does not take, and the op's own
errors."""

import pytest
import torch

import cute_torch.ops as cops
from cute_torch.ops import registration

BF = torch.bfloat16


def meta(*shape, dtype=BF):
    return torch.empty(*shape, device="meta", dtype=dtype)


X, W, BIAS, WEIGHT = meta(64, 256), meta(512, 256).t(), meta(512), meta(256)
CALLS = [
    (torch.ops.cute.gemm.default, (X, W, "(acc + x0)", [BIAS], BF)),
    (torch.ops.cute.gemm.default, (X, W, "acc", [], None)),
    (torch.ops.cute.gemm.multi, (X, W, ["gelu_tanh((acc + x0))", "(acc + x0)"], [BIAS], [BF, torch.float32])),
    (torch.ops.cute.gemm.multi, (X, W, ["acc", "acc"], (), None)),
    (torch.ops.cute.pointwise.default, ("(x0 * x1)", [X, X], None)),
    (torch.ops.cute.pointwise.multi, (["(x0 + x1)", "(x0 * x1)"], [X, X], [BF, torch.float32])),
    (torch.ops.cute.layer_norm.default, (X, WEIGHT, None, None, 1e-6, True)),
    (torch.ops.cute.layer_norm.default, (X, WEIGHT, WEIGHT, X, 1e-5, False)),
    (torch.ops.cute.softmax.default, (X, True)),
    (torch.ops.cute.column_sum.default, (X,)),
    (torch.ops.cute.cross_entropy.default, (X, meta(64, dtype=torch.int64), -100, 0.1)),
]


def _flat(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _entry(op):
    registration.load()
    name, _, overload = op.name().partition(".")
    return registration._op_entry(name.encode(), ("" if overload == "default" else overload).encode())


@pytest.mark.parametrize("op,args", CALLS, ids=lambda v: v.name() if hasattr(v, "name") else "")
def test_the_entry_gives_what_torch_ops_gives(op, args):
    direct = _entry(op)(*args)
    assert direct is not NotImplemented              # the short route was taken
    want = op(*args)
    assert type(direct) is type(want)
    for got, expected in zip(_flat(direct), _flat(want), strict=True):
        assert (got.shape, got.dtype, got.device) == (expected.shape, expected.dtype, expected.device)
    short = registration.short_call(op)(*args)
    assert [(t.shape, t.dtype) for t in _flat(short)] == [(t.shape, t.dtype) for t in _flat(want)]


def test_what_the_entry_does_not_take_goes_the_generic_route():
    entry = _entry(torch.ops.cute.gemm.default)

    class Sub(torch.Tensor):
        pass
    assert entry(X.as_subclass(Sub), W, "acc", [], None) is NotImplemented     # __torch_function__ kept
    assert entry(X, W, "acc", [X.as_subclass(Sub)], None) is NotImplemented
    assert entry(X, W, 3, [], None) is NotImplemented                           # not a str
    assert entry(X, W, "acc", [], None, 7) is NotImplemented                    # too many arguments
    short = registration.short_call(torch.ops.cute.gemm.default)
    assert short(X, W, "acc", [], out_dtype=torch.float32).dtype == torch.float32   # keywords: torch.ops
    with pytest.raises(RuntimeError, match="str"):                               # torch's own message
        short(X, W, 3, [], None)


def test_the_ops_errors_come_through_the_entry():
    cpu = torch.zeros(4, 8, dtype=BF)
    for call in (lambda: _entry(torch.ops.cute.softmax.default)(cpu, False),
                 lambda: torch.ops.cute.softmax.default(cpu, False)):
        with pytest.raises(RuntimeError, match="runs on CUDA tensors"):
            call()


def test_defaults_fill_missing_trailing_arguments():
    out = _entry(torch.ops.cute.gemm.default)(X, W, "acc", [])     # out_dtype=None by default
    assert out.shape == (64, 512) and out.dtype == BF


def test_the_python_entries_take_the_short_route_and_dynamo_sees_the_op():
    assert cops.gemm(X, W, "acc + x0", BIAS).shape == (64, 512)
    assert cops.rms_norm(X, WEIGHT).shape == X.shape
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: cops.gemm(x, W, "acc + x0", BIAS), backend="eager", fullgraph=True)
    assert compiled(X).shape == (64, 512)
