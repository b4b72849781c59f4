"""backend/rows.py on CPU: softmax, log_softmax and LayerNorm nodes of the forward and backward
graphs become the row ops, and the rewritten graphs (run by the CPU reference) compute what
eager does, values and gradients. GPU: the same models under backend="cute" on CUDA."""

import pytest
import torch
import torch.nn.functional as F
from test_backend_graphs import CPU, check_same

from cute_torch.backend import Options

ROW_OPS = (torch.ops.cute.softmax.default, torch.ops.cute.softmax_backward.default,
           torch.ops.cute.layer_norm.default, torch.ops.cute.layer_norm_backward.default)


def row_calls(gm):
    return [n.target for n in gm.graph.nodes if n.target in ROW_OPS]


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_softmax_and_log_softmax_forward_and_backward():
    graphs = check_same(lambda x: torch.softmax(x * 2, -1) + torch.log_softmax(x, dim=1), randn(6, 40, seed=1))
    fw, bw = graphs["forward"][0], graphs["backward"][0]
    assert row_calls(fw).count(torch.ops.cute.softmax.default) == 2
    assert row_calls(bw).count(torch.ops.cute.softmax_backward.default) == 2


def test_layer_norm_forward_and_backward_with_its_statistics():
    w, b = randn(32, seed=2), randn(32, seed=3)

    def block(x, w, b):
        return F.layer_norm(x, (32,), w, b, 1e-5).relu()
    graphs = check_same(block, randn(3, 5, 32, seed=4), w, b, rtol=1e-5, atol=1e-5)
    assert torch.ops.cute.layer_norm.default in row_calls(graphs["forward"][0])
    assert torch.ops.cute.layer_norm_backward.default in row_calls(graphs["backward"][0])


def test_what_the_kernels_cannot_take_stays_aten():
    """Softmax over a leading dim, a LayerNorm over two dims, float64, and the option off."""
    graphs = check_same(lambda x: torch.softmax(x, 0), randn(4, 8, seed=5), grad=False)
    assert not row_calls(graphs["inference"][0])
    graphs = check_same(lambda x: F.layer_norm(x, (4, 8)), randn(2, 4, 8, seed=6), grad=False)
    assert not row_calls(graphs["inference"][0])
    graphs = check_same(lambda x: torch.softmax(x, -1), randn(4, 8, seed=7).double(), grad=False)
    assert not row_calls(graphs["inference"][0])
    off = Options(devices=("cpu",), check_builds=False, rows=False)
    from test_backend_graphs import compile_cpu
    compiled, seen = compile_cpu(lambda x: torch.softmax(x, -1), options=off)
    compiled(randn(4, 8, seed=8))
    assert not row_calls(seen[0][1])
    assert CPU.rows


def test_bias_gradients_become_column_sums():
    """A linear's bias gradient (the output gradient summed over the tokens, 2-D and 3-D) and
    sums over every dim but the last, keepdim or not, become cute.column_sum; a sum over the
    last dim, into another dtype or of a 1-D tensor stays ATen."""
    column_sum = torch.ops.cute.column_sum.default

    def sums(gm):
        return [n for n in gm.graph.nodes if n.target is column_sum]
    w, b = randn(40, 24, seed=20), randn(40, seed=21)
    graphs = check_same(lambda x, w, b: F.linear(x, w, b).relu(), randn(3, 5, 24, seed=22), w, b, atol=2e-5)
    assert len(sums(graphs["backward"][0])) == 1
    graphs = check_same(lambda x: (x[0].sum(0), x.sum((0, 1), keepdim=True), x.sum(0)), randn(3, 5, 8, seed=23),
                        grad=False)
    assert len(sums(graphs["inference"][0])) == 2          # x.sum(0) of a 3-D x keeps a dim: stays ATen
    graphs = check_same(lambda x: (x.sum(-1), x.sum(0, dtype=torch.float64)), randn(6, 8, seed=24), grad=False)
    assert not sums(graphs["inference"][0])
    graphs = check_same(lambda x: x.sum(0), randn(8, seed=25), grad=False)
    assert not sums(graphs["inference"][0])


