"""GPU tier for layouts, tensors and TensorSSA: the CuTe-style elementwise add and the
swizzled shared-memory transpose against torch, several shapes and dtypes, outputs poisoned
first, every element checked."""

import pytest
import torch

import cute_torch as cute
from cute_torch.kernels import elementwise_add, transpose

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Whole tiles, edge tiles in either mode, fewer rows than a tile, one row.
ADD_SHAPES = [(64, 1024), (100, 300), (16, 128), (3, 1000), (1, 77), (4096, 512)]
TRANSPOSE_SHAPES = [(64, 64), (256, 512), (512, 192), (100, 70), (1, 300), (1000, 1)]


def _poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ADD_SHAPES)
def test_elementwise_add_matches_torch(shape, dtype):
    a = torch.randn(shape, device="cuda").to(dtype)
    b = torch.randn(shape, device="cuda").to(dtype)
    out = _poisoned(shape, dtype)
    elementwise_add(a, b, out)
    # Reference in float64, rounded once to the output type (the kernel adds in float32 and
    # rounds once: identical for these inputs).
    expected = (a.double() + b.double()).to(dtype)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", TRANSPOSE_SHAPES)
def test_transpose_matches_torch(shape, dtype):
    src = torch.randn(shape, device="cuda").to(dtype)
    out = _poisoned((shape[1], shape[0]), dtype)
    transpose(src, out)
    assert torch.equal(out, src.t().contiguous())


def test_non_contiguous_strides_are_respected():
    base = torch.randn(128, 1024, device="cuda")
    a, b = base[:, ::2], base[:, 1::2]  # stride 2 in the last mode: no vectors, same answers
    out = _poisoned(a.shape, a.dtype)
    elementwise_add(a, b, out)
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)


@cute.kernel
def _tensor_ssa_kernel(x: cute.Tensor, y: cute.Tensor, sums: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row = x[(tidx, None)]  # this thread's row, 8 contiguous floats
    values = row.load()
    scaled = cute.math.exp(values.to(cute.Float32)) * 0.5 - values
    y[(tidx, None)].store(scaled)
    frag = cute.make_rmem_tensor((8,), cute.Float32)
    frag.store(values)
    sums[tidx] = frag.load().reduce(cute.ReductionOp.ADD) + values.reduce(cute.ReductionOp.MAX, init=0.0)


@cute.jit
def _tensor_ssa(x: cute.Tensor, y: cute.Tensor, sums: cute.Tensor):
    _tensor_ssa_kernel(x, y, sums).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_tensor_ssa_arithmetic_registers_and_reductions():
    x = torch.randn(32, 8, device="cuda")
    y, sums = _poisoned((32, 8), torch.float32), _poisoned((32,), torch.float32)
    _tensor_ssa(x, y, sums)
    x64 = x.double()
    torch.testing.assert_close(y.double(), torch.exp(x64) * 0.5 - x64, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(sums.double(), x64.sum(1) + x64.max(1).values.clamp(min=0), rtol=1e-5, atol=1e-5)
