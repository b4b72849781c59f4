"""GPU tier: layouts with run-time leaves compute what the static algebra computes. The same
random layouts are evaluated once with leaves the kernel receives at run time (`cute` dialect
ops lowered by the C++ passes) and once statically (the C++ library through `_C.layout`), every
offset compared; tiling and partitioning a dynamic-shape tensor copies every element once;
swizzles of run-time offsets match the static swizzle. Outputs are poisoned first."""

import random

import pytest
import torch

import cute_torch as cute
from cute_torch._C import layout as static_algebra
from cute_torch.dsl.int_tuple import leaves, rebuild

pytestmark = pytest.mark.gpu
THREADS = 128


def _random_shape(rng, depth=0):
    if depth < 2 and rng.random() < 0.35:
        return tuple(_random_shape(rng, depth + 1) for _ in range(rng.randint(1, 3)))
    return rng.randint(1, 6)


def _random_layouts(count: int, seed: int) -> list:
    """(shape, stride, which leaves are run-time) for nested shapes with compact or arbitrary
    strides (zeros included)."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        shape = _random_shape(rng)
        shape = shape if isinstance(shape, tuple) else (shape,)
        n = len(leaves(shape))
        if rng.random() < 0.5:
            order, strides, current = rng.sample(range(n), n), [0] * n, 1
            for i in order:
                strides[i], current = current, current * leaves(shape)[i]
        else:
            strides = [rng.choice([0, 1, 2, 3, 5, 8, 13]) for _ in range(n)]
        dynamic = [rng.random() < 0.7 for _ in range(2 * n)]
        cases.append((shape, rebuild(shape, strides), tuple(dynamic)))
    return cases


@cute.kernel
def _evaluate_kernel(case: cute.Constexpr, out: cute.Tensor, *runtime):
    shape, stride, dynamic = case
    values, given = leaves(shape) + leaves(stride), list(runtime)
    mixed = [given.pop(0) if d else v for v, d in zip(values, dynamic)]
    n = len(leaves(shape))
    layout = cute.make_layout(rebuild(shape, mixed[:n]), stride=rebuild(stride, mixed[n:]))
    t = cute.arch.block_idx()[0] * THREADS + cute.arch.thread_idx()[0]
    if t < out.shape[0]:
        out[t, 0] = layout(t)  # a linear coordinate, split over the nested modes
        out[t, 1] = layout(cute.idx2crd(t, layout.shape))  # the natural coordinate, then mode by mode
        out[t, 2] = cute.size(layout)
        out[t, 3] = cute.cosize(layout)


@cute.jit
def _evaluate(case: cute.Constexpr, out: cute.Tensor, *runtime):
    _evaluate_kernel(case, out, *runtime).launch(grid=((out.shape[0] + THREADS - 1) // THREADS, 1, 1),
                                                 block=(THREADS, 1, 1))


@pytest.mark.parametrize("case", _random_layouts(40, seed=20))
def test_run_time_leaves_compute_what_the_static_algebra_computes(case):
    shape, stride, dynamic = case
    values = leaves(shape) + leaves(stride)
    runtime = [cute.Int32(v) for v, d in zip(values, dynamic) if d]
    size = 1
    for extent in leaves(shape):
        size *= extent
    out = torch.full((size, 4), -12345, dtype=torch.int32, device="cuda")
    _evaluate(case, out, *runtime)
    expected = torch.tensor([static_algebra.crd2idx(t, (shape, stride)) for t in range(size)], dtype=torch.int32)
    got = out.cpu()
    assert torch.equal(got[:, 0], expected), f"{shape}:{stride}"
    assert torch.equal(got[:, 1], expected), f"{shape}:{stride}"
    assert (got[:, 2] == size).all()
    assert (got[:, 3] == static_algebra.cosize((shape, stride))).all()


@cute.kernel
def _tiled_copy_kernel(src: cute.Tensor, dst: cute.Tensor, rests: cute.Tensor):
    # One CTA per 16x32 tile of a dynamic-shape tensor; 128 threads as a row-major (4,32) grid,
    # each copying its 4x1 share of the tile.
    bx, by, _ = cute.arch.block_idx()
    threads = cute.make_layout((4, 32), stride=(32, 1))
    t = cute.arch.thread_idx()[0]
    mine_src = cute.local_partition(cute.local_tile(src, (16, 32), (bx, by)), threads, t)
    mine_dst = cute.local_partition(cute.local_tile(dst, (16, 32), (bx, by)), threads, t)
    for i in cute.range_constexpr(4):
        mine_dst[i, 0] = mine_src[i, 0]
    if t == 0 and bx == 0 and by == 0:
        tiles = cute.zipped_divide(src, (16, 32))
        rests[0] = cute.size(tiles, mode=[1, 0])
        rests[1] = cute.size(tiles, mode=[1, 1])


@cute.jit
def _tiled_copy(src: cute.Tensor, dst: cute.Tensor, rests: cute.Tensor):
    _tiled_copy_kernel(src, dst, rests).launch(grid=(src.shape[0] // 16, src.shape[1] // 32, 1),
                                               block=(128, 1, 1))


@pytest.mark.parametrize("shape", [(16, 32), (64, 96), (48, 320)])
@pytest.mark.parametrize("transposed", [False, True])
def test_local_tile_and_local_partition_of_dynamic_tensors_copy_every_element_once(shape, transposed):
    g = torch.Generator(device="cuda").manual_seed(21)
    src = torch.randn(shape if not transposed else shape[::-1], device="cuda", generator=g)
    src = src.t() if transposed else src  # column-major strides as run-time values too
    dst = torch.full(shape, float("nan"), device="cuda")
    rests = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    dynamic = [cute.from_dlpack(x).mark_layout_dynamic() for x in (src, dst)]
    _tiled_copy(*dynamic, rests)
    assert torch.equal(dst, src)
    assert rests.tolist() == [shape[0] // 16, shape[1] // 32]


@cute.kernel
def _swizzle_kernel(out: cute.Tensor, bits: cute.Constexpr, base: cute.Constexpr, shift: cute.Constexpr):
    t = cute.arch.block_idx()[0] * THREADS + cute.arch.thread_idx()[0]
    out[t] = cute.make_swizzle(bits, base, shift)(t)


@cute.jit
def _swizzle(out: cute.Tensor, bits: cute.Constexpr, base: cute.Constexpr, shift: cute.Constexpr):
    _swizzle_kernel(out, bits, base, shift).launch(grid=(out.shape[0] // THREADS, 1, 1), block=(THREADS, 1, 1))


@pytest.mark.parametrize("swizzle", [(3, 4, 3), (2, 3, 3), (3, 2, -3), (1, 0, 5)])
def test_swizzles_of_run_time_offsets_match_the_static_swizzle(swizzle):
    out = torch.full((4096,), -1, dtype=torch.int32, device="cuda")
    _swizzle(out, *swizzle)
    expected = torch.tensor([static_algebra.swizzle(*swizzle, t) for t in range(4096)], dtype=torch.int32)
    assert torch.equal(out.cpu(), expected)


@cute.jit
def _predicated_copy(src: cute.Tensor, dst: cute.Tensor):
    from test_layout_ops import _predicated_tail
    _predicated_tail(src, dst).launch(grid=(cute.ceil_div(src.shape[0], 16), cute.ceil_div(src.shape[1], 32), 1),
                                      block=(128, 1, 1))


@pytest.mark.parametrize("shape", [(100, 50), (16, 32), (1, 77), (33, 1)])
def test_identity_tensor_predication_copies_tail_tiles_exactly(shape):
    g = torch.Generator(device="cuda").manual_seed(22)
    src = torch.randn(shape, device="cuda", generator=g)
    dst = torch.full(shape, float("nan"), device="cuda")
    _predicated_copy(*[cute.from_dlpack(x).mark_layout_dynamic() for x in (src, dst)])
    assert torch.equal(dst, src)
