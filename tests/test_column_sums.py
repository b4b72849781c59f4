"""cute::column_sum (kernels/column_sums.py, csrc/torch/RowOps.cpp): sums over every dim but the
last. CPU tier: the builder's kernels (16-byte loads, four in flight) and the op's schema,
fake and errors. GPU tier: the op and the kernel's Python entry against float64 sums of fresh
random inputs, every column checked, outputs placed over poisoned memory; determinism; views
that need single-element loads; no rows; autograd."""

import pytest
import torch

import cute_torch.ops as cops
from cute_torch.kernels.column_sums import column_sum
from cute_torch.ops import row_build

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_the_builder_compiles_16_byte_loads_four_in_flight():
    views = "r;bfloat16;2048;2048;16;0|r;float32;2048;2048;16;0|c;bfloat16;2048;1;16;0"
    built = row_build.build("column_sum", views, "", 0, arch="sm_90a")
    slabs, partials = built[-1].__ptx__.split(".entry")[1:3]
    assert slabs.count("ld.global.v4.b32") == 5            # 4 unrolled rows and the remainder's
    assert partials.count("ld.global.v4.f32") == 5
    assert list(built[6:-1]) == [0, 1000, 1, 1001, 2, 5000]      # x, partials (pointers, rows), out, groups
    unaligned = "r;float16;37;37;2;0|r;float32;37;37;16;0|c;float16;37;1;2;0"
    assert "ld.global.v4" not in row_build.build("column_sum", unaligned, "", 0, arch="sm_90a")[-1].__ptx__


def test_schema_fake_and_errors():
    assert "column_sum(Tensor x) -> Tensor" in str(torch.ops.cute.column_sum.default._schema)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        out = torch.ops.cute.column_sum(torch.empty(4, 6, 10, dtype=torch.bfloat16, device="cuda"))
        assert out.shape == (10,) and out.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        column_sum(torch.zeros(4, 3, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="CUDA tensors"):
        torch.ops.cute.column_sum(torch.zeros(4, 3))


def _poisoned_pool():
    """Leaves NaN in the caching allocator's free blocks, where the op's outputs will land."""
    torch.full((1 << 24,), float("nan"), device="cuda")
    torch.cuda.synchronize()


def _check(x: torch.Tensor, got: torch.Tensor) -> None:
    rows = x.reshape(-1, x.shape[-1]).double()
    want = rows.sum(0)
    assert got.shape == want.shape and got.dtype == x.dtype
    # Float32 sums rounded once to the output's dtype: within one rounding step of the exact sum,
    # plus Float32 accumulation over M terms of size |x|.
    step = {torch.float32: 2e-6, torch.bfloat16: 8e-3, torch.float16: 1e-3}[x.dtype]
    slack = 1e-6 * rows.abs().sum(0) + 1e-30
    assert torch.all((got.double() - want).abs() <= step * want.abs() + slack), "column sums off"


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape,dtype", [((8192, 2048), torch.bfloat16), ((4, 1024, 6144), torch.bfloat16),
                                         ((300, 520), torch.float16), ((1000, 100), torch.float32),
                                         ((257, 37), torch.float16), ((1, 4096), torch.bfloat16),
                                         ((100000, 64), torch.float32)])
def test_column_sums_match_float64(shape, dtype):
    g = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(*shape, generator=g) * 3 + 0.5).to(dtype).cuda()
    _poisoned_pool()
    _check(x, cops.column_sum(x))
    _poisoned_pool()
    _check(x, column_sum(x))
    assert torch.equal(cops.column_sum(x), cops.column_sum(x))           # a fixed order of additions


@pytest.mark.gpu
@needs_gpu
def test_views_single_element_loads_and_no_rows():
    g = torch.Generator().manual_seed(7)
    wide = torch.randn(640, 136, generator=g).bfloat16().cuda()
    _check(wide[:, :100], cops.column_sum(wide[:, :100]))               # row stride 136, N 100: whole vectors
    _check(wide[:, 3:103], cops.column_sum(wide[:, 3:103]))             # a 6-byte offset: single elements
    _check(wide.t(), cops.column_sum(wide.t()))                         # column-major: a contiguous copy
    empty = cops.column_sum(torch.empty(0, 48, device="cuda", dtype=torch.float16))
    assert empty.shape == (48,) and torch.all(empty == 0)


@pytest.mark.gpu
@needs_gpu
def test_the_gradient_is_a_broadcast():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 50, 96, generator=g).cuda().requires_grad_()
    dy = torch.randn(96, generator=g).cuda()
    cops.column_sum(x).backward(dy)
    assert torch.equal(x.grad, dy.expand(2, 50, 96))
