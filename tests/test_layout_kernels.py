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


@cute.kernel
def _profile_kernel(x: cute.Tensor, rows: cute.Tensor, cols: cute.Tensor, inner: cute.Tensor):
    values = x.load()                                                 # (4, 8): one thread, all of it
    rows.store(values.reduce(cute.ReductionOp.ADD, 0.0, reduction_profile=(None, 1)))
    cols.store(values.reduce(cute.ReductionOp.MAX, -1e30, reduction_profile=(1, None)))
    nested = cute.make_rmem_tensor((4, (2, 4)), cute.Float32)
    nested.store(values)
    inner.store(nested.load().reduce(cute.ReductionOp.ADD, 1.0, reduction_profile=(None, (None, 1))))


@cute.jit
def _profile(x: cute.Tensor, rows: cute.Tensor, cols: cute.Tensor, inner: cute.Tensor):
    _profile_kernel(x, rows, cols, inner).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_tensor_ssa_reductions_over_chosen_modes():
    g = torch.Generator().manual_seed(41)
    x = torch.randn(8, 4, generator=g).cuda().t()                   # (4, 8), column-major like the register tile
    rows, cols, inner = (_poisoned(s, torch.float32) for s in ((4,), (8,), (4, 2)))
    _profile(x, rows, cols, inner)
    x64 = x.double().cpu()
    torch.testing.assert_close(rows.double().cpu(), x64.sum(1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cols.double().cpu(), x64.max(0).values, rtol=0, atol=0)
    # (4, (2, 4)) keeps mode 0 and the 2 of mode 1: column c = c0 + 2 * c1 folds over c1.
    want = x64.reshape(4, 4, 2).sum(1) + 1.0
    torch.testing.assert_close(inner.double().cpu(), want, rtol=1e-6, atol=1e-6)


# -- coordinate tensors partitioned by thread: every element learns its own (row, column) ------

@cute.kernel
def _thread_coordinates(rows: cute.Tensor, cols: cute.Tensor, tiled: cute.Constexpr):
    """Writes each element's row and column where a thread's partition of a coordinate tensor
    says it is: a wrong coordinate leaves a poisoned element or writes a wrong value."""
    tid = cute.arch.thread_idx()[0]
    bm, bn, _ = cute.arch.block_idx()
    tile = cute.local_tile(cute.make_identity_tensor(rows.shape), (64, 64), (bm, bn))
    part = tiled.get_slice(tid)
    coords = part.partition_C(tile) if cute.const_expr(isinstance(tiled, cute.TiledMma)) else part.partition_S(tile)
    for i in cute.range_constexpr(cute.size(coords)):
        r, c = coords[i]
        rows[r, c] = r
        cols[r, c] = c


@cute.jit
def _thread_coordinates_host(rows: cute.Tensor, cols: cute.Tensor, by_mma: cute.Constexpr):
    if cute.const_expr(by_mma):
        tiled = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(cute.BFloat16, cute.Float32, (16, 8, 16)), (2, 2, 1))
    else:
        atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cute.Int32)
        tiled = cute.make_tiled_copy_tv(atom, cute.make_layout((16, 8), stride=(8, 1)),
                                        cute.make_layout((4, 8), stride=(8, 1)))
    grid = (cute.size(rows, mode=[0]) // 64, cute.size(rows, mode=[1]) // 64, 1)
    _thread_coordinates(rows, cols, tiled).launch(grid=grid, block=(128, 1, 1))


@pytest.mark.parametrize("by_mma", [True, False], ids=["mma", "tiled_copy"])
def test_partitioned_coordinate_tensors_give_every_element_its_coordinates(by_mma):
    # Columns past 2**16 too: a packed coordinate must not lose the column's high bits.
    rows = torch.full((128, 66 * 1024), -1, dtype=torch.int32, device="cuda")
    cols = rows.clone()
    _thread_coordinates_host(rows, cols, by_mma)
    torch.cuda.synchronize()
    want_rows = torch.arange(rows.shape[0], dtype=torch.int32, device="cuda").view(-1, 1).expand_as(rows)
    want_cols = torch.arange(rows.shape[1], dtype=torch.int32, device="cuda").view(1, -1).expand_as(rows)
    assert torch.equal(rows, want_rows) and torch.equal(cols, want_cols)
