"""cute::pointwise on the GPU: results against torch (fp64 reference for fp32, eager for half
types), broadcasting/strides/alignment variants, gradients against torch autograd, opcheck,
torch.compile(fullgraph=True), CUDA graphs, non-default streams and errors.

Outputs are allocated by the op, so poisoning goes through the caching allocator: a NaN-filled
block of the output's size is freed just before the call, and the op gets that block."""

import pytest

torch = pytest.importorskip("torch")

import cute_torch.ops as cops  # noqa: E402
from cute_torch.pointwise.dtypes import reference  # noqa: E402

pytestmark = pytest.mark.gpu
op = torch.ops.cute.pointwise


def poison_allocator(numel: int, dtype: torch.dtype) -> None:
    block = torch.empty(numel, dtype=dtype, device="cuda")
    block.fill_(float("nan") if dtype.is_floating_point else 77)
    del block


def randn(*shape, dtype=torch.float32, gen=None):
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


def check(expr, inputs, out_dtype=None):
    shape = torch.broadcast_shapes(*(t.shape for t in inputs))
    expected_dtype = reference(expr, [t[(0,) * t.dim()].cpu() if t.numel() else t.cpu() for t in inputs]).dtype \
        if out_dtype is None else out_dtype
    numel = 1
    for s in shape:
        numel *= s
    poison_allocator(numel, expected_dtype)
    out = op(expr, inputs, out_dtype)
    assert out.shape == shape and out.dtype == expected_dtype and out.is_contiguous()
    if expected_dtype.is_floating_point:
        # The kernel computes in fp32 and rounds once: against the fp64 result of the same inputs
        # rounded once to the output dtype, within two of its rounding steps (never against
        # eager, which rounds after every op), and fp32's own few ulp for fp32 outputs.
        wide = [t.double() if t.dtype.is_floating_point else t for t in inputs]
        want = reference(expr, wide).to(expected_dtype)
        tol = max(2 * torch.finfo(expected_dtype).eps, 2e-6)
        torch.testing.assert_close(out.double(), want.double(), rtol=tol, atol=tol / 2, equal_nan=True)
    else:
        torch.testing.assert_close(out, reference(expr, inputs, out_dtype))
    return out


EXPRS = ["relu(x0 * x1 + x2) * 2", "gelu(x0) * sigmoid(x1) + x2", "gelu_tanh(x0 - x1) / (1 + x2 * x2)",
         "where(x0 > x1, exp(x2 * 0.5), -x0)", "silu(x0) + tanh(x1) * abs(x2) ** 1.5",
         "maximum(x0, x1) - minimum(x1, x2) + sqrt(abs(x0)) * rsqrt(abs(x2) + 1)", "log(abs(x0) + 0.5) + erf(x1) * x2",
         "cosh(x0) - sinh(x1) * expm1(x2) + log1p(abs(x0))", "sign(x0) * x1 + sign(x2 - 0.5)"]


DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr", EXPRS)
def test_contiguous_matches_torch(expr, dtype):
    # A seed fixed per case (hash() of a string changes with every process).
    gen = torch.Generator(device="cuda").manual_seed(100 + 3 * EXPRS.index(expr) + DTYPES.index(dtype))
    for n in (1, 7, 4096, 12345 * 8 + 3):
        check(expr, [randn(n, dtype=dtype, gen=gen) for _ in range(3)])


@pytest.mark.parametrize("shapes", [
    [(64, 96), (96,), (64, 1)],          # bias row, per-row scale
    [(3, 5, 7), (1, 5, 1), ()],          # 0-dim input, odd sizes (no vectors)
    [(2, 3, 4, 5, 6), (5, 6), (3, 1, 1, 1)],   # rank 5: more dims than the kernel takes
    [(128, 1, 64), (1, 32, 64), (64,)],  # outer product shape
])
def test_broadcasting(shapes):
    gen = torch.Generator(device="cuda").manual_seed(1)
    check("relu(x0 * x1 + x2) * 2", [randn(*s, gen=gen) for s in shapes])
    check("x0 + x1 * x2", [randn(*s, dtype=torch.bfloat16, gen=gen) for s in shapes])


def test_strided_and_misaligned_inputs():
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = randn(96, 64, gen=gen).t()                 # transposed: inner stride 64
    b = randn(64, 200, gen=gen)[:, 3:99]           # row stride 200, offset 3 (not 16-byte aligned)
    c = randn(64 * 96 + 1, gen=gen)[1:].view(64, 96)   # contiguous but misaligned
    check("x0 * x1 - x2", [a, b, c])
    check("x0 * x1 - x2", [c, c, c])
    check("x0 + 1", [randn(1000, gen=gen)[::3]])


