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


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """Tests never read or fill the user's disk cache."""
    os.environ["CUTE_TORCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cute_cache"))


FILECHECK = next((p for p in ("/usr/lib/llvm-19/bin/FileCheck", "/usr/bin/FileCheck-19", "/usr/bin/FileCheck")
                  if os.path.exists(p)), None)


@pytest.fixture
def filecheck():
    """filecheck(text, checks): run LLVM's FileCheck with `checks` (// CHECK lines) on `text`."""
    import subprocess
    import tempfile

    if FILECHECK is None:
        pytest.skip("FileCheck (LLVM 19) is not installed here")

    def run(text: str, checks: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".check", delete=False) as f:
            f.write(checks)
        result = subprocess.run([FILECHECK, f.name, "--dump-input=fail"], input=text, capture_output=True, text=True)
        os.unlink(f.name)
        assert result.returncode == 0, result.stderr

    return run


def read_mlir(name: str) -> str:
    with open(os.path.join(MLIR_DIR, name)) as f:
        return f.read()


@pytest.fixture
def vector_add_mlir():
    return read_mlir("vector_add.mlir")
