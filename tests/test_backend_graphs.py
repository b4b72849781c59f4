"""The torch.compile backend's graph work on CPU (torch 2.13): which regions are found, and that
the rewritten forward and backward graphs compute the same function. The rewritten graphs run
with each cute::pointwise call replaced by a CPU evaluation of its expressions
(cute_torch/backend/reference.py), and under meta tensors through the fake kernels."""

import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import cute_torch.ops
from cute_torch.backend import Options, cute_backend
from cute_torch.backend.reference import reference_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = Options(devices=("cpu",), check_builds=False)
CUTE_OPS = (torch.ops.cute.pointwise.default, torch.ops.cute.pointwise.multi)


def compile_cpu(fn, options=CPU, dynamic=False):
    """torch.compile with the backend's graph pipeline, graphs run by the CPU reference;
    returns (compiled fn, [(kind, gm, result)])."""
    seen = []
    torch._dynamo.reset()
    return torch.compile(fn, backend=reference_backend(options, seen), dynamic=dynamic), seen


def cute_calls(gm):
    return [n for n in gm.graph.nodes if n.target in CUTE_OPS]


def exprs_of(gm):
    out = []
    for n in cute_calls(gm):
        out.append(n.args[0] if n.target is CUTE_OPS[0] else tuple(n.args[0]))
    return out


def aten_targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function" and n.target not in CUTE_OPS
            and n.target.__name__ != "getitem"]


def check_same(fn, *inputs, grad=True, rtol=1.3e-6, atol=1e-5, dynamic=False, options=CPU):
    """Compiles fn, checks forward values (and gradients) against eager; returns the graphs seen."""
    compiled, seen = compile_cpu(fn, options, dynamic=dynamic)
    leaves = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    mine = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    expected, got = fn(*leaves), compiled(*mine)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)
    if grad:
        sum(e.float().sum() for e in expected if e.is_floating_point()).backward()
        sum(g.float().sum() for g in got if g.is_floating_point()).backward()
        for a, b in zip(leaves, mine):
            if a.grad is not None:
                torch.testing.assert_close(b.grad, a.grad, rtol=rtol, atol=atol)
    return {kind: (gm, result) for kind, gm, result in seen}


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


# -- regions ----------------------------------------------------------------------------------------


def test_chain_is_one_kernel():
    graphs = check_same(lambda x: torch.relu(x * 2 + 1).exp() - 0.5, randn(4, 8), grad=False)
    gm, result = graphs["inference"]
    assert exprs_of(gm) == ["(exp(relu(((x0 * 2) + 1))) - 0.5)"]
    assert aten_targets(gm) == []
    assert len(result["fused"]) == 1 and len(result["fused"][0].nodes) == 5


