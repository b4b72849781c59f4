"""Compile-only tier: the layout kernels trace, lower and assemble without a GPU, and the
vector widths the layouts promise reach the PTX."""

import re

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError
from cute_torch.kernels import copy_kernels as k


def accesses(ptx: str) -> set:
    return set(re.findall(r"(?:ld|st)\.(?:global|shared)[.\w]*", ptx))


@pytest.mark.parametrize("dtype, vector", [(torch.float32, "v4.f32"), (torch.bfloat16, "v4.b32")])
def test_add_and_transpose_use_16_byte_accesses(dtype, vector):
    a = torch.randn(104, 320).to(dtype)  # rows 16-byte aligned both ways; edge tiles in both modes
    add = cute.compile(k._add, a, a, torch.empty_like(a), *k._add_layouts(dtype))
    assert {f"ld.global.{vector}", f"st.global.{vector}"} <= accesses(add.__ptx__)
    t = cute.compile(k._transpose, a, torch.empty(320, 104, dtype=dtype), *k._transpose_layouts(dtype))
    found = accesses(t.__ptx__)
    assert {f"ld.global.{vector}", f"st.global.{vector}", f"st.shared.{vector}"} <= found
    assert "xor.b32" in t.__ptx__  # the swizzle


def test_rows_only_8_byte_aligned_get_8_byte_vectors():
    a = torch.randn(100, 300).to(torch.bfloat16)  # a row is 600 bytes: offsets only 8-byte aligned
    add = cute.compile(k._add, a, a, torch.empty_like(a), *k._add_layouts(torch.bfloat16))
    found = accesses(add.__ptx__)
    assert "ld.global.v2.b32" in found and "ld.global.v4.b32" not in found


@cute.kernel
def _load_dynamic(x: cute.Tensor):
    x.load()


@cute.jit
def _load_dynamic_host(x: cute.Tensor):
    _load_dynamic(x).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_loading_a_dynamic_tensor_says_to_tile_it_first():
    x = cute.from_dlpack(torch.randn(64)).mark_layout_dynamic()
    with pytest.raises(DSLError) as err:
        cute.compile(_load_dynamic_host, x)
    assert "Tensor.load needs a static layout" in str(err.value)
    assert "test_layout_compile.py" in str(err.value)


