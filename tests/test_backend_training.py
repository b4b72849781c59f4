"""torch.compile(backend="cute") on the GPU: cute::pointwise.multi against eager, a training
loop against eager, dynamic shapes without new kernels, and fallback="inductor"."""

import copy
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import cute_torch.backend  # noqa: E402,F401
import cute_torch.ops  # noqa: E402
from cute_torch.ops import registration  # noqa: E402
from cute_torch.pointwise.dtypes import reference  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from mlp_block import Block, pointwise_loss, train  # noqa: E402

pytestmark = pytest.mark.gpu


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, device="cuda").to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_multi_matches_the_reference(dtype):
    x, b = randn(257, 96, dtype=dtype), randn(96, dtype=dtype)
    exprs = ["x0 + x1", "gelu(x0 + x1) * 2", "x0 > x1"]
    block = torch.empty(257 * 96 * 3, device="cuda").fill_(float("nan"))  # poison what the outputs get
    del block
    outs = torch.ops.cute.pointwise.multi(exprs, [x, b], [dtype, torch.float32, torch.bool])
    for e, out, d in zip(exprs, outs, [dtype, torch.float32, torch.bool]):
        assert out.dtype == d and out.shape == (257, 96)
        if d == torch.bool:
            assert torch.equal(out, reference(e, [x, b]))
        else:  # computed in fp32 from the inputs, rounded once to the output dtype
            ref = reference(e, [x.double(), b.double()]).to(d)
            torch.testing.assert_close(out, ref, rtol=1e-5 if d == torch.float32 else 8e-3, atol=1e-5)


@pytest.mark.parametrize("options", [{}, {"fallback": "inductor"}], ids=["aten", "inductor"])
def test_training_loop_matches_eager(options):
    torch.manual_seed(0)
    torch._dynamo.reset()
    eager = Block(64).cuda()
    compiled = copy.deepcopy(eager)
    x, target = randn(128, 64), randn(128, 64)
    builds = registration.kernel_builds
    expected = train(eager, 20, x, target)
    got = train(compiled, 20, x, target, lambda gm, inputs: cute_torch.backend.cute_backend(gm, inputs, options))
    assert registration.kernel_builds > builds  # the cute kernels did run
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-4, atol=1e-5)
    for p, q in zip(compiled.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_the_pointwise_loss_is_fused_with_its_log_cosh(tmp_path):
    # cosh is in the language (built on exp): nothing of the loss is left to ATen's pointwise ops.
    torch._dynamo.reset()
    fn = torch.compile(pointwise_loss, backend="cute", options={"debug_dir": str(tmp_path)})
    y, t = randn(64, 32), randn(64, 32)
    torch.testing.assert_close(fn(y, t), pointwise_loss(y, t))
    (path,) = tmp_path.glob("graph*_inference.after.py")
    after = path.read_text()
    assert "cute.pointwise" in after
    assert "aten.sigmoid" not in after and "aten.where" not in after and "aten.sub" not in after
    assert "aten.cosh" not in after and "aten.log" not in after


def test_dynamic_batch_compiles_kernels_once():
    torch._dynamo.reset()
    model = Block(32).cuda()

    def f(x):
        return F.silu(model(x)) * 0.5 + x
    compiled = torch.compile(f, backend="cute", dynamic=True)
    with torch.no_grad():
        x = randn(48, 32)
        torch.testing.assert_close(compiled(x), f(x))
        builds = registration.kernel_builds
        frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        x = randn(80, 32)
        torch.testing.assert_close(compiled(x), f(x))
    assert registration.kernel_builds == builds
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_heavy_inference_matches_eager(dtype):
    torch._dynamo.reset()

    def f(x, y, b):
        h = F.gelu(x * y + b)
        return h * torch.sigmoid(x) + torch.tanh(y) * 0.5 - torch.relu(b - x)
    x, y, b = randn(512, 256, dtype=dtype), randn(512, 256, dtype=dtype), randn(256, dtype=dtype)
    got = torch.compile(f, backend="cute")(x, y, b)
    expected = f(x.double(), y.double(), b.double())
    # Half types: computed in fp32, rounded once (eager rounds after every op).
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got.double(), expected, **tol)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="needs an sm_90 GPU (the library GEMM)")
def test_a_bf16_linear_gelu_block_trains_with_its_gemm_epilogues(tmp_path):
    """bf16 linear + bias + GELU: the forward's matmul takes the epilogue (and writes the
    pre-activation for backward); 10 AdamW steps against eager within bf16 tolerance."""
    torch.manual_seed(3)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(approximate="tanh"),
                                torch.nn.Linear(512, 256)).cuda().bfloat16()
    twin = copy.deepcopy(model)
    x, target = randn(128, 256, dtype=torch.bfloat16), randn(128, 256, dtype=torch.bfloat16)
    options = {"debug_dir": str(tmp_path)}
    compiled = torch.compile(twin, backend=lambda gm, inputs: cute_torch.backend.cute_backend(gm, inputs, options))
    losses = []
    for module, fn in ((model, model), (twin, compiled)):
        opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
        run = []
        for _ in range(10):
            opt.zero_grad()
            loss = F.mse_loss(fn(x).float(), target.float())
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=3e-2, atol=3e-3)
    forward = "".join(p.read_text() for p in tmp_path.glob("*forward.after.py"))
    assert "torch.ops.cute.gemm" in forward


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_compiled_adamw_step_matches_eager(dtype, tmp_path):
    """torch.compile(opt.step, backend="cute") on CUDA parameters (Dynamo makes the step
    capturable: the step counts live on the GPU; AdamW takes its foreach path): five steps
    against eager AdamW, each parameter's update fused (no foreach op, functional copy or fma
    left as ATen)."""
    torch._dynamo.reset()
    g = torch.Generator(device="cuda").manual_seed(9)
    shapes = [(256, 96), (96,), (1000, 24)]
    params = [torch.nn.Parameter(torch.randn(*s, device="cuda", generator=g).to(dtype)) for s in shapes]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt, ref = torch.optim.AdamW(params, lr=1e-2), torch.optim.AdamW(twins, lr=1e-2)
    options = {"debug_dir": str(tmp_path), "strict": True}
    step = torch.compile(opt.step, backend=lambda gm, inputs: cute_torch.backend.cute_backend(gm, inputs, options))
    for _ in range(5):
        for p, t in zip(params, twins):
            p.grad = torch.randn(p.shape, device="cuda", generator=g).to(dtype)
            t.grad = p.grad.clone()
        step()
        ref.step()
    # bf16 state rounds once per kernel here and once per op in eager: two bf16 ulps apart
    # (measured on an H200: 2 of 24576 weights differ by 0.0153 relative).
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=8e-3)
    for p, t in zip(params, twins):
        torch.testing.assert_close(p, t, **tol)
    after = "".join(p.read_text() for p in tmp_path.glob("*.after.py"))
    assert "torch.ops.cute.pointwise" in after
    assert "aten.copy.default" not in after and "prims.fma" not in after and "aten._foreach" not in after


