"""Compile tier: layout math with run-time parts reaches the IR as `cute` dialect ops (the DSL
computes nothing about run-time values itself), each op the DSL emits is here once, and bad
input is a DSLError at the user's line. Static layouts stay Python ints (computed in C++).
The GPU tier (test_layout_kernels.py) checks the values these ops compute."""

import re

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError


def traced(kernel, *args) -> str:
    """The MLIR of a one-block launch of `kernel` on `args` (dynamic layouts for TensorArgs)."""
    host = cute.jit(lambda *a: kernel(*a).launch(grid=(1, 1, 1), block=(128, 1, 1)), preprocess=False)
    return cute.compile(host, *args).__mlir__


def ops(mlir: str) -> list[str]:
    return re.findall(r"cute\.\w+", mlir)


def dynamic(*shape):
    return cute.from_dlpack(torch.randn(*shape)).mark_layout_dynamic()


@cute.kernel
def _index(x: cute.Tensor, out: cute.Tensor):
    i = cute.arch.thread_idx()[0]
    out[i, 3] = x[i, i]


def test_indexing_a_dynamic_tensor_is_crd2idx_on_make_layout():
    mlir = traced(_index, dynamic(64, 32), dynamic(64, 32))
    made = r'cute\.make_layout\(%\w+, %\w+, %\w+\) : \(i32, i32, i32\) -> !cute\.layout<"\(\?,\?\):\(\?,1\)">'
    assert re.search(made, mlir)
    assert 'coord = "(?,?)"' in mlir and 'coord = "(?,3)"' in mlir


def test_static_layouts_are_types_not_values():
    # A run-time coordinate still needs crd2idx, over a cute.static_layout: no make_layout.
    x = torch.randn(64, 32)
    assert set(ops(traced(_index, x, x))) == {"cute.static_layout", "cute.layout", "cute.crd2idx"}


@cute.kernel
def _measures(x: cute.Tensor, out: cute.Tensor):
    out[0, 0] = cute.Float32(cute.size(x)) + cute.Float32(cute.cosize(x))


def test_size_and_cosize_of_run_time_shapes():
    mlir = traced(_measures, dynamic(64, 32), torch.randn(2, 2))
    assert "cute.size" in mlir and "cute.cosize" in mlir