def _transpose_accesses(dtype):
    """For each warp-wide instruction of the transpose's fast path: the (row, column) elements its
    32 threads touch in a part of the tile, one list per thread (evaluated with the eager algebra)."""
    tiler, tv, smem = k._transpose_layouts(dtype)
    vec = k._vector_elements(dtype)
    rows, cols = tiler
    for pr in range(k.TRANSPOSE_TILE // rows):
        for pc in range(k.TRANSPOSE_TILE // cols):
            for warp in range(cute.size(tv, mode=[0]) // 32):
                for first in range(0, cute.size(tv, mode=[1]), vec):
                    yield smem, vec, [[(tv((t, v)) % rows + pr * rows, tv((t, v)) // rows + pc * cols)
                                       for v in range(first, first + vec)]
                                      for t in range(warp * 32, warp * 32 + 32)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_transpose_global_accesses_cover_whole_sectors(dtype):
    # Input and output tiles are row-major and use the same thread-value layout: each warp-wide
    # 16-byte access must fill the 32-byte sectors it touches (no sector written half by one
    # instruction and half by the next).
    size = torch.empty((), dtype=dtype).element_size()
    for _, _, threads in _transpose_accesses(dtype):
        per_row: dict = {}
        for elements in threads:
            for r, c in elements:
                per_row.setdefault(r, set()).update(range(c * size, (c + 1) * size))
        for r, covered in per_row.items():
            sectors = {b // 32 for b in covered}
            assert len(covered) == 32 * len(sectors), f"row {r}: {len(covered)} bytes over {len(sectors)} sectors"


def byte_address(smem, coord, size: int) -> int:
    """Where a smem tensor under a composed layout puts `coord`: the swizzle acts on bytes."""
    return smem.inner(smem.outer(coord) * size)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_transpose_shared_accesses_are_bank_conflict_free(dtype):
    size = torch.empty((), dtype=dtype).element_size()
    for smem, vec, threads in _transpose_accesses(dtype):
        # Row-wise 16-byte stores run a quarter warp (8 threads, 128 bytes) at a time: 8 distinct
        # 16-byte bank groups each.
        for quarter in range(4):
            groups = {byte_address(smem, threads[t][0], size) // 16 % 8 for t in range(quarter * 8, quarter * 8 + 8)}
            assert len(groups) == 8
        # Transposed scalar reads (i, j) -> smem(j, i): at most one 4-byte word per bank.
        for v in range(vec):
            words = {byte_address(smem, (c, r), size) // 4 for r, c in (elements[v] for elements in threads)}
            banks = {w % 32 for w in words}
            assert len(banks) == len(words), f"value {v}: {len(words)} words in {len(banks)} banks"


@cute.kernel
def _swizzled_table(out: cute.Tensor, coords: cute.Constexpr):
    # A 128-byte-row fp16 tile (8 x 64) under CuTe DSL's 128-byte swizzle, Sw<3,4,3> on bytes.
    tile = cute.arch.alloc_smem(cute.Float16, cute.make_composed_layout(
        cute.make_swizzle(3, 4, 3), 0, cute.make_layout((8, 64), stride=(64, 1))))
    for i, (r, c) in enumerate(coords):
        tile[r, c] = cute.Float16(i)


@cute.jit
def _swizzled_table_host(out: cute.Tensor, coords: cute.Constexpr):
    _swizzled_table(out, coords).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_a_swizzle_acts_on_byte_addresses_as_in_cute_dsl():
    # By hand: byte b = r*128 + c*2; bits 4-6 ^= bits 7-9; element = b' / 2.
    #   (0,5): 10 -> 10 -> 5;  (1,0): 128 -> 128^16 = 144 -> 72;  (2,8): 272 -> 272^32 = 304 -> 152;
    #   (7,63): 1022 -> 1022^112 = 910 -> 455;  (3,9): 402 -> 402^48 = 418 -> 209.
    table = {(0, 5): 5, (1, 0): 72, (2, 8): 152, (7, 63): 455, (3, 9): 209}
    mlir = cute.compile(_swizzled_table_host, torch.zeros(1), tuple(table)).__mlir__
    # (MLIR names a constant for its value: %c72_i32; the DSL makes constants at the body's top)
    indices = [int(i) for i in re.findall(r"llvm\.getelementptr %\w+\[%c(\d+)_i32\]", mlir)]
    assert indices == list(table.values())


def test_a_swizzle_that_would_split_elements_is_an_error():
    @cute.kernel
    def split(out: cute.Tensor):
        tile = cute.arch.alloc_smem(cute.Float32, cute.make_composed_layout(
            cute.make_swizzle(3, 1, 3), 0, cute.make_layout((8, 64), stride=(64, 1))))
        tile[1, 0] = 1.0

    @cute.jit
    def host(out: cute.Tensor):
        split(out).launch(grid=(1, 1, 1), block=(1, 1, 1))

    with pytest.raises(DSLError, match=r"Sw<3,1,3> acts on byte addresses and would split Float32 elements"):
        cute.compile(host, torch.zeros(1))


@cute.kernel
def _copy_row_vectors(src: cute.Tensor, dst: cute.Tensor, assumed: cute.Constexpr):
    # One 8-element vector of row blockIdx of a tensor whose row stride is a run-time value.
    row = cute.arch.block_idx()[0]
    if cute.const_expr(assumed):
        src = cute.make_tensor(src.iterator, cute.make_layout(src.shape, stride=(cute.assume(src.stride[0], divby=8),
                                                                                    1)))
    start = cute.domain_offset((row, 0), src)
    cute.local_tile(start, (1, 8), (0, 0))[(0, None)].store(
        cute.local_tile(start, (1, 8), (0, 0))[(0, None)].load())
    dst[row] = src[(row, 0)]


@cute.jit
def _copy_rows(src: cute.Tensor, dst: cute.Tensor, assumed: cute.Constexpr):
    _copy_row_vectors(src, dst, assumed).launch(grid=(cute.size(src, mode=[0]), 1, 1), block=(1, 1, 1))


def test_assume_lets_a_run_time_stride_keep_16_byte_vectors():
    """A run-time row stride says nothing about alignment, so a row's elements load one at a
    time; cute.assume(stride, divby=8) promises 16-byte rows of bf16 and the vector comes back."""
    src = cute.from_dlpack(torch.randn(64, 72).bfloat16()).mark_layout_dynamic()
    dst = torch.empty(64).bfloat16()
    plain = accesses(cute.compile(_copy_rows, src, dst, False).__ptx__)
    promised = accesses(cute.compile(_copy_rows, src, dst, True).__ptx__)
    assert "ld.global.v4.b32" not in plain and "ld.global.b16" in plain
    assert "ld.global.v4.b32" in promised and "st.global.v4.b32" in promised


def test_assume_checks_what_it_can():
    assert cute.assume(24, divby=8) == 24
    with pytest.raises(DSLError, match="not a multiple of 8") as err:
        cute.assume(20, divby=8)
    assert err.value.user_location.file == __file__ and "cute.assume(20" in err.value.source_line
    with pytest.raises(DSLError, match="positive Python int"):
        cute.assume(24, divby=0)
