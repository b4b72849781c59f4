"""Plain matmuls routed to cute::gemm by the measured table (cute_torch/backend/gemm_routes.py),
on CPU: the rewritten graphs run through the reference evaluator, with tables written here for
the "cpu" device."""

import json

import pytest
import torch
import torch.nn.functional as F

from cute_torch.backend import Options
from cute_torch.backend.gemm_routes import TABLE, layout_of, load_table, shape_class
from test_backend_graphs import aten_targets, bf16, check_same, compile_cpu, gemm_calls

aten = torch.ops.aten


def table_file(tmp_path, ratios: dict) -> str:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps({"cpu": {"classes": {k: {"ratio": r, "shapes": []} for k, r in ratios.items()}}}))
    return str(path)


def options(path: str, **extra) -> Options:
    return Options(devices=("cpu",), check_builds=False, gemm_routes=path, **extra)


def test_shape_classes_round_sizes_to_powers_of_two_and_name_the_contiguous_modes():
    assert shape_class(torch.bfloat16, "kk", 8192, 6144, 5504) == "bf16 kk 8192x8192x4096"
    assert shape_class(torch.float16, "mn", 1000, 2800, 1) == "fp16 mn 1024x2048x1"   # 2048 * sqrt(2) = 2896
    assert shape_class(torch.bfloat16, "kk", 0, 16, 16) == "bf16 kk 1x16x16"
    x, w, dy = bf16(64, 32, seed=1), bf16(48, 32, seed=2), bf16(64, 48, seed=3)
    assert layout_of(x, w.t()) == "kk"            # F.linear's x @ W^T
    assert layout_of(dy, w) == "kn"               # dX = dY @ W
    assert layout_of(dy.t(), x) == "mn"           # dW = dY^T @ X
    assert layout_of(x[:, 1:], w.t()[1:]) is None   # rows that start 2 bytes in: TMA cannot read them in place
    assert layout_of(bf16(4, 8, 6, seed=4)[:, :, 0], w.t()) is None   # neither mode contiguous


def test_a_plain_linear_runs_as_cute_gemm_where_the_table_says_ours_is_faster(tmp_path):
    def f(x, w, b):
        return F.linear(x, w, b)
    path = table_file(tmp_path, {"bf16 kk 32x64x64": 1.02})
    compiled, seen = compile_cpu(f, options(path))
    x, w, b = bf16(32, 64, seed=5), bf16(48, 64, seed=6), bf16(48, seed=7)
    torch.testing.assert_close(compiled(x, w, b).float(), f(x, w, b).float(), rtol=2e-2, atol=2e-2)
    (_, gm, result), = seen
    (call,) = gemm_calls(gm)
    assert call.args[2] == "acc + x0" and aten.addmm.default not in aten_targets(gm)
    assert len(result["routed"]) == 1 and "bf16 kk 32x64x64: 1.020x" in result["routed"][0]
    assert not result["gemms"]                    # no epilogue was fused: routed, not "gemms"


def test_a_plain_matmul_stays_aten_where_the_table_does_not_route_its_class(tmp_path):
    x, w = bf16(32, 64, seed=8), bf16(48, 64, seed=9)
    for ratios, extra in (({"bf16 kk 32x64x64": 0.98}, {}),            # slower than cuBLAS
                          ({"bf16 kn 32x64x64": 1.5}, {}),             # another class
                          ({"bf16 kk 32x64x64": 1.5}, {"gemm": False}),
                          (None, {})):                                  # gemm_routes="": no table
        path = "" if ratios is None else table_file(tmp_path, ratios)
        compiled, seen = compile_cpu(lambda x, w: x @ w.t(), options(path, **extra))
        compiled(x, w)
        (_, gm, result), = seen
        assert not gemm_calls(gm) and not result["routed"] and aten.mm.default in aten_targets(gm), ratios


def test_the_backward_weight_gradient_routes_by_its_own_class(tmp_path):
    """dW = dY^T @ X is "mn"; dX = dY @ W "kn": only the measured class moves."""
    path = table_file(tmp_path, {"bf16 mn 64x64x32": 1.01})
    compiled, seen = compile_cpu(lambda x, w: (x @ w.t()).float().square().sum(), options(path))
    x = bf16(32, 64, seed=10).requires_grad_()
    w = bf16(64, 64, seed=11).requires_grad_()
    compiled(x, w).backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    (x2 @ w2.t()).float().square().sum().backward()
    torch.testing.assert_close(w.grad.float(), w2.grad.float(), rtol=2e-2, atol=2e-1)
    torch.testing.assert_close(x.grad.float(), x2.grad.float(), rtol=2e-2, atol=2e-1)
    backward = [(gm, result) for kind, gm, result in seen if kind == "backward"]
    (gm, result), = backward
    assert len(result["routed"]) == 1 and "mn" in result["routed"][0]
    assert len(gemm_calls(gm)) == 1 and aten.mm.default in aten_targets(gm)   # dX stays ATen


