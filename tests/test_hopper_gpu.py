"""GPU tier, Hopper: an mbarrier with a transaction count completed by a bulk copy."""

import pytest
from conftest import read_mlir

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