@pytest.mark.gpu
def test_a_block_with_norm_and_attention_softmax_trains_on_the_gpu():
    g = torch.Generator().manual_seed(9)
    ln = torch.nn.LayerNorm(256).cuda()
    w = (torch.randn(256, 256, generator=g) / 16).cuda().requires_grad_()

    def block(x):
        h = ln(x)
        scores = (h @ w) @ h.transpose(-1, -2) / 16
        return torch.softmax(scores, -1) @ h
    x = torch.randn(4, 128, 256, generator=g).cuda()
    torch._dynamo.reset()
    compiled = torch.compile(block, backend="cute")
    got, want = compiled(x), block(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    got.square().sum().backward()
    grads = [p.grad.clone() for p in (w, ln.weight, ln.bias)]
    for p in (w, ln.weight, ln.bias):
        p.grad = None
    want.square().sum().backward()
    for mine, theirs in zip(grads, (w.grad, ln.weight.grad, ln.bias.grad)):
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-3)


def calls_of(seen, kind):
    return [n.target for _, gm, _ in [s for s in seen if s[0] == kind] for n in gm.graph.nodes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_calls_become_the_row_op_with_its_backward(dtype):
    norm = torch.nn.RMSNorm(32, eps=1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(randn(32, seed=10))

    def fn(x, w):
        return torch.nn.functional.rms_norm(x, (32,), w, 1e-5) * 2 + norm(x)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    graphs = check_same(fn, randn(3, 4, 32, seed=11).to(dtype), randn(32, seed=12).to(dtype), rtol=tol, atol=tol)
    assert row_calls(graphs["forward"][0]).count(torch.ops.cute.layer_norm.default) == 2
    assert row_calls(graphs["backward"][0]).count(torch.ops.cute.layer_norm_backward.default) == 2


@pytest.mark.parametrize("reduction,ignore_index,smoothing", [("mean", -100, 0.0), ("sum", 2, 0.0), ("none", -100, 0.0),
                                                              ("mean", 2, 0.1), ("none", -100, 0.25)])
def test_cross_entropy_calls_become_the_row_op_with_its_backward(reduction, ignore_index, smoothing):
    target = torch.tensor([0, 2, 4, 2, 1, ignore_index])

    def fn(logits):
        return F.cross_entropy(logits * 3, target, ignore_index=ignore_index, reduction=reduction,
                               label_smoothing=smoothing)
    graphs = check_same(fn, randn(6, 5, seed=13), rtol=1e-5, atol=1e-5)
    ce = [n for n in graphs["forward"][0].graph.nodes if n.target is torch.ops.cute.cross_entropy.default]
    backward = [n for n in graphs["backward"][0].graph.nodes
                if n.target is torch.ops.cute.cross_entropy_backward.default]
    assert len(ce) == len(backward) == 1
    assert (ce[0].args + (0.0, 0.0))[3] == smoothing and (backward[0].args + (0.0, 0.0))[5] == smoothing


def test_cross_entropy_the_kernel_cannot_take_stays_torch():
    """Class weights, soft (probability) targets, 3-D logits."""
    t = torch.tensor([0, 2, 1])
    for fn, args in [(lambda y: F.cross_entropy(y, t, weight=torch.ones(4)), (randn(3, 4, seed=14),)),
                     (lambda y: F.cross_entropy(y, torch.softmax(y.detach(), -1)), (randn(3, 4, seed=16),)),
                     (lambda y: F.cross_entropy(y, torch.zeros(3, 2, dtype=torch.long)), (randn(3, 4, 2, seed=17),))]:
        graphs = check_same(fn, *args, grad=False)
        assert not any(str(n.target).startswith("cute.cross") for n in graphs["inference"][0].graph.nodes)


class WrittenRMSNorm(torch.nn.Module):
    """Hugging Face's LlamaRMSNorm, as written there."""

    def __init__(self, n, eps=1e-6, weight_first=True):
        super().__init__()
        self.weight, self.variance_epsilon, self.weight_first = torch.nn.Parameter(randn(n, seed=20)), eps, weight_first

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight_first:
            return self.weight * hidden_states.to(input_dtype)
        return hidden_states.to(input_dtype) * self.weight


@pytest.mark.parametrize("dtype,weight_first", [(torch.float32, True), (torch.bfloat16, True),
                                                (torch.bfloat16, False)])
def test_a_written_out_rms_norm_becomes_the_row_op(dtype, weight_first):
    norm = WrittenRMSNorm(32, weight_first=weight_first).to(dtype)

    def fn(x):
        return norm(x * 2) + 1
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    graphs = check_same(fn, randn(3, 4, 32, seed=21).to(dtype), rtol=tol, atol=tol)
    assert torch.ops.cute.layer_norm.default in row_calls(graphs["forward"][0])
    assert torch.ops.cute.layer_norm_backward.default in row_calls(graphs["backward"][0])
    assert not any(n.target is torch.ops.aten.mean.dim for n in graphs["forward"][0].graph.nodes)


def test_the_examples_old_rms_norm_and_near_misses():
    """x.float()...(x.float() * r).to(x.dtype) * w is matched, also where the variance has another
    use (it stays computed for it); a mean over dim 0 and a result in another dtype (an fp32
    weight on bf16 x) are not."""
    w = randn(32, seed=22)

    def example(x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * w.bfloat16()

    def dim0(x):
        return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6)

    def reused(x):
        variance = (x * x).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6) + variance

    def promoted(x):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)) * w
    for fn, x in ((example, randn(4, 32, seed=23).bfloat16()), (reused, randn(4, 32, seed=25))):
        graphs = check_same(fn, x, grad=False, rtol=3e-2, atol=3e-2)
        assert row_calls(graphs["inference"][0]), fn.__name__
    for fn, x in ((dim0, randn(4, 32, seed=24)), (promoted, randn(4, 32, seed=26).bfloat16())):
        graphs = check_same(fn, x, grad=False, rtol=3e-2, atol=3e-2)
        assert not row_calls(graphs["inference"][0]), fn.__name__