def test_a_compiled_adamw_step_replays_as_a_cuda_graph():
    """mode="reduce-overhead" on torch.compile(opt.step): the step mutates only what Dynamo
    marks static (parameters, gradients, state), so it is recorded, as Inductor records it, and
    five replayed steps match eager AdamW."""
    from torch._inductor import cudagraph_trees
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    torch._dynamo.utils.counters.clear()
    g = torch.Generator(device="cuda").manual_seed(21)
    shapes = [(256, 96), (96,), (1000, 24)]
    params = [torch.nn.Parameter(torch.randn(*s, device="cuda", generator=g)) for s in shapes]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt, ref = torch.optim.AdamW(params, lr=1e-2), torch.optim.AdamW(twins, lr=1e-2)
    step = torch.compile(opt.step, backend=lambda gm, inputs: cute_torch.backend.cute_backend(
        gm, inputs, None, "reduce-overhead"))
    for p in params:                        # the gradients keep their addresses from step to step
        p.grad = torch.empty_like(p)
    for _ in range(5):
        for p, t in zip(params, twins):
            p.grad.copy_(torch.randn(p.shape, device="cuda", generator=g))
            t.grad = p.grad.clone()
        step()
        ref.step()
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0
    manager = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    assert manager is not None and manager.roots
    for p, t in zip(params, twins):
        torch.testing.assert_close(p, t, rtol=1e-5, atol=1e-6)
    cudagraph_trees.reset_cudagraph_trees()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="needs an sm_90 GPU (the library GEMM)")
def test_the_transformer_block_trains_replayed_as_cuda_graphs(tmp_path):
    """mode="reduce-overhead": the forward and backward graphs, our GEMMs and row kernels in
    them, recorded into CUDA graph trees and replayed; 8 bf16 AdamW steps within bf16 tolerance
    of eager's losses and weights, nothing declined."""
    import transformer_block
    from torch._inductor import cudagraph_trees
    torch.manual_seed(4)
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    torch._dynamo.utils.counters.clear()
    model = transformer_block.Block(256, 4).cuda().bfloat16()
    twin = copy.deepcopy(model)
    x, target = randn(2, 128, 256, dtype=torch.bfloat16), randn(2, 128, 256, dtype=torch.bfloat16)
    want, _ = transformer_block.train(model, 8, x, target)
    options = {"debug_dir": str(tmp_path)}
    got, _ = transformer_block.train(
        twin, 8, x, target, lambda gm, inputs: cute_torch.backend.cute_backend(gm, inputs, options, "reduce-overhead"))
    manager = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    assert manager is not None and manager.roots                 # recorded
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0
    forward = "".join(p.read_text() for p in tmp_path.glob("*forward.after.py"))
    assert "torch.ops.cute.gemm" in forward and "torch.ops.cute.layer_norm" in forward
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=3e-2, atol=3e-3)
    for p, q in zip(twin.parameters(), model.parameters()):
        torch.testing.assert_close(p.float(), q.float(), rtol=3e-2, atol=3e-3)
    cudagraph_trees.reset_cudagraph_trees()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_transformer_example_trains_under_ddp_on_two_gpus():
    """torchrun --nproc-per-node 2: DDP over NCCL with backend="cute", bf16, losses within bf16
    tolerance of eager's (the script checks and exits non-zero otherwise)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             os.path.join(root, "examples", "transformer_block.py"), "--steps", "20", "--batch", "2",
                             "--seq", "256", "--d-model", "512", "--heads", "8"],
                            capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cute" in result.stdout
