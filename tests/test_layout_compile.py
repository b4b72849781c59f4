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
