"""Torch tier (CPU build is enough): the TORCH_LIBRARY(cute) extension loads and registers."""

import pytest

torch = pytest.importorskip("torch")

import cute_torch  # noqa: E402
import cute_torch.ops  # noqa: E402,F401


def test_extension_registers_the_cute_namespace():
    schema = torch.ops.cute.runtime_status.default._schema
    assert str(schema) == "cute::runtime_status() -> str"
    # The op reports what the runtime sees: the same answer as the Python module's driver check.
    status = torch.ops.cute.runtime_status()
    ok, why = cute_torch._C.driver_available()
    if ok:
        assert status.startswith("ok: ") and status.endswith(" device(s)")
        assert int(status.split()[1]) >= 1 or not cute_torch.gpu_available()
    else:
        assert status == f"unavailable: {why}"


def test_scalar_type_codes_come_from_c10():
    codes = {torch.ops.cute.scalar_type_code(d) for d in (torch.float32, torch.bfloat16, torch.int64, torch.bool)}
    assert len(codes) == 4  # distinct
    assert torch.ops.cute.scalar_type_code(torch.float32) == 6  # c10::ScalarType::Float, stable in c10
