"""cute::pointwise without a GPU (torch CPU build): the schema, the expression language and its
errors, torch's dtype rules, fake kernels (shapes, strides, dtypes) under opcheck on meta
tensors, tracing under torch.compile(fullgraph=True), the symbolic backward against torch
autograd (evaluated on CPU in float64), and the kernels' PTX (compile only)."""

import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import cute_torch.ops as cops  # noqa: E402
from cute_torch.pointwise import dtypes as pdtypes  # noqa: E402
from cute_torch.pointwise.expr import ExpressionError, parse  # noqa: E402
from cute_torch.pointwise.grad import gradient  # noqa: E402
from cute_torch.pointwise.kernel import SEPARATOR, Plan, _pointwise_host, stand_ins  # noqa: E402

op = torch.ops.cute.pointwise


def meta(*shape, dtype=torch.float32, requires_grad=False):
    return torch.empty(shape, dtype=dtype, device="meta", requires_grad=requires_grad)


def test_schema():
    assert str(op.default._schema) == \
        "cute::pointwise(str expr, Tensor[] inputs, ScalarType? out_dtype=None) -> Tensor"


@pytest.mark.parametrize("expr, message, col", [
    ("relu(x0 * x1 +", "invalid syntax", None),
    ("foo(x0)", "unknown function 'foo'", 0),
    ("x0 + x7", "'x7' names input 7, but there are 2 inputs", 5),
    ("x0 if x1 else 0", "'IfExp' is not part of the expression language", 0),
    ("relu(x0, x1)", "relu() takes 1 argument, got 2", 0),
    ("x0 ** x1", "the exponent of ** must be a number", 6),
    ("y + x0", "unknown name 'y'", 0),
    ("0 < x0 < 1", "chained comparisons", 0),
])
def test_malformed_expressions_show_the_position(expr, message, col):
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        op(expr, [meta(3), meta(3)])
    text = str(info.value)
    assert f"  {expr}\n" in text
    if col is not None:
        assert f"at position {col}:" in text
        assert text.splitlines()[-1] == "  " + " " * col + "^"


def test_expression_errors_are_value_errors():
    with pytest.raises(ExpressionError):
        parse("exp(", 1)
    with pytest.raises(ValueError, match="needs a floating-point argument"):
        op("gelu(x0)", [meta(4, dtype=torch.int32)])
    with pytest.raises(ValueError, match="does not use any input"):
        op("1 + 2", [meta(4)])


def test_printing_round_trips():
    for expr in ["relu(x0 * x1 + x2) * 2", "x0 - (x1 - x2)", "-(x0 + 1) / x1 ** 2", "where(x0 > 0, x0, 0.01 * x0)",
                 "(x0 + x1) * (x0 - x1)", "bfloat16(gelu_tanh(x0)) * -1.5", "(-2) ** 2 * x0"]:
        tree = parse(expr)
        assert parse(str(tree)) == tree, expr


DTYPE_CASES = [
    ("x0 + x1", [torch.bfloat16, torch.float32]),
    ("x0 + x1", [torch.int32, torch.float16]),
    ("x0 * 2.5", [torch.int64]),
    ("x0 / x1", [torch.int32, torch.int32]),
    ("x0 > x1", [torch.float16, torch.float32]),
    ("where(x0, x1, 0.5)", [torch.bool, torch.bfloat16]),
    ("exp(x0)", [torch.int32]),
    ("maximum(x0, x1)", [torch.uint8, torch.int8]),
    ("x0 + 1", [torch.bool]),
    ("float16(x0) * x1", [torch.float64, torch.bfloat16]),
    ("relu(x0) * 2", [torch.int32]),
]


@pytest.mark.parametrize("expr, dtypes", DTYPE_CASES)
def test_result_dtype_is_torchs(expr, dtypes):
    inputs = [torch.ones(3, dtype=d) for d in dtypes]
    expected = pdtypes.reference(expr, inputs).dtype
    assert op(expr, [meta(3, dtype=d) for d in dtypes]).dtype == expected


