"""Test tiers: everything here runs without a GPU except tests marked `gpu`, which are skipped
unless a CUDA driver, a device and torch with CUDA are present."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import sanitizer

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

def run_under_sanitizer(tool: str, script: str, **env) -> tuple[int, str]:
    """Runs `python -c script` under compute-sanitizer's `tool` (tests/sanitizer.py); returns (exit
    code: 99 when it found errors, its report). Skips where the tool is missing."""
    found = sanitizer.find()
    if found is None:
        pytest.skip("compute-sanitizer is not installed")
    code, _, report = sanitizer.run(found, tool, script, timeout=300, **env)
    return code, report


@pytest.fixture
def load_example():
    """Imports examples/<name>.py (the examples are scripts, not a package)."""
    def load(name: str):
        path = pathlib.Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"example_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


def check_bf16_gemm(gemm, m: int, n: int, k: int, seed: int) -> None:
    """c = a @ b.T by `gemm(a, b, c)` for fresh bf16 a (M, K), b (N, K) and a poisoned bf16 c,
    against float64 rounded to bf16, every element."""
    import torch
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16().cuda()
    b = torch.randn(n, k, generator=g).bfloat16().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c)
    torch.cuda.synchronize()
    want = (a.double() @ b.double().t()).to(torch.bfloat16)
    torch.testing.assert_close(c.cpu().double(), want.cpu().double(), rtol=8e-3, atol=1e-2)


def copy_by_threads(src, dst, tid, threads: int = 128) -> None:
    """In a test kernel: `threads` threads copy a 2-D tile element by element, row-major (e.g.
    global memory into a swizzled shared tile). Plain Python: its loop unrolls while tracing."""
    import cute_torch as cute
    rows, cols = cute.size(dst, mode=[0]), cute.size(dst, mode=[1])
    for i in range(rows * cols // threads):
        r, c = (tid + threads * i) // cols, (tid + threads * i) % cols
        dst[r, c] = src[r, c]


def wgmma_tile(tiled_mma, acc, tCrA, tCrB, k_blocks: int = 4) -> None:
    """In a test kernel: acc = A @ B over `k_blocks` k-blocks of one warpgroup MMA tile (fence,
    the first block overwriting acc, commit, wait). Plain Python: it unrolls while tracing."""
    import cute_torch as cute
    warpgroup = cute.nvgpu.warpgroup
    warpgroup.fence()
    tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
    for k in range(k_blocks):
        cute.gemm(tiled_mma, acc, tCrA[None, None, k], tCrB[None, None, k], acc)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()
    warpgroup.wait_group(0)