def test_replacing_calls_keeps_in_place_updates_and_torchs_default_eps():
    """Found in review: a graph-wide dead-code pass dropped buf.add_(1); eps=None is float32's
    machine epsilon for bf16 inputs too (torch.rms_norm's), not bf16's."""
    from test_backend_graphs import compile_cpu
    norm = torch.nn.RMSNorm(32).bfloat16()               # eps None

    def fn(x, buf):
        buf.add_(1)
        return norm(x) + F.rms_norm(x, (32,), None, 1e-6)
    compiled, seen = compile_cpu(fn)
    x = (randn(3, 32, seed=30) * 0.02).bfloat16()         # small values: eps matters
    buf = torch.zeros(4)
    got = compiled(x, buf)
    assert torch.equal(buf, torch.ones(4))
    torch.testing.assert_close(got.float(), fn(x, torch.zeros(4)).float(), rtol=2e-2, atol=2e-2)
    assert row_calls(seen[0][1]).count(torch.ops.cute.layer_norm.default) == 2


def test_the_cross_entropy_rewrite_keeps_the_logits_dtype():
    target = torch.tensor([0, 2, 4, 1])
    graphs = check_same(lambda y: F.cross_entropy(y, target), randn(4, 5, seed=31).bfloat16(), rtol=2e-2,
                        atol=2e-2)
    assert any(n.target is torch.ops.cute.cross_entropy.default for n in graphs["forward"][0].graph.nodes)