def test_zero_dim_inputs_promote_like_torch():
    # A 0-dim float64 tensor does not widen a float32 tensor (torch's rule).
    out = op("x0 * x1", [meta(4), torch.empty((), dtype=torch.float64, device="meta")])
    assert out.dtype == torch.float32
    assert op("x0 * x1", [meta(4), meta(4)], torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize("shapes, expected", [
    ([(4, 3), (3,)], (4, 3)),
    ([(2, 1, 5), (7, 1), ()], (2, 7, 5)),
    ([(1,), (6, 1, 1)], (6, 1, 1)),
    ([(0, 3), (1, 3)], (0, 3)),
])
def test_fake_kernel_broadcasts_and_is_contiguous(shapes, expected):
    out = op("x0 + x1" + (" + x2" if len(shapes) > 2 else ""), [meta(*s) for s in shapes])
    assert tuple(out.shape) == expected
    assert out.is_contiguous()


def test_broadcast_error_is_torchs():
    """Shapes broadcast with torch.broadcast_shapes (SymInt-aware), so the meta/fake path says what
    torch says: which argument, which length."""
    with pytest.raises(RuntimeError, match=r"broadcast a dimension of length 4 .* index 1 had torch.Size\(\[4\]\)"):
        op("x0 + x1", [meta(2, 3), meta(4)])
    assert op("x0 * x1", [meta(2, 1, 3), meta(5, 1)]).shape == (2, 5, 3)


def test_unsupported_dtypes_are_listed():
    with pytest.raises(TypeError, match=r"x1 has dtype complex64, which is not supported; supported dtypes: "
                                        r"float32, float16, bfloat16"):
        op("x0 + x1", [meta(3), meta(3, dtype=torch.complex64)])


def test_cpu_tensors_get_a_clear_error():
    with pytest.raises(RuntimeError, match=r"runs on CUDA tensors; got a tensor on cpu"):
        op("x0 + 1", [torch.ones(3)])
    with pytest.raises(RuntimeError, match="same device"):
        op("x0 + x1", [meta(3), torch.ones(3)])
    with pytest.raises(ValueError, match="at least one input"):
        cops.pointwise("1")


@pytest.mark.parametrize("expr, dtypes, shapes, grad", [
    ("relu(x0 * x1 + x2) * 2", [torch.float32] * 3, [(8, 4), (4,), (8, 1)], False),
    ("gelu(x0) + silu(x1)", [torch.bfloat16] * 2, [(3, 5), (3, 5)], True),
    ("where(x0 > 0, x0, 0.1 * x1)", [torch.float32, torch.float32], [(6,), ()], True),
    ("x0 > x1", [torch.float16, torch.float32], [(2, 3), (3,)], False),
    ("exp(x0) / x1", [torch.float32, torch.float32], [(5, 1), (1, 7)], True),
])
def test_opcheck_on_meta_tensors(expr, dtypes, shapes, grad):
    inputs = [meta(*s, dtype=d, requires_grad=grad and d.is_floating_point) for s, d in zip(shapes, dtypes)]
    torch.library.opcheck(op.default, (expr, inputs),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration",
                                      "test_aot_dispatch_dynamic"))


def test_traces_under_torch_compile_fullgraph():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @torch.compile(fullgraph=True, backend=backend)
    def f(x, y, z):
        return cops.pointwise("relu(x0 * x1 + x2) * 2", x, y, z).sum(-1)

    out = f(meta(16, 32), meta(32), meta(16, 1))
    assert out.shape == (16,)
    (gm,) = graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.cute.pointwise.default in targets or torch.ops.cute.pointwise in targets


def test_traces_with_autograd_under_aot_eager():
    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(x, b):
        return cops.pointwise("gelu(x0 + x1)", x, b)

    x, b = meta(8, 4, requires_grad=True), meta(4, requires_grad=True)
    out = f(x, b)
    out.sum().backward()
    assert x.grad.shape == (8, 4) and b.grad.shape == (4,)


