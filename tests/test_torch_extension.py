"""Torch tier (CPU build is enough): the TORCH_LIBRARY(cute) extension loads and registers."""

import pytest

torch = pytest.importorskip("torch")

from cute_torch import torch_ops  # noqa: E402


def test_extension_registers_the_cute_namespace():
    torch_ops.load()
    schema = torch.ops.cute.runtime_status.default._schema
    assert str(schema) == "cute::runtime_status() -> str"
    status = torch.ops.cute.runtime_status()
    assert status.startswith("ok: ") or status.startswith("unavailable: ")
