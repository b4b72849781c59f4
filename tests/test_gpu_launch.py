"""GPU tier: compiled host entries launch on torch's current stream with correct results."""

import pytest
from conftest import read_mlir

import cute_torch

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


def poisoned_like(t):
    return torch.full_like(t, float("nan"))


@pytest.fixture(scope="module")
def vector_add():
    return cute_torch.compile_mlir(read_mlir("vector_add.mlir"))


@pytest.mark.parametrize("n", [1, 255, 256, 1000, 1 << 20, (1 << 20) + 3])
def test_vector_add_on_current_stream(vector_add, n):
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = poisoned_like(a)
    vector_add.vector_add(a, b, c, n)
    torch.cuda.synchronize()
    expected = (a.double() + b.double()).float()
    assert torch.equal(c, expected)  # fp32 addition is exact against the rounded fp64 sum


def test_vector_add_on_a_side_stream_is_ordered_with_torch(vector_add):
    n = 1 << 22
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.randn(n, device="cuda")  # produced on the side stream
        b = torch.randn(n, device="cuda")
        c = poisoned_like(a)
        vector_add.vector_add(a, b, c, n)  # must run after the randn on the same stream
        d = c * 2  # and before this
    side.synchronize()
    assert torch.equal(d, ((a + b) * 2))


def test_explicit_stream_argument(vector_add):
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = poisoned_like(a)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    vector_add.vector_add(a, b, c, n, stream=stream)
    stream.synchronize()
    assert torch.equal(c, a + b)


def test_more_than_48kb_of_dynamic_shared_memory():
    module = cute_torch.compile_mlir(read_mlir("smem_reverse.mlir"))
    threads, blocks = 1024, 96
    x = torch.randn(threads * blocks, device="cuda")
    y = poisoned_like(x)
    module.reverse_blocks(x, y, blocks, threads, 64 * 1024)  # above the default 48 KB limit
    torch.cuda.synchronize()
    assert torch.equal(y, x.view(blocks, threads).flip(1).reshape(-1))


def test_cluster_launch():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("clusters need sm_90")
    module = cute_torch.compile_mlir(read_mlir("smem_reverse.mlir"))
    threads, blocks = 256, 64
    x = torch.randn(threads * blocks, device="cuda")
    y = poisoned_like(x)
    module.reverse_clusters(x, y, blocks, threads, threads * 4)
    torch.cuda.synchronize()
    assert torch.equal(y, x.view(blocks, threads).flip(1).reshape(-1))


def test_launch_failure_names_the_kernel():
    module = cute_torch.compile_mlir(read_mlir("smem_reverse.mlir"))
    x = torch.randn(4096, device="cuda")
    y = poisoned_like(x)
    with pytest.raises(cute_torch.CudaError, match=r"launching kernel 'reverse'.*block \(2048, 1, 1\)"):
        module.reverse_blocks(x, y, 2, 2048, 0)  # 2048 threads per block is too many
    with pytest.raises(cute_torch.CudaError, match="grid and block dims must be in"):
        module.reverse_blocks(x, y, 0, 256, 0)


def test_cpu_tensors_are_refused(vector_add):
    a = torch.randn(16)
    with pytest.raises(ValueError, match="must be CUDA tensors"):
        vector_add.vector_add(a, a, a, 16)


def test_torch_extension_sees_the_gpu():
    import cute_torch.ops  # noqa: F401
    assert torch.ops.cute.runtime_status().startswith("ok: ")
