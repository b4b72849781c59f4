"""torch.ops.cute.softmax / layer_norm / cross_entropy (cute_torch/ops/row_ops.py) and the nn
modules over them: schemas, fake kernels and errors on the CPU; on the GPU, values and
gradients against float64 eager autograd, opcheck, and torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import cute_torch.nn as cnn
import cute_torch.ops as cops


def test_schemas():
    schemas = {name: str(getattr(torch.ops.cute, name).default._schema) for name in
               ("softmax", "softmax_backward", "layer_norm", "layer_norm_backward", "cross_entropy",
                "cross_entropy_backward")}
    assert schemas["layer_norm"] == ("cute::layer_norm(Tensor x, Tensor? weight, Tensor? bias, Tensor? residual, "
                                     "float eps, bool rms) -> (Tensor, Tensor, Tensor, Tensor)")
    assert schemas["cross_entropy"].endswith("(Tensor logits, Tensor target, int ignore_index=-100, "
                                             "float label_smoothing=0.) -> (Tensor, Tensor)")


def test_fake_kernels_give_shapes_and_dtypes():
    with FakeTensorMode():
        x = torch.empty(4, 8, 64, dtype=torch.bfloat16)
        y, res, rstd, mean = torch.ops.cute.layer_norm(x, torch.empty(64), None, torch.empty(4, 8, 64), 1e-5, False)
        assert (y.shape, y.dtype, res.shape, rstd.shape, rstd.dtype, mean.shape) == \
            ((4, 8, 64), torch.bfloat16, (4, 8, 64), (32,), torch.float32, (32,))
        _, res, _, mean = torch.ops.cute.layer_norm(x, None, None, None, 1e-5, True)
        assert res.numel() == 0 and mean.numel() == 0
        loss, lse = torch.ops.cute.cross_entropy(torch.empty(6, 100), torch.empty(6, dtype=torch.long))
        assert loss.shape == lse.shape == (6,) and loss.dtype == torch.float32
        assert torch.ops.cute.softmax(x, True).shape == x.shape
        with pytest.raises(ValueError, match=r"cute::cross_entropy: label_smoothing must be in \[0, 1\], got 1.5"):
            torch.ops.cute.cross_entropy(torch.empty(6, 100), torch.empty(6, dtype=torch.long), -100, 1.5)


def test_cpu_tensors_and_bad_arguments_are_clear_errors():
    x = torch.randn(3, 16)
    with pytest.raises(RuntimeError, match="cute::softmax runs on CUDA tensors; got one on cpu"):
        cops.softmax(x)
    with pytest.raises(RuntimeError, match="cute::cross_entropy runs on CUDA tensors"):
        cops.cross_entropy_loss(x, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction is 'none', 'sum' or 'mean', got 'avg'"):
        cops.cross_entropy_loss(x, torch.tensor([0, 1, 2]), reduction="avg")


def test_modules_load_torch_state_dicts_and_fall_back_on_the_cpu():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 6, 32, generator=g)
    for ours, theirs in ((cnn.RMSNorm(32, eps=1e-6), torch.nn.RMSNorm(32, eps=1e-6)),
                         (cnn.LayerNorm(32), torch.nn.LayerNorm(32))):
        with torch.no_grad():
            for p in theirs.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        ours.load_state_dict(theirs.state_dict())
        torch.testing.assert_close(ours(x), theirs(x))
    logits, target = torch.randn(5, 9, generator=g), torch.tensor([0, 8, -100, 3, 3])
    torch.testing.assert_close(cnn.CrossEntropyLoss()(logits, target), F.cross_entropy(logits, target))


# -- GPU tier ----------------------------------------------------------------------------------------

def _rand(shape, seed, dtype=torch.bfloat16, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype).cuda()


def _grads_close(ours, ref, rtol=3e-2):
    for got, want in zip(ours, ref):
        err = (got.grad.double().cpu() - want.grad.cpu()).abs().max() / want.grad.abs().max().clamp_min(1e-12)
        assert err < rtol, err


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
def test_softmax_op_gradients_opcheck_and_compile(log):
    x = _rand((2, 48, 1000), 1, scale=5.0)
    dy = _rand((2, 48, 1000), 2)
    ours = x.clone().requires_grad_()
    ref = x.double().requires_grad_()
    fn = cops.log_softmax if log else cops.softmax
    y = fn(ours)
    want = (torch.log_softmax if log else torch.softmax)(ref, -1)
    torch.testing.assert_close(y.double().cpu(), want.detach().cpu(), rtol=2e-2, atol=2e-2)
    y.backward(dy)
    want.backward(dy.double())
    _grads_close([ours], [ref])
    torch.library.opcheck(torch.ops.cute.softmax.default, (x, log))
    compiled = torch.compile(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.gpu
@pytest.mark.parametrize("rms", [True, False])
def test_norm_op_with_residual_gradients_opcheck_and_compile(rms):
    n = 768
    x, r = _rand((3, 40, n), 11), _rand((3, 40, n), 12, torch.float32)
    w, b = _rand((n,), 13), (None if rms else _rand((n,), 14))
    dy, dres = _rand((3, 40, n), 15), _rand((3, 40, n), 16, torch.float32)
    leaves = [t.clone().requires_grad_() for t in (x, r, w) + (() if rms else (b,))]
    ref = [t.double().requires_grad_() for t in (x, r, w) + (() if rms else (b,))]
    if rms:
        y, s = cops.rms_norm(leaves[0], leaves[2], 1e-6, residual=leaves[1])
    else:
        y, s = cops.layer_norm(leaves[0], leaves[2], leaves[3], 1e-5, residual=leaves[1])
    s_ref = ref[0] + ref[1]
    y_ref = F.rms_norm(s_ref, (n,), ref[2], 1e-6) if rms else F.layer_norm(s_ref, (n,), ref[2], ref[3], 1e-5)
    torch.testing.assert_close(y.double().cpu(), y_ref.detach().cpu(), rtol=2e-2, atol=3e-2)
    torch.testing.assert_close(s.double().cpu(), s_ref.detach().cpu())
    torch.autograd.backward([y, s], [dy, dres])
    torch.autograd.backward([y_ref, s_ref], [dy.double(), dres.double()])
    _grads_close(leaves, ref)
    assert leaves[1].grad.dtype == torch.float32 and leaves[0].grad.dtype == torch.bfloat16
    torch.library.opcheck(torch.ops.cute.layer_norm.default, (x, w, b, r, 1e-5, rms))
    fn = (lambda x: cops.rms_norm(x, w)) if rms else (lambda x: cops.layer_norm(x, w, b))
    torch.testing.assert_close(torch.compile(fn, fullgraph=True)(x), fn(x))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [32768, 100000, 131072])
def test_float32_norm_ops_in_quacks_shape_match_the_kernels(n):
    """Float32 rows over clusters of 4 and 16 in quack's shape (norm_shapes.float32_direct_shape;
    100000 padded, LayerNorm without parameters there): the C++ op launches the Python entry's
    kernel (bit-equal outputs) and both match float64."""
    from cute_torch.kernels import norms
    x, w = _rand((5, n), 31, torch.float32, scale=2.0) + 0.5, _rand((n,), 32, torch.float32)
    for rms in (True, False):
        weight = w if rms or n != 100000 else None
        got = cops.rms_norm(x, weight) if rms else cops.layer_norm(x, weight, None)
        want, _, _, _ = norms.norm_forward(x, weight, None, eps=1e-6 if rms else 1e-5, rms=rms)
        assert torch.equal(got, want)
        xd, wd = x.double(), None if weight is None else weight.double()
        ref = F.rms_norm(xd, (n,), wd, 1e-6) if rms else F.layer_norm(xd, (n,), wd, None, 1e-5)
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("reduction,smoothing", [("mean", 0.0), ("sum", 0.0), ("none", 0.0), ("mean", 0.2)])
def test_cross_entropy_loss_gradients_opcheck_and_compile(reduction, smoothing):
    logits = _rand((64, 32000), 21, scale=3.0)
    target = torch.randint(0, 32000, (64,), generator=torch.Generator().manual_seed(22)).cuda()
    target[5] = -100
    ours, ref = logits.clone().requires_grad_(), logits.double().requires_grad_()
    loss = cops.cross_entropy_loss(ours, target, reduction=reduction, label_smoothing=smoothing)
    want = F.cross_entropy(ref, target, reduction=reduction, label_smoothing=smoothing)
    # The loss comes back in the logits' dtype, as F.cross_entropy's does: one bf16 rounding.
    assert loss.dtype == logits.dtype
    torch.testing.assert_close(loss.double().cpu(), want.detach().cpu(), rtol=8e-3, atol=1e-4)
    grad = torch.ones_like(loss) if reduction != "none" else _rand((64,), 23, torch.float32)
    loss.backward(grad)
    want.backward(grad.double())
    _grads_close([ours], [ref])
    torch.library.opcheck(torch.ops.cute.cross_entropy.default, (logits, target, -100, smoothing))
    fn = torch.compile(lambda a, t: cops.cross_entropy_loss(a, t, reduction=reduction, label_smoothing=smoothing),
                       fullgraph=True)
    torch.testing.assert_close(fn(logits, target), cops.cross_entropy_loss(logits, target, reduction=reduction,
                                                                            label_smoothing=smoothing))


@pytest.mark.gpu
def test_modules_on_the_gpu_match_torchs(monkeypatch):
    x = _rand((8, 512), 31)
    for ours, theirs in ((cnn.RMSNorm(512, eps=1e-6), torch.nn.RMSNorm(512, eps=1e-6)),
                         (cnn.LayerNorm(512), torch.nn.LayerNorm(512))):
        ours, theirs = ours.cuda().bfloat16(), theirs.cuda().bfloat16()
        torch.testing.assert_close(ours(x).float(), theirs(x).float(), rtol=2e-2, atol=2e-2)
    target = torch.tensor([1, 2, 3, 4, 5, 6, 7, -100], device="cuda")
    torch.testing.assert_close(cnn.CrossEntropyLoss()(x.float(), target), F.cross_entropy(x.float(), target))
    calls = []                                          # label smoothing runs the kernel, not torch's loss
    monkeypatch.setattr(cnn, "cross_entropy_loss", lambda *a: calls.append(a) or cops.cross_entropy_loss(*a))
    smoothed = cnn.CrossEntropyLoss(label_smoothing=0.1)(x.float(), target)
    torch.testing.assert_close(smoothed, F.cross_entropy(x.float(), target, label_smoothing=0.1))
    assert len(calls) == 1 and calls[0][-1] == 0.1


@pytest.mark.gpu
def test_row_ops_on_a_side_stream_and_replayed_from_a_cuda_graph():
    """The row ops launch on the current stream: on a side stream, and captured in a CUDA graph
    then replayed over fresh inputs copied into the captured buffers, softmax, LayerNorm, RMSNorm,
    cross-entropy and column sums give float64 references' values."""
    n = 1024
    x, w, b = _rand((64, n), 41), _rand((n,), 42), _rand((n,), 43)
    target = torch.randint(0, n, (64,), generator=torch.Generator().manual_seed(44)).cuda()

    def run():
        return (cops.softmax(x), cops.layer_norm(x, w, b), cops.rms_norm(x, w),
                cops.cross_entropy_loss(x, target, reduction="none"), cops.column_sum(x))

    def check(got):
        xd = x.double()
        want = (torch.softmax(xd, -1), F.layer_norm(xd, (n,), w.double(), b.double(), 1e-5),
                F.rms_norm(xd, (n,), w.double(), 1e-6), F.cross_entropy(xd, target, reduction="none"), xd.sum(0))
        for name, ours, ref in zip(("softmax", "layer_norm", "rms_norm", "cross_entropy", "column_sum"), got, want):
            torch.testing.assert_close(ours.double(), ref, rtol=2e-2, atol=2e-2, msg=name)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        side = run()
    torch.cuda.current_stream().wait_stream(stream)
    check(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    for t in captured:                      # poisoned: the replay must write every element
        t.fill_(float("nan"))
    x.copy_(_rand((64, n), 45))
    target.copy_(torch.randint(0, n, (64,), generator=torch.Generator().manual_seed(46)).cuda())
    graph.replay()
    torch.cuda.synchronize()
    check(captured)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_row_ops_run_on_the_second_gpu_while_the_first_is_current():
    """Each op launches on its inputs' GPU (the C++ path's device guard; the card's shape rules
    keyed on that device), forward and backward, whichever device is current."""
    n, dev = 1536, torch.device("cuda", torch.cuda.device_count() - 1)
    x, w, b = (_rand(shape, seed).to(dev).requires_grad_() for shape, seed in (((48, n), 51), ((n,), 52), ((n,), 53)))
    target = torch.randint(0, n, (48,), generator=torch.Generator().manual_seed(54)).to(dev)
    with torch.cuda.device(0):
        outs = (cops.softmax(x), cops.layer_norm(x, w, b), cops.rms_norm(x, w),
                cops.cross_entropy_loss(x, target, reduction="none"))
        sum(o.float().sum() for o in outs).backward()
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    want = (torch.softmax(xd, -1), F.layer_norm(xd, (n,), wd, bd, 1e-5), F.rms_norm(xd, (n,), wd, 1e-6),
            F.cross_entropy(xd, target, reduction="none"))
    sum(o.sum() for o in want).backward()
    for name, ours, ref in zip(("softmax", "layer_norm", "rms_norm", "cross_entropy"), outs, want):
        assert ours.device == dev, name
        torch.testing.assert_close(ours.double(), ref.detach(), rtol=2e-2, atol=2e-2, msg=name)
    _grads_close((x, w, b), (xd, wd, bd))


@pytest.mark.gpu
def test_bad_inputs_on_the_gpu_are_errors_naming_the_op():
    with pytest.raises(ValueError, match="cute::layer_norm: rows of 300000 elements; the norm kernels take 1 to 26214"):
        cops.rms_norm(torch.zeros(2, 300000, device="cuda"))
    x = torch.zeros(2, 64, device="cuda")
    with pytest.raises(ValueError, match="RMSNorm \\(rms=True\\) takes no bias"):
        torch.ops.cute.layer_norm(x, None, torch.zeros(64, device="cuda"), None, 1e-6, True)
    with pytest.raises(ValueError, match="weight must have shape \\(64,\\)"):
        cops.rms_norm(x, torch.zeros(32, device="cuda"))
    with pytest.raises(ValueError, match="cross_entropy takes logits \\(M, V\\) and targets \\(M,\\)"):
        cops.cross_entropy_loss(x, torch.zeros(3, dtype=torch.long, device="cuda"))
    with pytest.raises(TypeError, match="targets are int64 or int32"):
        cops.cross_entropy_loss(x, torch.zeros(2, device="cuda"))


def test_the_builder_compiles_each_op_and_says_where_its_arguments_come_from():
    """What csrc/torch/RowOps.cpp asks on a miss (cute_torch/ops/row_build.py), answered without
    a GPU: each op compiles for sm_90a from descriptions alone, and the recipe lists each
    operand's pointer, then its rows where M is a run-time value, then the scalars."""
    from cute_torch.ops import row_build
    rows, vec, col = "r;bfloat16;4096;4096;16;0", "v;float32;1;1;16;0", "c;bfloat16;4096;1;16;0"
    cases = {
        ("softmax", f"{rows}|{rows}", "0"): [0, 1000, 1, 1001, 5000],
        ("softmax", "r;float32;131072;131072;16;0|r;float32;131072;131072;16;0", "1"): [0, 1000, 1, 1001, 5000],
        ("softmax_backward", f"{rows}|{rows}|{rows}", "1"): [0, 1000, 1, 1001, 2, 1002, 5000],
        ("layer_norm", f"{rows}|-|{col}|-|{rows}|-|{vec}|-", "1"): [0, 1000, 2, 4, 1004, 6, 1006, 4000, 5000],
        ("layer_norm_backward", f"{rows}|{col}|{rows}|{vec}|{vec}|{rows}|r;float32;4096;4096;16;0|-|{col}|-", ""):
            [0, 1000, 1, 2, 1002, 3, 1003, 4, 1004, 5, 1005, 6, 1006, 8, 5000],
        ("layer_norm", "r;bfloat16;65536;65536;16;0|-|c;bfloat16;65536;1;16;0|-|r;bfloat16;65536;65536;16;0|-|"
                       f"{vec}|-", "1"): [0, 1000, 2, 4, 1004, 6, 1006, 4000, 5000],
        ("cross_entropy", "r;bfloat16;50257;50304;16;0|v;int64;1;1;16;0|{v}|{v}".format(v=vec), "0"):
            [0, 1000, 1, 1001, 2, 1002, 3, 1003, 4000, 5000],
        ("cross_entropy", "r;bfloat16;50257;50304;16;0|v;int64;1;1;16;0|{v}|{v}".format(v=vec), "1"):
            [0, 1000, 1, 1001, 2, 1002, 3, 1003, 4000, 5000],
        ("cross_entropy_backward", "r;bfloat16;32000;32000;16;0|v;int64;1;1;16;0|{v}|s;float32;1;1;16;0|"
                                   "r;bfloat16;32000;32000;16;0".format(v=vec), "1"):
            [0, 1000, 1, 1001, 2, 1002, 3, 4, 1004, 4000, 5000],
    }
    for (op, described, flags), recipe in cases.items():
        entry, runtime, rows_per_cta, threads, cluster, resident, *rest = row_build.build(op, described, flags, 0,
                                                                                          arch="sm_90a")
        assert rest[:-1] == recipe, (op, rest[:-1])
        assert resident == 0    # asked of the device only (persistent grids', on a GPU)
        assert rows_per_cta >= 1 and threads % 32 == 0 and threads >= rows_per_cta
        # Rows of 65536 bf16 or 131072 fp32 do not fit one CTA: they are split over a cluster (RMSNorm's
        # 65536 bf16 forward in quack's shape, norm_shapes.direct_shape: four CTAs of 256 threads;
        # log_softmax's 131072 fp32 forward too, softmax.float32_direct_shape: 16).
        assert cluster == (4 if "65536" in described else 16 if "131072" in described else 1), (op, cluster)
        assert ".entry" in rest[-1].__ptx__
    with pytest.raises(ValueError, match="unknown row op"):
        row_build.build("median", rows, "", 0, arch="sm_90a")


def test_the_builder_configures_from_a_description_what_the_kernels_configure_from_the_tensor():
    """Random row views (offsets into a buffer, padded row strides, every dtype): the CTA shape
    row_build picks from csrc/torch/RowOps.cpp's descriptions equals the one the Python entries
    of kernels/*.py pick from the tensors themselves (those passed on the GPU)."""
    from cute_torch.kernels import norm_shapes, norms, softmax
    from cute_torch.kernels.row_chunks import chunk_config
    from cute_torch.ops.row_build import _Described

    def described(t, kind="r"):
        return _Described(torch.ops.cute.row_describe(t, kind), 0)

    g = torch.Generator().manual_seed(81)
    dtypes = [torch.bfloat16, torch.float16, torch.float32]
    # Then the widths whose backward shapes depend on the row stride or the card (n, pad, offset,
    # dtype): 32-byte rows over clusters of 4, PAIRED_LAYER_NORM, Float32 rows of five vectors.
    bf16, f32 = torch.bfloat16, torch.float32
    fixed = [(14336, 0, 0, bf16), (14336, 8, 0, bf16), (13000, 0, 0, bf16), (16384, 0, 8, bf16), (3072, 0, 0, bf16),
             (6144, 0, 0, torch.float16), (7168, 0, 0, bf16), (5120, 0, 0, f32), (1280, 0, 0, f32), (2560, 0, 4, f32),
             (8192, 0, 0, f32)]
    for i in range(200 + len(fixed)):
        random = [int(torch.randint(0, k, (1,), generator=g)) for k in (3, 40000 if i % 2 else 300000, 9, 9)]
        n, pad, offset, dtype = (random[1] + 1, *random[2:], dtypes[random[0]]) if i < 200 else fixed[i - 200]
        buffer = torch.empty(4 * (n + pad) + offset, dtype=dtype)
        x = buffer[offset:offset + 4 * (n + pad)].view(4, n + pad)[:, :n]
        y = torch.empty(4, n, dtype=dtype)
        if n <= softmax.REGISTER_N:
            assert softmax._config(x, y) == softmax._config(described(x), described(y)), (n, pad, offset, dtype)
        if n <= norms.MAX_NORM_N:
            w = torch.empty(n, dtype=dtype)
            for values in (32, norm_shapes.FORWARD_VALUES):
                assert norm_shapes.forward_config(n, (x, w, y), values) == norm_shapes.forward_config(
                    n, (described(x), described(w, "c"), described(y)), values)
            for layer, fast in ((False, False), (True, False), (False, True), (True, True)):
                assert norm_shapes.backward_config(n, (x, w, y), layer, fast) == norm_shapes.backward_config(
                    n, (described(x), described(w, "c"), described(y)), layer, fast), (n, pad, offset, dtype)
        assert chunk_config(x, y) == chunk_config(described(x), described(y)), (n, pad, offset, dtype)
        assert softmax.takes_chunks(x, y) == softmax.takes_chunks(described(x), described(y))


def test_autograd_kernels_are_cpp_functions_that_route_every_gradient():
    """On meta tensors (the fakes compute shapes): the graph nodes are the C++ Functions of
    csrc/torch/RowAutograd.cpp, and each input gets a gradient of its own shape and dtype."""
    def leaf(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, device="meta", dtype=dtype, requires_grad=True)
    x, r, w, b = leaf(4, 8, 64), leaf(4, 8, 64, dtype=torch.float32), leaf(64, dtype=torch.float32), leaf(64)
    y, s = cops.layer_norm(x, w, b, 1e-5, residual=r)
    assert "::LayerNormFunction>" in y.grad_fn.name() and y.grad_fn is s.grad_fn
    torch.autograd.backward([y, s], [torch.empty_like(y), torch.empty_like(s)])
    assert [(t.grad.shape, t.grad.dtype) for t in (x, r, w, b)] == [(t.shape, t.dtype) for t in (x, r, w, b)]
    z = cops.log_softmax(x)
    assert "::SoftmaxFunction>" in z.grad_fn.name()
    logits = leaf(6, 100)
    loss, lse = torch.ops.cute.cross_entropy(logits, torch.empty(6, dtype=torch.long, device="meta"))
    assert "::CrossEntropyFunction>" in loss.grad_fn.name() and not lse.requires_grad
    loss.sum().backward()
    assert logits.grad.shape == logits.shape
    with torch.no_grad():
        assert cops.rms_norm(x, w).grad_fn is None
