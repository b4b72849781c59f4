"""The layout algebra, as Python users call it, against NVIDIA's reference implementation
`pycute` (pure Python, shipped in the `nvidia-cutlass` wheel; a test dependency only).

On random layouts (nested shapes, compact and arbitrary strides, zero strides) our result must
equal pycute's exactly: the same shape and stride, hence the same function. Where ours refuses
an input pycute answers, pycute's answer must be invalid by CuTe's own definition (for example a
composition whose size is not size(B): pycute truncates where CuTe's C++ static_asserts the
divisibility condition), and our error names the rule (docs/layout.md, "When the algebra
refuses").
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError

R = pytest.importorskip("pycute")

EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- random layouts -----------------------------------------------------------------------------------

@st.composite
def shapes(draw, depth=0):
    if depth < 2 and draw(st.booleans()) and draw(st.booleans()):
        return tuple(draw(shapes(depth + 1)) for _ in range(draw(st.integers(1, 3))))
    return draw(st.integers(1, 6))


def _rebuild(template, values):
    it = iter(values)

    def walk(t):
        return tuple(walk(e) for e in t) if isinstance(t, tuple) else next(it)
    return walk(template)


@st.composite
def layouts(draw, compact=None):
    """(shape, stride): compact strides in a random mode order, or arbitrary ones (zeros too)."""
    shape = draw(shapes())
    if isinstance(shape, int) and draw(st.booleans()):
        shape = (shape,)
    flat = R.flatten(shape) if isinstance(shape, tuple) else (shape,)
    if compact is None:
        compact = draw(st.booleans())
    if compact:
        order = draw(st.permutations(range(len(flat))))
        strides, current = [0] * len(flat), 1
        for i in order:
            strides[i], current = current, current * flat[i]
    else:
        strides = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 6, 8, 12]), min_size=len(flat), max_size=len(flat)))
    stride = _rebuild(shape, strides) if isinstance(shape, tuple) else strides[0]
    return shape, stride


def ours(shape, stride):
    return cute.make_layout(shape, stride=stride)


def ref(shape, stride):
    return R.Layout(shape, stride)


def pair(layout):
    return layout.shape, layout.stride


def same(our_layout, ref_layout):
    assert pair(our_layout) == pair(ref_layout), f"ours {our_layout}, pycute {ref_layout}"


def refused_validly(our_call, ref_result, expected_size, function):
    """Ours raised: pycute's answer must break CuTe's definition (size or values), and our error
    must name the divisibility rule."""
    with pytest.raises(DSLError) as err:
        our_call()
    assert err.value.code == "CUTE-E116" and "not divisible" in str(err.value)
    valid = R.size(ref_result) == expected_size and all(ref_result(i) == function(i) for i in range(expected_size))
    assert not valid, f"pycute's {ref_result} is a valid answer that we refused ({err.value})"


# -- unary operations ---------------------------------------------------------------------------------

@EXAMPLES
@given(layouts())
def test_coalesce(a):
    same(cute.coalesce(ours(*a)), R.coalesce(ref(*a)))


@EXAMPLES
@given(layouts(), st.data())
def test_coalesce_by_mode(a, data):
    if not isinstance(a[0], tuple):
        return
    profile = tuple(1 for _ in a[0])
    same(cute.coalesce(ours(*a), profile), R.coalesce(ref(*a), profile))


@EXAMPLES
@given(layouts(compact=True), st.integers(1, 3), st.booleans())
def test_complement(a, factor, with_cotarget):
    cotarget = R.cosize(ref(*a)) * factor
    if with_cotarget:
        same(cute.complement(ours(*a), cotarget), R.complement(ref(*a), cotarget))
    else:
        same(cute.complement(ours(*a)), R.complement(ref(*a)))


@EXAMPLES
@given(layouts(compact=True))
def test_right_and_left_inverse(a):
    same(cute.right_inverse(ours(*a)), R.right_inverse(ref(*a)))
    same(cute.left_inverse(ours(*a)), R.left_inverse(ref(*a)))


@EXAMPLES
@given(layouts(compact=False))
def test_right_inverse_of_arbitrary_strides(a):
    """pycute flattens where CuTe's C++ coalesces first, and stops at the first stride-0 mode:
    on non-injective layouts ours (CuTe's C++ algorithm) may differ, but it is a right inverse
    at least as long as pycute's."""
    A, RA = ours(*a), ref(*a)
    result, expected = cute.right_inverse(A), R.right_inverse(RA)
    assert all(A(result(i)) == i for i in range(cute.size(result)))
    assert cute.size(result) >= R.size(expected)


# -- composition, divides, products -----------------------------------------------------------------

@EXAMPLES
@given(layouts(), layouts(compact=True))
def test_composition(a, b):
    A, B, RA, RB = ours(*a), ours(*b), ref(*a), ref(*b)
    if R.cosize(RB) > R.size(RA):
        return  # B reaches outside A's domain: not a composition
    try:
        expected = R.composition(RA, RB)
    except AssertionError:  # pycute refuses (its divisibility assert): ours refuses, or is right
        try:
            result = cute.composition(A, B)
        except DSLError:
            return
        assert cute.size(result) == R.size(RB) and all(result(i) == RA(RB(i)) for i in range(R.size(RB)))
        return
    try:
        result = cute.composition(A, B)
    except DSLError:
        refused_validly(lambda: cute.composition(A, B), expected, R.size(RB), lambda i: RA(RB(i)))
        return
    same(result, expected)
    assert all(result(i) == RA(RB(i)) for i in range(R.size(RB)))


@EXAMPLES
@given(layouts(), st.integers(1, 4), st.sampled_from([1, 2]),
       st.sampled_from(["logical_divide", "zipped_divide", "tiled_divide"]))
def test_divides_by_a_layout(a, tile, step, name):
    A, T = ours(*a), cute.make_layout(tile, stride=step)
    try:
        expected = getattr(R, name)(ref(*a), R.Layout(tile, step))
    except (AssertionError, ZeroDivisionError):
        with pytest.raises(DSLError):
            getattr(cute, name)(A, T)
        return
    same(getattr(cute, name)(A, T), expected)


@EXAMPLES
@given(layouts(), st.data(), st.sampled_from(["logical_divide", "zipped_divide", "tiled_divide"]))
def test_divides_by_mode(a, data, name):
    if not isinstance(a[0], tuple):
        return
    tiler = []
    for mode in a[0]:
        extent = R.product(mode)
        divisors = [d for d in range(1, extent + 1) if extent % d == 0]
        tiler.append(data.draw(st.sampled_from(divisors)))
    A, ours_tiler = ours(*a), tuple(cute.make_layout(t, stride=1) for t in tiler)
    try:
        expected = getattr(R, name)(ref(*a), tuple(R.Layout(t, 1) for t in tiler))
    except AssertionError:  # pycute's divisibility assert: ours refuses too
        with pytest.raises(DSLError, match="not divisible|does not divide"):
            getattr(cute, name)(A, ours_tiler)
        return
    same(getattr(cute, name)(A, ours_tiler), expected)


@EXAMPLES
@given(layouts(compact=True), layouts(compact=True),
       st.sampled_from(["logical_product", "zipped_product", "tiled_product"]))
def test_products(a, b, name):
    A, B, RA, RB = ours(*a), ours(*b), ref(*a), ref(*b)
    expected = getattr(R, name)(RA, RB)
    try:
        result = getattr(cute, name)(A, B)
    except DSLError:
        # A valid product has size(A) * size(B) elements.
        with pytest.raises(DSLError) as err:
            getattr(cute, name)(A, B)
        assert "not divisible" in str(err.value)
        assert R.size(expected) != R.size(RA) * R.size(RB), f"pycute's {expected} looks valid"
        return
    same(result, expected)


# -- coordinates and slicing -----------------------------------------------------------------------

@EXAMPLES
@given(layouts(), st.data())
def test_crd2idx_and_idx2crd(a, data):
    A, RA = ours(*a), ref(*a)
    index = data.draw(st.integers(0, R.size(RA) - 1))
    assert A(index) == RA(index)
    coord = R.idx2crd(index, a[0])
    assert cute.idx2crd(index, a[0]) == coord
    assert A(coord) == RA(coord) == R.crd2idx(coord, *a)


@st.composite
def slice_coords(draw, shape):
    """A coordinate congruent to `shape` with holes (None) at random modes."""
    if isinstance(shape, tuple):
        if draw(st.booleans()):
            return None
        return tuple(draw(slice_coords(s)) for s in shape)
    return None if draw(st.booleans()) else draw(st.integers(0, shape - 1))


@EXAMPLES
@given(layouts(), st.data())
def test_slice(a, data):
    if not isinstance(a[0], tuple):
        return
    coord = data.draw(slice_coords(a[0]))
    if coord is None or not R.has_none(coord):
        return
    kept, offset = cute.dsl.layout.slice_and_offset(coord, ours(*a))
    ref_kept, ref_offset = R.slice_and_offset(coord, ref(*a))
    assert offset == ref_offset
    # pycute flattens the kept modes into one tuple (C++'s tuple_cat); ours keeps them as modes:
    # the same layout as a function, mode for mode once flattened.
    assert R.flatten(kept.shape) == R.flatten(ref_kept.shape)
    assert R.flatten(kept.stride) == R.flatten(ref_kept.stride)