GRAD_CASES = [
    "x0 * x1 + x2", "relu(x0 * x1 + x2) * 2", "gelu(x0) * x1", "gelu_tanh(x0 - x1)", "silu(x0) / (1 + x1 * x1)",
    "sigmoid(x0) * tanh(x1)", "exp(x0) - log(abs(x1) + 1)", "sqrt(x0 * x0 + 1) * rsqrt(x1 * x1 + 2)",
    "where(x0 > x1, x0 * x1, -x1)", "maximum(x0, x1) + minimum(x0, 0.5)", "x0 ** 3 - x1 ** -2 + abs(x0) ** 0.5",
    "float32(bfloat16(x0)) * x1", "erf(x0) * x1", "maximum(x0, x0) * x1",
    "cosh(x0) * sinh(x1) + expm1(x0) - log1p(abs(x1))", "sign(x0) * x1 * x1",
]
TORCH_FORMS = {
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}


@pytest.mark.parametrize("expr", GRAD_CASES)
def test_symbolic_gradients_match_torch_autograd(expr):
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(64, dtype=torch.float64, generator=gen).requires_grad_() for _ in range(3)]
    xs[1].data += 0.25  # keep x1 away from ties with x0 and from 0
    g = torch.randn(64, dtype=torch.float64, generator=gen)
    out = pdtypes.reference(expr, xs)
    expected = torch.autograd.grad(out, xs, g, allow_unused=True)
    for i, want in enumerate(expected):
        text = gradient(expr, 3, i)
        if text is None:
            assert want is None or torch.count_nonzero(want) == 0
            continue
        got = pdtypes.reference(text, [x.detach() for x in xs] + [g])
        # torch rounds the gradient itself at a cast to bfloat16; the derived expression does not.
        rtol = 1e-2 if "bfloat16" in expr else 1e-10
        torch.testing.assert_close(got, want, rtol=rtol, atol=1e-12, msg=f"d/dx{i} of {expr}: {text}")


@pytest.mark.parametrize("plan, accesses", [
    (Plan("relu(x0 * x1 + x2) * 2", ("float32",) * 3, (False,) * 3, "float32", 1, "111", 4, False),
     {"ld.global.v4.f32", "st.global.v4.f32"}),
    (Plan("relu(x0 * x1 + x2) * 2", ("bfloat16",) * 3, (False,) * 3, "bfloat16", 1, "111", 8, False),
     {"ld.global.v4.b32", "st.global.v4.b32"}),
    (Plan("gelu(x0) + x1", ("float32", "float32"), (False, False), "float32", 2, "10", 4, False),
     {"ld.global.v4.f32", "st.global.v4.f32", "call.uni"}),
])
def test_kernels_use_16_byte_accesses(plan, accesses):
    compiled = _pointwise_host.compile(plan, *stand_ins(plan, -1))
    ptx = compiled.__ptx__
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    found = set(re.findall(r"(?:ld|st)\.global\.[\w.]+", ptx))
    assert accesses - {"call.uni"} <= found, found


@pytest.mark.parametrize("dtype, vec", [("float32", 4), ("bfloat16", 8)])
def test_each_element_is_loaded_before_any_output_of_it_is_stored(dtype, vec):
    # cute::pointwise.into writes outputs over inputs (an optimizer's in-place update): safe
    # only while every element's inputs are all loaded before any output is stored. In the PTX
    # the accesses come in groups, loads then stores, each group whole elements of 4 inputs and 3 outputs.
    exprs = ["x1 * 0.9 + x2 * 0.1", "x3 * 0.999 + x2 * x2", "x0 - (x1 * 0.9 + x2) / (sqrt(x3) + 1e-8)"]
    plan = Plan(SEPARATOR.join(exprs), (dtype,) * 4, (False,) * 4, ",".join([dtype] * 3), 1, "1111", vec, False)
    ptx = _pointwise_host.compile(plan, *stand_ins(plan, -1)).__ptx__
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    accesses = "".join("L" if a == "ld" else "S" for a in re.findall(r"^\s*(ld|st)\.global", ptx, re.M))
    groups = re.findall(r"(L+)(S+)", accesses)
    assert "".join(a + b for a, b in groups) == accesses and groups
    for loads, stores in groups:
        assert len(loads) % 4 == 0 and len(stores) % 3 == 0 and len(loads) // 4 == len(stores) // 3, (loads, stores)
    assert "ld.global.nc" not in ptx   # the read-only path would be wrong for an input also written