def test_mixed_dtypes_and_casts():
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = randn(4000, gen=gen)
    i = torch.randint(-50, 50, (4000,), device="cuda", dtype=torch.int32, generator=gen)
    check("x0 * x1", [x.bfloat16(), x])
    check("x0 / x1", [i, i.abs() + 1])
    check("x0 > x1", [x, x.half()])
    check("where(x0 > 0, x0, 0)", [i])
    check("int32(x0 * 10) + x1", [x, i])
    check("x0 * 2", [x], torch.bfloat16)
    check("bool(x0) + x1", [i, i.to(torch.uint8)])
    check("x0 + x1", [x.double(), x])


def test_exact_ops_are_exact():
    gen = torch.Generator(device="cuda").manual_seed(4)
    x, y = randn(1 << 16, gen=gen), randn(1 << 16, gen=gen)
    assert torch.equal(op("maximum(x0, x1)", [x, y]), torch.maximum(x, y))
    assert torch.equal(op("x0 + x1", [x.bfloat16(), y.bfloat16()]), x.bfloat16() + y.bfloat16())
    assert torch.equal(op("x0 * x1", [x, y]), x * y)


def test_every_bf16_widens_bit_for_bit_from_a_vector():
    """The kernel loads 16-byte vectors and widens their bf16 lanes as integer operations on the
    32-bit words (DeviceCodegen.cpp's widenBf16Lanes): all 65536 patterns, NaNs and -0.0
    included, against torch's widening, bit for bit."""
    every_bf16 = torch.arange(-32768, 32768, device="cuda", dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    poison_allocator(every_bf16.numel(), torch.float32)
    widened = op("x0", [every_bf16], torch.float32)
    assert torch.equal(widened.view(torch.int32), every_bf16.float().view(torch.int32))


def test_nan_propagation_matches_torch():
    x = torch.tensor([float("nan"), 1.0, -2.0, float("inf")], device="cuda")
    y = torch.tensor([0.0, float("nan"), 3.0, -1.0], device="cuda")
    torch.testing.assert_close(op("maximum(x0, x1)", [x, y]), torch.maximum(x, y), equal_nan=True)
    torch.testing.assert_close(op("relu(x0)", [x]), torch.relu(x), equal_nan=True)


def test_sigmoid_and_silu_over_the_float32_range():
    # The approximate reciprocal (1 ulp) over the whole range, including the tails where exp
    # overflows or the result is subnormal (flushed to zero: within 2^-126 of the reference).
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.cat([randn(1 << 16, gen=gen) * 40,
                   torch.tensor([0.0, -87.0, -88.0, -104.0, 88.8, 89.0, 1e30, -1e30, float("inf"), float("-inf"),
                                 float("nan")], device="cuda")])
    for expr, fn in (("sigmoid(x0)", torch.sigmoid), ("silu(x0)", torch.nn.functional.silu)):
        poison_allocator(x.numel(), torch.float32)
        want = fn(x.double()).float()
        torch.testing.assert_close(op(expr, [x]), want, rtol=2e-6, atol=2.0 ** -126, equal_nan=True)


def test_cosh_sinh_expm1_log1p_near_zero_and_far_out():
    """Relative accuracy where the naive forms cancel (sinh, expm1, log1p near 0) and out to
    |x| = 88 (cosh and sinh overflow from 88.7 on, where float32's own do from 89.4)."""
    gen = torch.Generator(device="cuda").manual_seed(6)
    x = torch.cat([randn(1 << 14, gen=gen) * 1e-4, randn(1 << 14, gen=gen) * 30,
                   torch.tensor([0.0, -0.0, 1e-30, -1e-8, 88.0, -88.0, float("nan")], device="cuda")]).clamp(-88, 88)
    for expr, fn in (("cosh(x0)", torch.cosh), ("sinh(x0)", torch.sinh), ("expm1(x0)", torch.expm1),
                     ("log1p(abs(x0))", lambda t: torch.log1p(t.abs()))):
        poison_allocator(x.numel(), torch.float32)
        want = fn(x.double()).float()
        torch.testing.assert_close(op(expr, [x]), want, rtol=1e-6, atol=0, equal_nan=True, msg=expr)
    assert op("cosh(x0)", [torch.tensor([89.0], device="cuda")]).isinf().all()      # documented


GRAD_EXPRS = ["relu(x0 * x1 + x2) * 2", "gelu(x0 + x1) * x2", "silu(x0) * sigmoid(x1) - x2 ** 2",
              "where(x0 > 0, x0, 0.01 * x0) * exp(x1 * 0.1) + x2", "cosh(x0) * sinh(x1) + log1p(abs(x2))"]


@pytest.mark.parametrize("expr", GRAD_EXPRS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_match_torch_autograd(expr, dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    shapes = [(32, 48), (48,), (32, 1)]
    ours = [randn(*s, dtype=dtype, gen=gen).requires_grad_() for s in shapes]
    theirs = [t.detach().double().requires_grad_() for t in ours]
    g = randn(32, 48, dtype=dtype, gen=gen)
    out = op(expr, ours)
    out.backward(g)
    reference(expr, theirs).backward(g.double())
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    for a, b in zip(ours, theirs):
        assert a.grad.dtype == dtype and a.grad.shape == a.shape
        torch.testing.assert_close(a.grad.double(), b.grad, **tol)


@pytest.mark.parametrize("expr, grad", [("relu(x0 * x1 + x2) * 2", False), ("gelu(x0) * x1 + x2", True),
                                        ("where(x0 > x1, x0, x2)", True), ("x0 > x1", False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_opcheck(expr, grad, dtype):
    gen = torch.Generator(device="cuda").manual_seed(6)
    inputs = [randn(*s, dtype=dtype, gen=gen).requires_grad_(grad) for s in [(16, 8), (8,), (16, 1)]]
    torch.library.opcheck(op.default, (expr, inputs))


def test_torch_compile_fullgraph():
    def f(x, y, z):
        return cops.pointwise("relu(x0 * x1 + x2) * 2", x, y, z) + 1

    compiled = torch.compile(f, fullgraph=True)
    gen = torch.Generator(device="cuda").manual_seed(7)
    args = [randn(256, 64, gen=gen) for _ in range(3)]
    torch.testing.assert_close(compiled(*args), f(*args))


def test_cuda_graph_capture_and_replay():
    gen = torch.Generator(device="cuda").manual_seed(8)
    x, y = randn(1 << 14, gen=gen), randn(1 << 14, gen=gen)
    op("x0 * x1 + 1", [x, y])  # warm up: build and load outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph):
            out = op("x0 * x1 + 1", [x, y])
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(2):
        x.copy_(randn(1 << 14, gen=gen))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * y + 1)


def test_reduce_overhead_mode():
    f = torch.compile(lambda x: cops.gelu(x) * 2, mode="reduce-overhead", fullgraph=True)
    gen = torch.Generator(device="cuda").manual_seed(9)
    for _ in range(3):
        x = randn(4096, gen=gen)
        torch.testing.assert_close(f(x), torch.nn.functional.gelu(x) * 2, rtol=2e-6, atol=1e-6)


def test_non_default_stream():
    gen = torch.Generator(device="cuda").manual_seed(10)
    x = randn(1 << 22, gen=gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = op("exp(x0) * 2", [x])  # queued on `side`: ordered after x's producer via wait_stream
        out2 = op("x0 - 1", [out])
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out2, torch.exp(x) * 2 - 1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu():
    x = torch.randn(1000, device="cuda:1")
    with torch.cuda.device(0):
        out = op("x0 * 3", [x])
    assert out.device == x.device
    torch.testing.assert_close(out, x * 3)


def test_errors():
    x = torch.randn(8, device="cuda")
    with pytest.raises(RuntimeError, match="x0 is on cuda:0 and x1 is on cpu"):
        op("x0 + x1", [x, torch.randn(8)])
    with pytest.raises(RuntimeError, match="x0 is on cpu and x2 is on cuda:0"):
        cops.pointwise("x0 + x1 + x2", torch.randn(8), torch.randn(8), x)
    with pytest.raises(TypeError, match="supported dtypes: float32"):
        op("x0 + 1", [x.to(torch.complex64)])
    with pytest.raises(ValueError, match="at position 5"):
        op("x0 + foo(x0)", [x])
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(8\) must match the size of tensor b \(3\)"):
        op("x0 + x1", [x, torch.randn(3, device="cuda")])


def test_tensor_subclasses_take_the_generic_route():
    class Tagged(torch.Tensor):
        calls = 0

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            Tagged.calls += 1
            return super().__torch_function__(func, types, args, kwargs or {})

    x = randn(64).as_subclass(Tagged)
    out = cops.pointwise("x0 * 2", x)
    assert Tagged.calls > 0
    torch.testing.assert_close(out.as_subclass(torch.Tensor), x.as_subclass(torch.Tensor) * 2)


def test_helpers():
    x = randn(1000)
    torch.testing.assert_close(cops.gelu(x), torch.nn.functional.gelu(x), rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(cops.gelu(x, "tanh"), torch.nn.functional.gelu(x, approximate="tanh"),
                               rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(cops.silu(x), torch.nn.functional.silu(x), rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(cops.add(x, x, alpha=2), x + 2 * x)