def test_an_empty_matmul_stays_aten(tmp_path):
    path = table_file(tmp_path, {"bf16 kk 1x64x64": 2.0})
    compiled, seen = compile_cpu(lambda x, w: x @ w.t(), options(path))
    compiled(bf16(0, 64, seed=15), bf16(64, 64, seed=16))
    (_, gm, result), = seen
    assert not result["routed"] and not gemm_calls(gm)


def test_a_dynamic_batch_stays_aten(tmp_path):
    """M symbolic: its class is not known at compile time."""
    path = table_file(tmp_path, {f"bf16 kk {m}x64x64": 2.0 for m in (32, 64)})
    layer = torch.nn.Linear(64, 48, bias=False).bfloat16()
    compiled, seen = compile_cpu(layer, options(path), dynamic=True)
    with torch.no_grad():
        compiled(bf16(32, 64, seed=12))
    (_, gm, result), = seen
    assert not result["routed"] and not gemm_calls(gm)


def test_a_routed_linear_keeps_gradients_like_eager(tmp_path):
    path = table_file(tmp_path, {"bf16 kk 32x64x64": 1.1, "bf16 kn 32x64x64": 1.1, "bf16 mn 64x64x32": 1.1})
    graphs = check_same(lambda x, w: F.linear(x, w), bf16(32, 64, seed=13), bf16(64, 64, seed=14), rtol=2e-2,
                        atol=2e-1, options=options(path))
    assert graphs["forward"][1]["routed"] and len(graphs["backward"][1]["routed"]) == 2


def test_the_installed_table_is_keyed_as_the_backend_computes_classes():
    """Every measured shape in gemm_routes.json falls in the class it is filed under, and every
    class's ratio is the median of its shapes': a table from another key scheme would route
    nothing (or the wrong shapes) without failing."""
    import statistics
    facts = json.loads(TABLE.read_text())
    assert facts and load_table(str(TABLE)).keys() == facts.keys()
    for device, entry in facts.items():
        assert entry["classes"], device
        for key, cls in entry["classes"].items():
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[key.split()[0]]
            for m, n, k, _ in cls["shapes"]:
                assert shape_class(dtype, key.split()[1], m, n, k) == key
            assert cls["ratio"] == round(statistics.median(s[3] for s in cls["shapes"]), 4)


@pytest.mark.gpu
def test_routed_matmuls_run_on_the_gpu_forward_and_backward(tmp_path):
    """A table that routes a linear's three classes on this GPU: the forward and both gradients
    from cute::gemm, against an fp32 reference on every element, and the debug files say so."""
    from cute_torch.backend.gemm_routes import device_name
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the library GEMM the backend routes to is Hopper's")
    m, n, k = 384, 256, 192
    classes = {"kk": (m, n, k), "kn": (m, k, n), "mn": (n, k, m)}
    path = tmp_path / "routes.json"
    routed = {shape_class(torch.bfloat16, layout, *sizes): {"ratio": 1.5, "shapes": []}
              for layout, sizes in classes.items()}
    path.write_text(json.dumps({device_name(torch.device("cuda")): {"classes": routed}}))
    generator = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(m, k, device="cuda", generator=generator).bfloat16().requires_grad_()
    w = torch.randn(n, k, device="cuda", generator=generator).bfloat16().requires_grad_()
    dy = torch.randn(m, n, device="cuda", generator=generator).bfloat16()
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: F.linear(x, w), backend="cute",
                             options={"gemm_routes": str(path), "debug_dir": str(tmp_path / "graphs")})
    y = compiled(x, w)
    y.backward(dy)
    xf, wf, dyf = x.detach().double(), w.detach().double(), dy.double()
    for got, want in ((y, xf @ wf.t()), (x.grad, dyf @ wf), (w.grad, dyf.t() @ xf)):
        torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-1)
    routed = "".join(p.read_text() for p in (tmp_path / "graphs").glob("*.regions.txt"))
    assert routed.count("routed: ") == 3, routed


def test_a_table_that_is_not_one_is_a_clear_error(tmp_path):
    """A gemm_routes path that is not a file, or a file that is not a table, names the problem
    (before: a missing file routed nothing, silently)."""
    with pytest.raises(ValueError, match=r"option 'gemm_routes' is the path of a table file.*not a file"):
        Options.parse({"gemm_routes": str(tmp_path / "missing.json")})
    bad = tmp_path / "bad.json"
    bad.write_text('{"NVIDIA H200": {"classes": {"bf16 kk 1x1x1": 1.0}}}')
    with pytest.raises(ValueError, match=r"bad.json is not a gemm_routes table.*TypeError"):
        load_table(str(bad))
    assert Options.parse({"gemm_routes": str(bad)}).gemm_routes == str(bad) and Options.parse({"gemm_routes": ""})