def test_a_constant_condition_picks_like_torch_and_builds():
    # where() with a condition that folds to a Python bool (lerp's decomposition with a constant
    # weight): both branches still promote, and the kernel builds (ptxas, no GPU).
    expr = "where((abs(0.25) >= 0.5), (x0 - 1), x1) + where(1 > 0, x0, 2.0)"
    x0, x1 = torch.randn(5, dtype=torch.bfloat16), torch.randn(5)
    got = pdtypes.reference(expr, [x0, x1])
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, x1 + x0.float(), rtol=0, atol=0)
    plan = Plan(expr, ("bfloat16", "float32"), (False, False), "float32", 1, "11", 4, False)
    assert _pointwise_host.compile(plan, *stand_ins(plan, -1)).__ptx__


@pytest.mark.parametrize("dtype, wanted, unwanted", [
    ("float32", "rcp.approx.ftz.f32", "rcp.rn.f32"),   # one MUFU, not the IEEE sequence
    ("bfloat16", "rcp.approx.ftz.f32", "rcp.rn.f32"),  # computed in float32
    ("float64", "rcp.rn.f64", "rcp.approx"),           # double stays correctly rounded
])
def test_sigmoid_reciprocal(dtype, wanted, unwanted):
    plan = Plan("sigmoid(x0) + silu(x1)", (dtype, dtype), (False, False), dtype, 1, "11", 1, False)
    ptx = _pointwise_host.compile(plan, *stand_ins(plan, -1)).__ptx__
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert wanted in ptx and unwanted not in ptx


def test_type_probes_on_the_cpu_agree_with_meta_and_import_no_dynamo():
    """Expressions are typed on one-element CPU tensors (microseconds), not meta ones (whose
    Python kernels import torch._dynamo: about 1 s in a fresh process); where a CPU kernel is
    missing, meta decides. Both agree on every node."""
    from cute_torch.pointwise.dtypes import _probe, evaluate
    cases = [("gelu_tanh(x0 + x1) * 2", (torch.bfloat16, torch.float32)),
             ("x0 / x1 + (x0 < x1)", (torch.int32,) * 2),
             ("where(x0 > 0.5, erf(x1), -x1) ** 2", (torch.float16, torch.float16)),
             ("float32(bfloat16(x0)) + x1 * 3", (torch.float64, torch.int64)),
             ("x0 + x1 * 2", (torch.uint8, torch.bool))]
    for expr, dtypes in cases:
        for zero_dims in ((False, False), (True, False)):
            tree = parse(expr, 2)
            types = {}
            for device in ("cpu", "meta"):
                values: dict = {}
                evaluate(tree, [_probe(d, z, device) for d, z in zip(dtypes, zero_dims)], values)
                types[device] = [(str(n), getattr(v, "dtype", None), getattr(v, "shape", None))
                                 for n, v in values.items()]
            assert types["cpu"] == types["meta"], expr
    code = ("import sys, torch; import cute_torch.ops; from cute_torch.pointwise.dtypes import node_types; "
            "node_types('gelu_tanh(x0 + x1)', (torch.bfloat16, torch.float32), (False, False)); "
            "assert 'torch._dynamo' not in sys.modules")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
