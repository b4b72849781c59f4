"""GPU tier, Hopper: an mbarrier with a transaction count completed by a bulk copy (also under
compute-sanitizer: memcheck, racecheck, synccheck)."""

import re

import pytest
from conftest import read_mlir, run_under_sanitizer

import cute_torch

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def bulk_copy():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("bulk copies and mbarrier transaction counts need sm_90")
    return cute_torch.compile_mlir(read_mlir("bulk_copy.mlir"), arch="sm_90a")


@pytest.mark.parametrize("blocks", [1, 3, 132, 1000])
def test_bulk_copy_completes_on_the_mbarrier_phase(bulk_copy, blocks):
    generator = torch.Generator(device="cuda").manual_seed(1400 + blocks)
    # Two 4 KB chunks per block, each through the same shared buffer and barrier (phases 0, 1).
    src = torch.randn(blocks * 2 * 1024, device="cuda", generator=generator)
    dst = torch.full_like(src, float("nan"))
    bulk_copy.bulk_copy(src, dst, blocks)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)


def run_bulk_copy():
    """A small instance for compute-sanitizer (run in a subprocess by the test below)."""
    module = cute_torch.compile_mlir(read_mlir("bulk_copy.mlir"), arch="sm_90a")
    src = torch.randn(4 * 2 * 1024, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    dst = torch.full_like(src, float("nan"))
    module.bulk_copy(src, dst, 4)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_bulk_copy_is_clean_under_compute_sanitizer(bulk_copy, tool):
    code, report = run_under_sanitizer(tool, "import test_hopper_ops as t; t.run_bulk_copy()")
    # memcheck/synccheck end with "ERROR SUMMARY: 0 errors", racecheck with "(0 errors, 0 warnings)".
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]
