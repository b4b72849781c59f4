"""The layout algebra from Python: CuTe's documented examples, and hypothesis properties over
random layouts (the C++ library computes, Python checks point by point)."""

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError


def L(shape, stride):
    return cute.make_layout(shape, stride=stride)


def image(layout):
    return [layout(i) for i in range(cute.size(layout))]


# -- documented examples, reproduced exactly -------------------------------------------------------

def test_documented_examples():
    assert str(cute.coalesce(L((2, (1, 6)), (1, (6, 2))))) == "12:1"
    assert str(cute.composition(L(20, 2), L((5, 4), (4, 1)))) == "(5,4):(8,2)"
    assert str(cute.composition(L((10, 2), (16, 4)), L((5, 4), (1, 5)))) == "(5,(2,2)):(16,(80,4))"
    assert str(cute.complement(L(4, 2), 24)) == "(2,3):(1,8)"
    assert str(cute.complement(L((2, 2), (1, 6)), 24)) == "(3,2):(2,12)"
    assert str(cute.logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2))) == "((2,2),(2,3)):((4,1),(2,8))"
    a = L((9, (4, 8)), (59, (13, 1)))
    tiler = (L(3, 3), L((2, 4), (1, 8)))
    assert str(cute.zipped_divide(a, tiler)) == "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"
    assert str(cute.logical_product(L((2, 2), (4, 1)), L(6, 1))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(cute.raked_product(L((2, 5), (5, 1)), L((3, 4), (1, 3)))) == "((3,2),(4,5)):((10,5),(30,1))"


def test_printing_and_eager_use_outside_jit(capsys):
    layout = L((4, 8), (8, 1))
    assert str(layout) == "(4,8):(8,1)"
    assert layout((3, 5)) == 29 and layout(5) == 9
    cute.print_layout(L((2, 3), (3, 1)))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "(2,3):(3,1)"
    assert out[2].split() == ["0", "0", "1", "2"] and out[3].split() == ["1", "3", "4", "5"]
    sw = cute.make_composed_layout(cute.make_swizzle(3, 4, 3), 0, L((8, 64), (64, 1)))
    assert str(sw) == "Sw<3,4,3> o 0 o (8,64):(64,1)"
    assert sw((1, 0)) == 64 and sw((2, 0)) == 128 ^ 16


def test_make_layout_tv_gives_each_thread_its_block():
    tiler, tv = cute.make_layout_tv(L((4, 32), (32, 1)), L((4, 4), (4, 1)))
    assert tiler == (16, 128)
    tile = cute.make_layout(tiler)
    owned = sorted(tv((t, v)) for t in range(128) for v in range(16))
    assert owned == list(range(16 * 128))  # every element of the tile exactly once
    # Thread 5's first four values are one row, four adjacent columns.
    coords = [cute.idx2crd(tv((5, v)), tiler) for v in range(4)]
    assert [c[0] for c in coords] == [0] * 4 and [c[1] for c in coords] == [20, 21, 22, 23]
    # The compact tile layout turns those coordinates back into the tv layout's offsets.
    assert all(tile(cute.idx2crd(tv((t, v)), tiler)) == tv((t, v)) for t in range(0, 128, 7) for v in range(16))


def test_errors_name_the_operation_and_the_problem():
    with pytest.raises(DSLError) as err:
        cute.complement(L((2, 2), (1, 3)), 24)
    assert err.value.code == "CUTE-E116" and "not injective" in str(err.value)
    with pytest.raises(DSLError) as err:
        cute.composition(L((2, 60), (4, 16)), L(5, 1))
    assert "extent 5 is not divisible by 2" in str(err.value)


# -- properties ----------------------------------------------------------------------------------------

extents = st.lists(st.integers(1, 6), min_size=1, max_size=4)


@st.composite
def injective_layouts(draw):
    shape = draw(extents)
    order = draw(st.permutations(range(len(shape))))
    gaps = draw(st.lists(st.integers(1, 2), min_size=len(shape), max_size=len(shape)))
    stride, current = [0] * len(shape), 1
    for i, gap in zip(order, gaps):
        current *= gap
        stride[i] = current
        current *= shape[i]
    if len(shape) == 1:
        return L(shape[0], stride[0])
    return L(tuple(shape), tuple(stride))


@st.composite
def any_layouts(draw):
    shape = draw(extents)
    stride = draw(st.lists(st.integers(0, 9), min_size=len(shape), max_size=len(shape)))
    return L(tuple(shape), tuple(stride)) if len(shape) > 1 else L(shape[0], stride[0])


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(any_layouts())
def test_coalesce_keeps_the_mapping(layout):
    merged = cute.coalesce(layout)
    assert cute.size(merged) == cute.size(layout)
    assert image(merged) == image(layout)
    assert set(image(cute.filter(layout))) == set(image(layout))


@SETTINGS
@given(any_layouts(), injective_layouts())
def test_composition_is_function_composition(a, b):
    assume(cute.cosize(b) <= cute.size(a))
    try:
        c = cute.composition(a, b)
    except DSLError:
        assume(False)  # incompatible shapes are outside the domain
    assert [c(i) for i in range(cute.size(b))] == [a(b(i)) for i in range(cute.size(b))]


@SETTINGS
@given(injective_layouts(), st.integers(1, 3))
def test_complement_is_disjoint_ordered_and_covering(layout, factor):
    cotarget = cute.cosize(layout) * factor
    rest = cute.complement(layout, cotarget)
    mine, theirs = set(image(layout)), image(rest)
    assert all(x not in mine for x in theirs[1:])
    assert theirs == sorted(set(theirs))
    both = cute.make_layout((layout.shape, rest.shape), stride=(layout.stride, rest.stride))
    covered = image(both)
    assert len(set(covered)) == len(covered) and set(range(cotarget)) <= set(covered)


@SETTINGS
@given(injective_layouts())
def test_inverses(layout):
    right = cute.right_inverse(layout)
    assert all(layout(right(i)) == i for i in range(cute.size(right)))
    left = cute.left_inverse(layout)
    assert all(left(layout(i)) == i for i in range(cute.size(layout)))


@SETTINGS
@given(injective_layouts(), st.data())
def test_divide_and_product_identities(a, data):
    n = cute.size(a)
    tile = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    try:
        divided = cute.logical_divide(a, cute.make_layout(tile))
    except DSLError:
        assume(False)
    assert cute.size(divided) == n and cute.size(divided[0]) == tile
    assert sorted(image(divided)) == sorted(image(a))
    b = data.draw(injective_layouts())
    assume(n * cute.cosize(b) <= 4096)
    try:
        product = cute.logical_product(a, b)
    except DSLError:
        assume(False)
    assert str(product[0]) == str(a)
    assert len(set(image(product))) == n * cute.size(b)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2), st.integers(0, 2), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_local_tile_and_local_partition_cover_every_element_once(log_tm, log_tn, rm, rn, row_major):
    """Every tile of a matrix, and every thread's partition, together reach each offset exactly
    once. A Sw<0,0,0> composed layout carries the offset that slicing accumulates."""
    tm, tn = 1 << log_tm, 1 << log_tn
    m, n = tm * rm, tn * rn
    matrix = L((m, n), (n, 1) if row_major else (1, m))
    carried = cute.make_composed_layout(cute.make_swizzle(0, 0, 0), 0, matrix)
    everything = sorted(image(matrix))
    seen = []
    for i in range(m // tm):
        for j in range(n // tn):
            tile = cute.local_tile(carried, (tm, tn), (i, j))
            assert cute.size(tile) == tm * tn
            seen += [tile(k) for k in range(tm * tn)]
    assert sorted(seen) == everything
    threads = L((tm, tn), (tn, 1))
    seen = []
    for t in range(tm * tn):
        part = cute.local_partition(carried, threads, t)
        assert cute.size(part) == m * n // (tm * tn)
        seen += [part(k) for k in range(cute.size(part))]
    assert sorted(seen) == everything


def test_layout_helpers_pipelined_kernels_use():
    layout = L((4, (2, 3), 5), (1, (4, 8), 24))
    assert str(cute.group_modes(layout, 1, 3)) == "(4,((2,3),5)):(1,((4,8),24))"
    assert str(cute.group_modes(layout, 0, 2)) == "((4,(2,3)),5):((1,(4,8)),24)"
    assert layout.get_hier_coord(13) == (1, (1, 1), 0) and layout.get_flat_coord(13) == (1, 1, 1, 0)
    assert layout(layout.get_hier_coord(77)) == layout(77)
    assert cute.ceil_div(7, 2) == 4 and cute.ceil_div((100, 50), (16, 8)) == (7, 7)
    assert cute.size_in_bytes(cute.Float16, L((64, 32), (32, 1))) == 64 * 32 * 2
    with pytest.raises(DSLError, match="group_modes: modes \\[2, 5\\)"):
        cute.group_modes(layout, 2, 5)


def test_star_import_exports_every_listed_name():
    namespace = {}
    exec("from cute_torch import *", namespace)  # noqa: S102 - what a user's star import sees
    assert {"crd2idx", "group_modes", "ceil_div", "size_in_bytes", "domain_offset"} <= set(namespace)
