"""Torch tier (CPU build is enough): the TORCH_LIBRARY(cute) extension loads and registers."""

import pytest

torch = pytest.importorskip("torch")

import cute_torch.ops  # noqa: E402,F401


def test_extension_registers_the_cute_namespace():
    schema = torch.ops.cute.runtime_status.default._schema
    assert str(schema) == "cute::runtime_status() -> str"
    status = torch.ops.cute.runtime_status()
    assert status.startswith("ok: ") or status.startswith("unavailable: ")