def test_diamond_inlines_the_shared_value():
    def f(x, y):
        t = x * y
        return t.exp() + torch.tanh(t)
    gm, _ = check_same(f, randn(4, 8), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == ["(exp((x0 * x1)) + tanh((x0 * x1)))"]


def test_intermediate_used_outside_becomes_a_second_output():
    def f(x, y):
        t = x + y
        return torch.relu(t) * 2, t.sum()
    gm, result = check_same(f, randn(4, 8), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == [("(x0 + x1)", "(relu((x0 + x1)) * 2)")]
    assert aten_targets(gm) == [torch.ops.aten.sum.dim_IntList]
    assert [len(r.outputs) for r in result["fused"]] == [2]


def test_kernel_output_feeds_a_later_kernel():
    # d is stored for sin (not fusible) and read by the second kernel, which needs sin(d).
    def f(x, y):
        d = x - y
        return torch.sigmoid(y) * d.abs() + torch.log(torch.sin(d) + 2)
    gm, _ = check_same(f, randn(4, 8), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == ["(x0 - x1)", "((sigmoid(x0) * abs(x1)) + log((x2 + 2)))"]
    assert aten_targets(gm) == [torch.ops.aten.sin.default]


def test_unsupported_op_splits_regions():
    gm, _ = check_same(lambda x: torch.sin(x * 2) + 1, randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == ["(x0 * 2)", "(x0 + 1)"]
    assert aten_targets(gm) == [torch.ops.aten.sin.default]


def test_broadcasting_and_scalars():
    def f(x, b, s):
        return F.gelu(x + b) * s + 3
    gm, result = check_same(f, randn(4, 8), randn(8), randn(()), grad=False)["inference"]
    assert exprs_of(gm) == ["((gelu((x0 + x1)) * x2) + 3)"]
    assert [tuple(leaf.node.meta["val"].shape) for leaf in result["fused"][0].leaves] == [(4, 8), (8,), ()]


def test_expand_of_scalars_stays_aten():
    # The kernel's shape is the broadcast of its inputs: 0-dim inputs cannot make [4, 8].
    def f(s, y):
        return (s * 2).expand(4, 8) + y
    compiled, seen = compile_cpu(f)
    s, y = randn(()), randn(8)
    torch.testing.assert_close(compiled(s, y), f(s, y))
    _, gm, result = seen[0]
    assert [type(e).__name__ for _, e in result["fallback"]] == ["ValueError"]


def test_benchmark_function_is_one_kernel():
    import importlib.util
    spec = importlib.util.spec_from_file_location("backend_bench", os.path.join(ROOT, "benchmarks", "backend.py"))
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    gm, _ = check_same(bench.pointwise_heavy, randn(64, 32), randn(64, 32), randn(32), grad=False)["inference"]
    assert exprs_of(gm) == [bench.EXPR]


def test_dtype_casts():
    def f(x, y):
        return (x.to(torch.bfloat16) * y).float() + 1, (x > 0).to(torch.int32)
    gm, _ = check_same(f, randn(4, 8), randn(4, 8, dtype=torch.bfloat16), grad=False)["inference"]
    assert exprs_of(gm) == [("(float32((bfloat16(x0) * x1)) + 1)", "int32((x0 > 0))")]


def test_alpha_scales_the_second_operand():
    # add/sub with alpha != 1 (weight decay: grad + wd * param) fuse; alpha arrives spelled.
    def f(x, y):
        return torch.add(x, y, alpha=0.5) - torch.sub(y, x, alpha=-2) + torch.rsub(x, y, alpha=3)
    gm, _ = check_same(f, randn(4, 8), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == ["(((x0 + 0.5 * x1) - (x1 - (-2) * x0)) + (x1 - 3 * x0))"]


def test_a_fill_is_a_constant_in_its_dtype():
    # full_like(b, 0.1) is bf16's 0.1 (rounded), a literal; the kernel does not read b. A fill
    # wider than its user's other operand stays ATen (the kernel's shape is its inputs'
    # broadcast), and so does a fill used by no fused op.
    def f(x, b):
        return x + torch.full_like(b, 0.1), torch.full_like(x, -2.5) * x
    gm, _ = check_same(f, randn(4, 8), randn(4, 8, dtype=torch.bfloat16), grad=False, rtol=0, atol=0)["inference"]
    assert exprs_of(gm) == [("(x0 + 0.10009765625)", "((-2.5) * x0)")]
    gm, _ = check_same(lambda x, b: x * torch.full_like(b, 2.0), randn(8), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == [] and torch.ops.aten.full_like.default in aten_targets(gm)
    gm, _ = check_same(lambda b: torch.full_like(b, 2.0), randn(4, 8), grad=False)["inference"]
    assert exprs_of(gm) == []


def test_independent_scalars_share_a_kernel_up_to_a_limit(monkeypatch):
    # 0-dim values that share nothing still group (one launch for many scalars); tensors of
    # one shape that share nothing do not.
    import cute_torch.backend.fusion as fusion
    monkeypatch.setattr(fusion, "MAX_SCALAR_GROUP", 2)

    def f(a, b, c, x, y):
        return a + 1, b * 2, c - 3, x + 1, y * 2
    gm, _ = check_same(f, randn(()), randn(()), randn(()), randn(4), randn(4), grad=False)["inference"]
    assert exprs_of(gm) == [("(x0 + 1)", "(x1 * 2)"), "(x0 - 3)", "(x0 + 1)", "(x0 * 2)"]


def test_views_between_ops_are_pushed_onto_the_inputs():
    def f(x, y, z):
        a = (x * y).permute(1, 0) + z            # a permute of an intermediate
        return torch.relu(a.unsqueeze(0)) * 2    # an unsqueeze
    gm, result = check_same(f, randn(4, 8), randn(4, 8), randn(8, 4), grad=False)["inference"]
    assert exprs_of(gm) == ["(relu(((x0 * x1) + x2)) * 2)"]
    views = [leaf.views for leaf in result["fused"][0].leaves]
    aten = torch.ops.aten
    expected = [[aten.permute.default, aten.unsqueeze.default]] * 2 + [[aten.unsqueeze.default]]
    assert [[v[0] for v in vs] for vs in views] == expected


def test_view_of_a_broadcast_value_ends_the_region():
    # (x + b) has inputs of another shape: its flattening cannot be pushed onto b.
    def f(x, b, z):
        return (x + b).reshape(32) * z
    gm, _ = check_same(f, randn(4, 8), randn(8), randn(32), grad=False)["inference"]
    assert exprs_of(gm) == ["(x0 + x1)", "(x0 * x1)"]


def test_training_graphs_are_rewritten_forward_and_backward():
    def f(x, w, b):
        h = F.gelu(x @ w + b)
        return (h * torch.sigmoid(h) + x).pow(2).mean()
    graphs = check_same(f, randn(8, 16), randn(16, 16), randn(16))
    for kind in ("forward", "backward"):
        gm, result = graphs[kind]
        assert result["fused"], kind
        assert not any(t in (torch.ops.aten.gelu.default, torch.ops.aten.sigmoid.default, torch.ops.aten.mul.Tensor)
                       for t in aten_targets(gm)), kind


def test_symint_sizes_stay_symbolic():
    def f(x, b):
        return torch.relu(x * 2 + b).sum(0)
    compiled, seen = compile_cpu(f, dynamic=True)
    for n in (6, 10):
        x, b = randn(n, 8), randn(8)
        torch.testing.assert_close(compiled(x, b), f(x, b))
    assert len(seen) == 1  # one graph for both sizes
    _, gm, _ = seen[0]
    placeholders = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(p, torch.SymInt) for p in placeholders)
    (call,) = cute_calls(gm)
    assert isinstance(call.meta["val"].shape[0], torch.SymInt)


def test_rewritten_graph_has_eager_shapes_and_dtypes_on_meta():
    def f(x, y, b):
        t = x.to(torch.bfloat16) + b
        return t * y, (t > 0)
    compiled, seen = compile_cpu(f)
    compiled(randn(4, 8), randn(4, 8, dtype=torch.bfloat16), randn(8))
    _, gm, _ = seen[0]
    meta = [torch.empty(4, 8, device="meta"), torch.empty(4, 8, device="meta", dtype=torch.bfloat16),
            torch.empty(8, device="meta")]
    got, expected = gm(*meta), f(*meta)
    for g, e in zip(got, expected):
        assert (g.shape, g.dtype) == (e.shape, e.dtype)


# -- options, fallback, logs ------------------------------------------------------------------------


def test_failed_build_falls_back_to_aten_with_one_warning(monkeypatch):
    from cute_torch.backend import rewrite

    def broken(plan, device):
        raise RuntimeError("ptxas exploded")
    monkeypatch.setattr(rewrite, "build", broken)
    def f(x):
        return torch.relu(x) * 2  # the line the warning names
    compiled, seen = compile_cpu(f, Options(devices=("cpu",)))
    x = randn(4, 8)
    with pytest.warns(UserWarning, match="stays ATen; its kernel failed to build: RuntimeError: ptxas exploded") as w:
        torch.testing.assert_close(compiled(x), torch.relu(x) * 2)
    assert str(w[0].message).startswith(f"{__file__}:{f.__code__.co_firstlineno + 1} in f: return torch.relu(x) * 2")
    _, gm, result = seen[0]
    assert cute_calls(gm) == [] and len(result["fallback"]) == 1

    compiled, _ = compile_cpu(lambda x: torch.relu(x) * 2, Options(devices=("cpu",), strict=True))
    with pytest.raises(Exception, match="failed to build: RuntimeError: ptxas exploded"):
        compiled(x)


def test_kernels_build_at_compile_time():
    # The compile-only tier: the multi-output kernel is traced, lowered and run through ptxas.
    def f(x, y):
        t = x + y
        return t, torch.relu(t).sum()
    compiled, seen = compile_cpu(f, Options(devices=("cpu",)))
    compiled(randn(4, 8), randn(4, 8))
    _, gm, result = seen[0]
    assert len(result["fused"]) == 1 and result["fallback"] == []


def test_pointwise_multi_argument_errors():
    x = torch.empty(4, 8, device="meta")
    with pytest.raises(ValueError, match="2 expressions but 1 out_dtypes"):
        torch.ops.cute.pointwise.multi(["x0", "x0 * 2"], [x], [torch.float32])
    with pytest.raises(ValueError, match="needs at least one expression"):
        torch.ops.cute.pointwise.multi([], [x])
    with pytest.raises(cute_torch.ops.ExpressionError, match="unknown function 'sin'"):
        torch.ops.cute.pointwise.multi(["x0", "sin(x0)"], [x])


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown option.*'fallbak'"):
        Options.parse({"fallbak": "aten"})
    with pytest.raises(ValueError, match="'fallback' must be one of"):
        Options.parse({"fallback": "triton"})
    assert Options.parse({"fallback": "inductor", "strict": True}).strict


def test_log_graphs_and_debug_dir(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_LOG_GRAPHS", "1")
    options = Options.parse({"devices": ("cpu",), "check_builds": False, "debug_dir": str(tmp_path)})
    compiled, _ = compile_cpu(lambda x: torch.relu(x * 3).sum(), options)
    compiled(randn(4, 8))
    err = capfd.readouterr().err
    assert "== cute backend [inference]: before" in err and "== cute backend [inference]: after" in err
    assert ("cute backend [inference]: 2 ops fused into 1 kernels (0 multi-output), 0 regions fell back to ATen; "
            "ATen ops left: sum.dim_IntList x1") in err
    assert "cute backend [inference]: runtime: 0 kernels write the inputs they update (in_place.py), 0 launches " \
        "merge several (horizontal.py)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inference.after.py", "inference.before.py",
                                                          "inference.regions.txt", "inference.runtime.py"]
    assert (tmp_path / "inference.regions.txt").read_text().startswith("fused: [relu] = relu((x0 * 3))\n")


def test_backend_resolves_by_name_in_a_fresh_process():
    code = ("import sys, torch\n"
            "from torch._dynamo import lookup_backend\n"
            "assert 'cute_torch' not in sys.modules\n"
            "fn = lookup_backend('cute')\n"
            "print(fn.__module__, 'cute_torch' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cute_torch.backend", "True"]


def test_cute_backend_runs_on_cpu_tensors_without_fusing():
    # The default options fuse CUDA tensors only; on CPU the graph stays ATen and runs.
    torch._dynamo.reset()
    f = lambda x: torch.relu(x) * 2  # noqa: E731
    x = randn(4, 8)
    torch.testing.assert_close(torch.compile(f, backend="cute")(x), f(x))



def optimizer_against_eager(make, shapes, steps: int, seed: int, dtype=torch.float32, options=CPU,
                            dynamic=False, tol=None, fresh_grads=True, schedule=None) -> list:
    """Compiles make(params).step with the graph pipeline (graphs run by the CPU reference) and
    runs `steps` steps beside eager's on twin parameters: new gradients every step (or only
    before the first), `schedule(optimizer)`'s scheduler stepped after each; the parameters
    must then agree within `tol` (fp32's by default). Returns the graphs seen."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g).to(dtype)) for s in shapes]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt, ref = make(params), make(twins)
    schedules = [schedule(o) for o in (opt, ref)] if schedule else []
    step, seen = compile_cpu(opt.step, options, dynamic=dynamic)
    for i in range(steps):
        if fresh_grads or i == 0:
            for p, t in zip(params, twins):
                p.grad = torch.randn(p.shape, generator=g).to(dtype)
                t.grad = p.grad.clone()
        step()
        ref.step()
        for scheduler in schedules:
            scheduler.step()
    for p, t in zip(params, twins):
        torch.testing.assert_close(p, t, **(tol or dict(rtol=1e-5, atol=1e-6)))
    return seen


STRICT = Options(devices=("cpu",), strict=True)


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_compiled_adamw_step_is_one_launch_for_every_parameter(dtype, foreach):
    # The functionalized step is full of aten.copy (the in-place updates) and prims.fma (addcmul):
    # both fuse, so each parameter's m, v and weight update is one three-output kernel (built,
    # strict), and three steps match eager's AdamW. The foreach path (CUDA's default) arrives as
    # _foreach_* ops over all three parameters, split per parameter (foreach.py): the same kernels.
    shapes = [(64, 32), (32,), (16, 8)]
    tol = None if dtype == torch.float32 else dict(rtol=8e-3, atol=8e-3)
    seen = optimizer_against_eager(lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=foreach), shapes, 3, 8,
                                   dtype, STRICT, tol=tol, fresh_grads=False)
    (_, gm, result), = seen
    updates = [r for r in result["fused"] if r.outputs[0].meta["val"].dim() > 0]
    assert len(updates) == len(shapes) and all(len(r.outputs) == 3 for r in updates)
    left = [n.target for n in gm.graph.nodes]
    assert torch.ops.aten.copy.default not in left and torch.ops.prims.fma.default not in left
    assert torch.ops.aten.pow.Scalar not in left     # the bias corrections joined the update's kernel
    # ... and writes them into the parameter and its moments (in_place.py), as one kernel writes
    # every parameter's step count (0-dim values group: fusion.MAX_SCALAR_GROUP; the updates then
    # read the counts there): no copy_ is left. The updates, the same expressions over each
    # parameter's tensors, are one launch of one segment each (horizontal.py).
    assert left.count(torch.ops.cute.pointwise.into) == 1
    (merged,) = gm.graph.find_nodes(op="call_function", target=torch.ops.cute.pointwise.foreach_into)
    exprs, inputs, outs = merged.args
    assert len(exprs) == 3 and len(outs) == 3 * len(shapes)
    assert [tuple(o.meta["val"].shape) for o in outs[::3]] == [tuple(s) for s in shapes]
    assert torch.ops.aten.copy_.default not in left
    assert not any(str(t).startswith("aten._foreach") for t in left)



OPTIMIZERS = {
    "sgd_nesterov": lambda ps, **kw: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-2, **kw),
    "adam": lambda ps, **kw: torch.optim.Adam(ps, lr=1e-2, weight_decay=1e-2, **kw),
    "adamw_amsgrad": lambda ps, **kw: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, **kw),
    "rmsprop": lambda ps, **kw: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, **kw),
    "adagrad": lambda ps, **kw: torch.optim.Adagrad(ps, lr=1e-2, **kw),
    "nadam": lambda ps, **kw: torch.optim.NAdam(ps, lr=1e-2, **kw),
    "radam": lambda ps, **kw: torch.optim.RAdam(ps, lr=1e-2, **kw),
    "adamax": lambda ps, **kw: torch.optim.Adamax(ps, lr=1e-2, **kw),
}


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_optimizer_steps_match_eager(name, dtype, foreach):
    # Their functionalized steps go through the copy, fma and power rewrites and in_place.py
    # (new gradients every step): four steps against eager. bf16 state rounds once per kernel
    # here and once per op in eager: a bf16 ulp or two apart. Their foreach paths (CUDA's
    # default) split per parameter (foreach.py) and leave no foreach op behind.
    shapes = ((64, 32), (32,))
    tol = None if dtype == torch.float32 else dict(rtol=1.6e-2, atol=8e-3)
    seen = optimizer_against_eager(lambda ps: OPTIMIZERS[name](ps, foreach=foreach), shapes, 4, 2, dtype, tol=tol)
    # The steady state's graph (the last; SGD's first step creates its momentum buffers) is
    # nothing but in-place kernels: one launch for every parameter's update (horizontal.py) and
    # one for the step counts, if any.
    (*_, (_, gm, _)) = seen
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls.count(torch.ops.cute.pointwise.foreach_into) == 1, calls
    assert set(calls) <= {torch.ops.cute.pointwise.into, torch.ops.cute.pointwise.foreach_into} and len(calls) <= 2


def test_a_scheduled_tensor_learning_rate_compiles_once():
    # lr as a tensor (what torch recommends for compiled optimizers with schedulers): the step
    # is one graph whatever the scheduler sets, the rate a 0-dim kernel input; five steps match eager.
    seen = optimizer_against_eager(lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-2)), ((64, 32), (32,)), 5, 5,
                                   options=STRICT,
                                   schedule=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 0.9 ** s))
    (_, gm, _), = seen
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert sorted(map(str, calls)) == ["cute.pointwise.foreach_into", "cute.pointwise.into"], calls


def test_a_dynamic_optimizer_step_matches_eager():
    # dynamic=True: the parameters' sizes are symbolic, the split per parameter and the in-place
    # kernels still apply; three steps against eager. (A symbolic scalar_tensor stays ATen: the
    # expression language has no run-time scalars but 0-dim tensors.)
    shapes = ((48, 32), (16,))
    seen = optimizer_against_eager(lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True), shapes, 3, 3,
                                   options=STRICT, dynamic=True)
    (_, gm, _), = seen
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls.count(torch.ops.cute.pointwise.into) == 1, calls
    assert calls.count(torch.ops.cute.pointwise.foreach_into) == 1, calls
    assert set(calls) <= {torch.ops.cute.pointwise.into, torch.ops.cute.pointwise.foreach_into,
                          torch.ops.aten.scalar_tensor.default}


def test_modes_are_checked():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown mode 'fastest'; known: 'default', 'reduce-overhead'"):
        torch.compile(lambda x: x * 2, backend="cute", mode="fastest")(randn(4))


def test_reduce_overhead_runs_a_graph_it_cannot_record_as_without_the_mode():
    # CUDA graphs need CUDA tensors: on CPU the trees decline (torch counts the skip) and the
    # graphs run as they would without the mode (ATen: nothing is fused on CPU), forward and backward.
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    w = torch.randn(8, 8, generator=torch.Generator().manual_seed(5), requires_grad=True)

    def f(x):
        return torch.tanh(x @ w) * 2
    x = randn(4, 8)
    options = {"check_builds": False}
    by_mode = torch.compile(f, backend=lambda gm, inputs: cute_backend(gm, inputs, options, mode="reduce-overhead"))
    by_option = torch.compile(f, backend="cute", options={**options, "cuda_graphs": True})
    want = f(x)
    want.sum().backward()
    grad, w.grad = w.grad, None
    for compiled in (by_mode, by_option, by_mode):
        got = compiled(x)
        got.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(w.grad, grad)
        w.grad = None
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] >= 2


# -- matmuls with their epilogues (cute::gemm) ------------------------------------------------------

GEMM_OPS = (torch.ops.cute.gemm.default, torch.ops.cute.gemm.multi)


def gemm_calls(gm):
    return [n for n in gm.graph.nodes if n.target in GEMM_OPS]


def bf16(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).bfloat16()


def test_a_linear_with_its_activation_becomes_one_gemm():
    def f(x, w, b):
        return F.gelu(F.linear(x, w, b), approximate="tanh") * 2
    graphs = check_same(f, bf16(32, 64, seed=1), bf16(48, 64, seed=2), bf16(48, seed=3), grad=False,
                        rtol=2e-2, atol=2e-2)
    gm, result = graphs["inference"]
    (call,) = gemm_calls(gm)
    assert call.target is torch.ops.cute.gemm.default and "gelu_tanh" in call.args[2] and "acc + x0" in call.args[2]
    assert not cute_calls(gm) and torch.ops.aten.addmm.default not in aten_targets(gm)
    assert len(result["gemms"]) == 1 and "addmm" in result["gemms"][0]


def test_a_linear_on_three_dimensional_inputs_fuses_through_the_row_view():
    def f(x, w, b, r):
        return torch.relu(F.linear(x, w, b)) + r
    graphs = check_same(f, bf16(2, 16, 64, seed=4), bf16(32, 64, seed=5), bf16(32, seed=6), bf16(2, 16, 32, seed=7),
                        grad=False, rtol=2e-2, atol=2e-2)
    gm, _ = graphs["inference"]
    (call,) = gemm_calls(gm)
    assert [fake.shape for fake in (call.meta["val"],)] == [(32, 32)]          # rows of the matmul
    assert not cute_calls(gm)


def test_the_training_forward_keeps_the_pre_activation_from_the_same_gemm():
    def f(x, w, b):
        return F.silu(x @ w.t() + b).sum()
    graphs = check_same(f, bf16(32, 64, seed=8), bf16(48, 64, seed=9), bf16(48, seed=10), rtol=3e-2, atol=3e-1)
    gm, result = graphs["forward"]
    calls = gemm_calls(gm)
    assert calls, [str(n.target) for n in gm.graph.nodes]
    assert result["gemms"]


def test_a_swiglu_takes_one_projection_as_the_others_epilogue_input():
    """silu(x W_gate) * (x W_up): the up projection stays a matmul and the gate's GEMM reads it
    in its epilogue (one output pass fewer than two GEMMs and a pointwise kernel; one gated
    GEMM over interleaved weights would save the up projection's store too, not done yet)."""
    def f(x, wg, wu):
        return F.silu(F.linear(x, wg)) * F.linear(x, wu)
    graphs = check_same(f, bf16(32, 64, seed=40), bf16(96, 64, seed=41), bf16(96, 64, seed=42), grad=False,
                        rtol=2e-2, atol=2e-2)
    gm, result = graphs["inference"]
    (call,) = gemm_calls(gm)
    assert "sigmoid(float32(acc))" in call.args[2] and len(call.args[3]) == 1 and not cute_calls(gm)
    assert aten_targets(gm).count(torch.ops.aten.mm.default) == 1


def test_the_gemm_rewrite_can_be_turned_off():
    compiled, seen = compile_cpu(lambda x, w: torch.relu(x @ w.t()), Options(devices=("cpu",), check_builds=False,
                                                                          gemm=False))
    compiled(bf16(16, 32, seed=13), bf16(24, 32, seed=14))
    (_, gm, result), = seen
    assert not gemm_calls(gm) and cute_calls(gm) and not result["gemms"]


def test_matmuls_that_cannot_take_an_epilogue_stay_aten():
    # fp32 operands, and an output row of 20 bf16 (40 bytes: TMA stores 16-byte multiples)
    for x, w in ((randn(16, 32), randn(24, 32)), (bf16(16, 32, seed=11), bf16(20, 32, seed=12))):
        graphs = check_same(lambda x, w: torch.relu(x @ w.t()), x, w, grad=False, rtol=2e-2, atol=2e-2)
        gm, result = graphs["inference"]
        assert not gemm_calls(gm) and not result["gemms"]


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_a_transformer_block_trains_like_eager(mlp):
    """Attention (SDPA, causal) inside a rewritten training graph: every gradient as eager's
    (the CPU flash attention's core decomposition got the q/k/v gradients wrong; it is kept whole);
    the GELU MLP and the SwiGLU one."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from transformer_block import Block
    torch.manual_seed(0)
    model = Block(64, 4, mlp)
    twin = copy.deepcopy(model)
    x, target = randn(2, 32, 64), randn(2, 32, 64)
    F.mse_loss(model(x), target).backward()
    compiled, seen = compile_cpu(lambda x, t: F.mse_loss(twin(x), t))
    compiled(x, target).backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
    assert any(result["fused"] for kind, _, result in seen if kind == "backward")


def test_matmul_epilogues_the_gemm_cannot_take_stay_correct():
    """Found in review: an input computed from the matmul itself (a softmax's max: the GEMM
    cannot read it), K rows TMA cannot read, a broadcast row of three dims through the row view."""
    def softmax_like(x, w):
        y = x @ w.t()
        return torch.exp(y - y.amax(-1, keepdim=True))
    graphs = check_same(softmax_like, bf16(16, 32, seed=15), bf16(24, 32, seed=16), grad=False, rtol=2e-2, atol=2e-2)
    assert not graphs["inference"][1]["gemms"]
    graphs = check_same(lambda x, w: torch.relu(x @ w.t()), bf16(16, 100, seed=17), bf16(24, 100, seed=18),
                        grad=False, rtol=2e-2, atol=2e-2)      # K = 100 bf16: 200-byte rows
    assert not graphs["inference"][1]["gemms"]
    graphs = check_same(lambda x, w, s: F.linear(x, w) * s, bf16(2, 8, 32, seed=19), bf16(24, 32, seed=20),
                        bf16(1, 1, 24, seed=21), grad=False, rtol=2e-2, atol=2e-2)
    gm, result = graphs["inference"]
    assert result["gemms"] and all(fake.dim() == 1 for n in gemm_calls(gm) for fake in
                                   (inp.meta["val"] for inp in n.args[3]))


def test_the_transformer_example_trains_under_ddp():
    """examples/transformer_block.py under torchrun with 2 processes (gloo on CPU): DDP and the
    backend's rewrite together, losses within tolerance of eager's (the script checks)."""
    env = dict(os.environ, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             os.path.join(ROOT, "examples", "transformer_block.py")],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cute (reference)" in result.stdout and "pointwise kernels" in result.stdout


def test_gemm_fusion_keeps_a_dynamic_batch_symbolic():
    """dynamic=True: M is a SymInt, the matmul still takes its epilogue (N and K, a module's
    parameters' sizes, are static), and a second batch size reuses the compiled graph. (With
    the weight a graph input its sizes are symbolic too, and the TMA row alignment of N and K
    cannot be known without a guard: such a matmul stays ATen.)"""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 48).bfloat16()

    def f(x):
        return F.gelu(layer(x))
    compiled, seen = compile_cpu(f, dynamic=True)
    for rows in (32, 40):
        x = bf16(rows, 64, seed=rows)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x).float(), f(x).float(), rtol=2e-2, atol=2e-2)
    assert len(seen) == 1
    (_, gm, result), = seen
    assert result["gemms"] and gemm_calls(gm)
