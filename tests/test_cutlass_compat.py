"""CuTe DSL programs under the compatibility namespace (cute_torch.cutlass): two of CuTe DSL's
elementwise-add examples, written here in our own words the way CuTe DSL spells them (one
thread per element; 4-element vectors through zipped_divide and TensorSSA), with only the
import lines changed. CPU tier: they compile (ptxas included) and the namespace maps CuTe DSL's
names; GPU tier: they match torch, outputs poisoned first."""

import pytest
import torch

import cute_torch.cutlass as cutlass
import cute_torch.cutlass.cute as cute
import cute_torch.cutlass.torch as cutlass_torch
from cute_torch.cutlass.cute.runtime import from_dlpack


@cute.kernel
def naive_add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    thread_idx = bidx * bdim + tidx
    m, n = gA.shape
    ni = thread_idx % n
    mi = thread_idx // n
    gC[mi, ni] = gA[mi, ni] + gB[mi, ni]


@cute.jit
def naive_add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    threads_per_block = 256
    m, n = mA.shape
    naive_add_kernel(mA, mB, mC).launch(grid=((m * n) // threads_per_block, 1, 1), block=(threads_per_block, 1, 1))


@cute.kernel
def vectorized_add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    thread_idx = bidx * bdim + tidx
    m, n = gA.shape[1]                     # the grid of (1, 4) tiles
    ni = thread_idx % n
    mi = thread_idx // n
    a_val = gA[(None, (mi, ni))].load()    # one 4-element vector per thread
    b_val = gB[(None, (mi, ni))].load()
    gC[(None, (mi, ni))] = a_val + b_val


@cute.jit
def vectorized_add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    threads_per_block = 256
    gA = cute.zipped_divide(mA, (1, 4))
    gB = cute.zipped_divide(mB, (1, 4))
    gC = cute.zipped_divide(mC, (1, 4))
    vectorized_add_kernel(gA, gB, gC).launch(grid=(cute.size(gC, mode=[1]) // threads_per_block, 1, 1),
                                             block=(threads_per_block, 1, 1))


def _tensors(device="cpu"):
    g = torch.Generator().manual_seed(81)
    a, b = (torch.randn(256, 512, generator=g).to(device) for _ in range(2))
    return a, b, torch.full((256, 512), float("nan"), device=device)


def test_the_namespace_maps_cute_dsl_names():
    assert cutlass.Float32 is cute.Float32 and cutlass.Constexpr is cute.Constexpr
    assert cutlass.range is cute.range and cutlass.const_expr is cute.const_expr
    assert cutlass.dynamic_expr(3) == 3
    assert cutlass_torch.dtype(cutlass.BFloat16) is torch.bfloat16 and cutlass_torch.dtype(cutlass.Int32) is torch.int32
    with pytest.raises(TypeError, match="no torch dtype"):
        cutlass_torch.dtype(cutlass.Float8E4M3FN)
    assert callable(cute.testing.benchmark) and cute.testing.JitArguments(1, x=2).kwargs == {"x": 2}


@pytest.mark.parametrize("program", [naive_add, vectorized_add], ids=["naive", "vectorized"])
def test_the_examples_compile(program):
    a, b, c = _tensors()
    args = [from_dlpack(t) for t in (a, b, c)]
    ptx = cute.compile(program, *args, options={"arch": "sm_80"}).__ptx__
    assert ".entry" in ptx
    if program is vectorized_add:
        assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx


try:   # CuTe DSL programs pass streams as cuda-python's driver CUstream
    from cuda.bindings.driver import CUstream
except ImportError:
    class CUstream:
        """A stand-in with cuda-python's CUstream's interface: int() is the handle."""

        def __init__(self, handle=0):
            self._handle = int(handle)

        def __int__(self):
            return self._handle


@cute.jit
def naive_add_on(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
    m, n = mA.shape
    naive_add_kernel(mA, mB, mC).launch(grid=((m * n) // 256, 1, 1), block=(256, 1, 1), stream=stream)


def test_a_driver_custream_is_a_stream_argument():
    """As CuTe DSL passes `cuda.CUstream(torch_stream.cuda_stream)`: keyed as "a stream" (another
    handle compiles nothing new), handed to launch(stream=)."""
    from cute_torch.launch import is_stream, stream_handle
    assert is_stream(CUstream(1234)) and stream_handle(CUstream(1234)) == 1234 and not is_stream(1234)
    a, b, c = _tensors()
    args = [from_dlpack(t) for t in (a, b, c)]
    from cute_torch.dsl.jit import _arg_key
    assert _arg_key(CUstream(7), None) == _arg_key(CUstream(8), None) != _arg_key(7, None)
    assert ".entry" in cute.compile(naive_add_on, *args, CUstream(7), options={"arch": "sm_80"}).__ptx__


@pytest.mark.gpu
def test_a_driver_custream_runs_the_launch_on_that_stream():
    a, b, c = _tensors("cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        d = torch.empty_like(c)
    naive_add_on(from_dlpack(a), from_dlpack(b), from_dlpack(c), CUstream(side.cuda_stream))
    with torch.cuda.stream(side):
        d.copy_(c)            # ordered after the add only if the add ran on `side`
    side.synchronize()
    assert torch.equal(d, a + b)


@pytest.mark.gpu
@pytest.mark.parametrize("program", [naive_add, vectorized_add], ids=["naive", "vectorized"])
def test_the_examples_match_torch(program):
    a, b, c = _tensors("cuda")
    compiled = cute.compile(program, from_dlpack(a), from_dlpack(b), from_dlpack(c))
    compiled(from_dlpack(a), from_dlpack(b), from_dlpack(c))
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    t_us = cute.testing.benchmark(compiled, kernel_arguments=cute.testing.JitArguments(
        from_dlpack(a), from_dlpack(b), from_dlpack(c)), warmup_iterations=2, iterations=10)
    assert t_us > 0
