"""Test tiers: everything here runs without a GPU except tests marked `gpu`, which are skipped
unless a CUDA driver, a device and torch with CUDA are present."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MLIR_DIR = os.path.join(ROOT, "tests", "mlir")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (run with -m gpu on the GPU machine)")


def _gpu_reason():
    import cute_torch

    if not cute_torch.gpu_available():
        return "no CUDA driver or device"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch has no CUDA"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"gpu test: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


def read_mlir(name: str) -> str:
    with open(os.path.join(MLIR_DIR, name)) as f:
        return f.read()


@pytest.fixture
def vector_add_mlir():
    return read_mlir("vector_add.mlir")
