"""backend/views.py on CPU: a graph that runs as ATen takes its static-shape views as
_reinterpret_tensor calls, computes what eager does forward and backward, keeps symbolic views
as ops, and gets the right view of a base that arrives with another storage offset."""

import pytest
import torch

import cute_torch.backend as backend
from cute_torch.backend.views import _reinterpret_tensor

VIEW_OPS_LEFT = "view op left in the graph"


class Attention(torch.nn.Module):
    """The view-heavy part of a transformer block: a split projection, heads by view and
    transpose, a reshape that is a view and one that must copy, a slice."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).split(16, dim=-1)
        q = q.view(2, 5, 4, 4).transpose(1, 2)               # (2, 4, 5, 4), not contiguous
        copied = q.reshape(2, 4, 20)                         # cannot be a view: a copy
        viewed = k.reshape(10, 16)                           # a view
        return (copied * 2).sum() + (viewed * v.reshape(10, 16)).sum() + v[:, 1:, ::2].sum()


def _compile_with_spy(monkeypatch, fn, dynamic=False):
    graphs = []

    def spy(gm):
        count = backend.views.reinterpret_views(gm)
        graphs.append((gm, count))
        return count
    monkeypatch.setattr(backend, "reinterpret_views", spy)
    torch._dynamo.reset()
    return torch.compile(fn, backend="cute", dynamic=dynamic), graphs


def _static_views_left(gm):
    left = []
    for node in gm.graph.nodes:
        op = node.target
        if isinstance(op, torch._ops.OpOverload) and op.is_view:
            val = node.meta.get("val")
            vals = val if isinstance(val, (list, tuple)) else [val]
            if all(isinstance(v, torch.Tensor) and all(isinstance(s, int) for s in v.shape) for v in vals):
                left.append(str(op))
    return left


def test_static_views_become_reinterpret_calls_forward_and_backward(monkeypatch):
    torch.manual_seed(0)
    module = Attention()
    x = torch.randn(2, 5, 16, requires_grad=True)
    compiled, graphs = _compile_with_spy(monkeypatch, module)
    out = compiled(x)
    out.backward()
    grad, weight_grad = x.grad.clone(), module.qkv.weight.grad.clone()
    x.grad = None
    module.qkv.weight.grad = None
    expected = module(x)
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, x.grad)
    torch.testing.assert_close(weight_grad, module.qkv.weight.grad)
    assert len(graphs) == 2                                   # forward and backward
    for gm, count in graphs:
        assert count > 0
        assert any(n.target is _reinterpret_tensor for n in gm.graph.nodes)
        assert _static_views_left(gm) == [], VIEW_OPS_LEFT
    # The reshape that must copy is still a copy: a clone feeds it, not the transpose.
    forward = graphs[0][0]
    assert any(n.target in (torch.ops.aten.clone.default, torch.ops.aten._unsafe_view.default)
               for n in forward.graph.nodes)


def test_a_base_with_another_storage_offset_gets_the_right_view(monkeypatch):
    def f(x):
        return x.view(4, 3).t()[1:] * 1.0
    compiled, graphs = _compile_with_spy(monkeypatch, f)
    storage = torch.arange(40.0)
    traced, later = storage[20:32], storage[:12]             # same shape and strides, offsets 20 and 0
    torch.testing.assert_close(compiled(traced), f(traced))
    torch.testing.assert_close(compiled(later), f(later))
    assert len(graphs) == 1 and graphs[0][1] > 0              # one graph served both


def test_symbolic_views_stay_ops(monkeypatch):
    def f(x):
        return (x.view(x.shape[0], 2, 8).transpose(1, 2) * 3).sum(-1)
    compiled, graphs = _compile_with_spy(monkeypatch, f, dynamic=True)
    for rows in (3, 5):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(compiled(x), f(x))
    gm, count = graphs[0]
    assert count == 0
    assert any(isinstance(n.target, torch._ops.OpOverload) and n.target.is_view for n in gm.graph.nodes)


@pytest.mark.parametrize("copy", [False, True])
def test_reshape_is_replaced_only_where_it_views(monkeypatch, copy):
    def f(x):
        y = x.t() if copy else x
        return y.reshape(-1) + 1
    compiled, graphs = _compile_with_spy(monkeypatch, f)
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), f(x))
    gm, _ = graphs[0]
    assert _static_views_left(gm) == [], VIEW_OPS_LEFT