@cute.kernel
def _tiles(x: cute.Tensor, out: cute.Tensor):
    tiles = cute.zipped_divide(x, (16, 8))  # ((16,8),(ceil(m/16),ceil(n/8))) with run-time rests
    t = cute.arch.thread_idx()[0]
    out[t, 0] = cute.Float32(cute.size(tiles, mode=[1]))
    out[t, 1] = tiles[(t % 16, t // 16), (1, 2)]


def test_dividing_a_dynamic_tensor_is_an_op_whose_leaves_are_read_with_get_leaf():
    mlir = traced(_tiles, dynamic(100, 50), torch.randn(128, 2))
    assert re.search(r'cute\.zipped_divide %\w+, %\w+ \{by_mode\} : !cute\.layout<"\(\?,\?\):\(\?,1\)">, '
                     r'!cute\.layout<"\(16,8\):\(1,1\)">', mlir)
    assert "cute.get_leaf" in mlir


@cute.kernel
def _swizzled(x: cute.Tensor, out: cute.Tensor):
    t = cute.arch.thread_idx()[0]
    out[t] = cute.make_swizzle(3, 2, 3)(t)


def test_swizzling_a_run_time_offset_is_an_op():
    mlir = traced(_swizzled, torch.randn(8), torch.zeros(128, dtype=torch.int32))
    assert "cute.swizzle %" in mlir and "swizzle = array<i64: 3, 2, 3>" in mlir


@cute.kernel
def _slice(x: cute.Tensor, out: cute.Tensor):
    t = cute.arch.thread_idx()[0]
    row = x[(t, None)]  # a hole: the kept mode is picked structurally, the offset is crd2idx
    out[t] = row[5]


def test_slicing_with_a_run_time_coordinate_is_crd2idx_with_a_hole():
    assert 'coord = "(?,_)"' in traced(_slice, dynamic(128, 16), torch.zeros(128))


@cute.kernel
def _partition(x: cute.Tensor, out: cute.Tensor):
    t = cute.arch.thread_idx()[0]
    mine = cute.local_partition(x, cute.make_layout((4, 32), stride=(32, 1)), t)
    out[t] = mine[0, 0]


def test_local_partition_of_a_thread_index_is_crd2idx():
    # Thread t of a row-major (4,32) grid sits at ((t/32)%4, t%32): crd2idx into (d, s, 1):(0,1,0).
    mlir = traced(_partition, torch.randn(64, 64), torch.zeros(128))
    assert '!cute.layout<"(32,4,1):(0,1,0)">' in mlir and '!cute.layout<"(1,32,1):(0,1,0)">' in mlir


def test_idx2crd_of_a_static_index_is_python_ints():
    assert cute.idx2crd(13, (4, (2, 3))) == (1, (1, 1))


@cute.kernel
def _float_index(x: cute.Tensor):
    x[cute.Float32(1.0)] = 0.0


@cute.kernel
def _misfit(x: cute.Tensor):
    x[0, 1, 2] = 0.0


@cute.kernel
def _strided_tile(x: cute.Tensor):
    cute.zipped_divide(x, (cute.make_layout(4, stride=2),))


@pytest.mark.parametrize("kernel, code, message", [
    (_float_index, "CUTE-E114", "layout coordinates and extents must be integers, got Float32"),
    (_misfit, "CUTE-E110", "coordinate (0,1,2) does not fit the shape (?)"),
    (_strided_tile, "CUTE-E116", "zipped_divide: mode 0 of (?):(1) has run-time leaves; it can only be divided by a "
                                 "contiguous tile n:1, got 4:2"),
])
def test_bad_layout_math_is_an_error_at_the_users_line(kernel, code, message):
    with pytest.raises(DSLError) as err:
        traced(kernel, dynamic(64))
    assert err.value.code == code and message in str(err.value)
    assert "test_layout_ops.py" in str(err.value)


@pytest.mark.parametrize("name, expected", [
    # A row-major (m, n) tensor marked dynamic is (?,?):(?,1).
    ("logical_divide", "((16,?),(8,?)):((?,?),(1,8))"),
    ("zipped_divide", "((16,8),(?,?)):((?,1),(?,8))"),
    ("tiled_divide", "((16,8),?,?):((?,1),?,8)"),
    ("flat_divide", "(16,8,?,?):(?,1,?,8)"),
])
def test_each_divide_of_a_dynamic_layout_is_an_op_with_the_static_structure(name, expected):
    seen = {}

    @cute.kernel
    def divide(x: cute.Tensor):
        seen["layout"] = str(getattr(cute, name)(x, (16, 8)).layout)

    mlir = traced(divide, dynamic(100, 50))
    assert f"cute.{name} %" in mlir and seen["layout"] == expected


@cute.kernel
def _origin(x: cute.Tensor, out: cute.Tensor):
    t = cute.arch.thread_idx()[0]
    moved = cute.domain_offset((t, 2), x)
    out[t] = moved[1, 1]
    cute.printf(f"{moved.type}")


def test_domain_offset_moves_the_origin_and_type_names_the_tensor():
    mlir = traced(_origin, dynamic(64, 32), torch.zeros(128))
    assert 'coord = "(?,2)"' in mlir
    assert "tensor<gmem Float32 align 16 o (?,?):(?,1)>" in mlir


@cute.kernel
def _predicated_tail(x: cute.Tensor, out: cute.Tensor):
    # The CuTe way to guard a tail tile: tile a coordinate tensor like the data, compare.
    bx, by, _ = cute.arch.block_idx()
    t = cute.arch.thread_idx()[0]
    threads = cute.make_layout((4, 32), stride=(32, 1))
    coords = cute.local_partition(cute.local_tile(cute.make_identity_tensor(x.shape), (16, 32), (bx, by)), threads, t)
    src = cute.local_partition(cute.local_tile(x, (16, 32), (bx, by)), threads, t)
    dst = cute.local_partition(cute.local_tile(out, (16, 32), (bx, by)), threads, t)
    for i in cute.range_constexpr(4):
        if cute.elem_less(coords[i, 0], x.shape):
            dst[i, 0] = src[i, 0]


def test_identity_tensors_tile_and_partition_like_data():
    c = cute.make_identity_tensor((100, 50))
    tile = cute.local_tile(c, (16, 8), (2, 3))
    assert tile[0, 0] == (32, 24) and tile[15, 7] == (47, 31)
    part = cute.local_partition(tile, cute.make_layout((4, 8), stride=(8, 1)), 9)
    assert part[0, 0] == (33, 25) and part[3, 0] == (45, 25)
    assert cute.elem_less((99, 49), (100, 50)) is True and cute.elem_less((100, 3), (100, 50)) is False
    mlir = traced(_predicated_tail, dynamic(100, 50), dynamic(100, 50))
    assert mlir.count("arith.cmpi slt") >= 8 and "scf.if" in mlir


@pytest.mark.parametrize("by_mma", [True, False], ids=["mma", "tiled_copy"])
def test_packed_coordinates_are_computed_in_64_bits(by_mma):
    """A coordinate tensor packs (row, column) as row + column * 2**31: a thread's partition
    offset computed in 32 bits would drop the column (the GPU tier checks the values)."""
    from test_layout_kernels import _thread_coordinates_host
    args = [cute.from_dlpack(torch.zeros(128, 66 * 1024, dtype=torch.int32)).mark_layout_dynamic() for _ in range(2)]
    mlir = cute.compile(_thread_coordinates_host, *args, by_mma).__mlir__
    strides = [(line, re.search(r'!cute.layout<"[^:]*:([^"]*)">', line).group(1))
               for line in mlir.splitlines() if "cute.crd2idx" in line]
    wide = [line for line, s in strides if max(int(x) for x in re.findall(r"\d+", s)) >= 1 << 31]
    assert wide and all(line.rstrip().endswith("-> i64") for line in wide), wide


def test_an_identity_tensor_holds_no_memory():
    @cute.kernel
    def write(x: cute.Tensor):
        cute.make_identity_tensor(x.shape)[0, 0] = 1

    @cute.kernel
    def store(x: cute.Tensor):
        cute.make_identity_tensor(x.shape).store(1)

    for kernel in (write, store):
        with pytest.raises(DSLError, match="an identity tensor holds coordinates"):
            traced(kernel, dynamic(4, 4))
