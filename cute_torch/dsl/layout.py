"""CuTe layouts in Python, eager or inside jit functions.

A `Layout` is a shape and a congruent stride: nested tuples whose leaves are Python ints
(compile-time) or DSL integers (run-time values, inside jit functions). Python only builds:
every static computation of the algebra runs in the C++ library (`cute_torch._C.layout`), the
same code the dialect uses to infer types, so it works in plain Python too
(`print(cute.composition(a, b))`); everything that involves a run-time value is emitted as a
`cute` dialect op by layout_ops.py and computed by the C++ passes.
"""

from __future__ import annotations

import math as _math
from typing import Sequence

from .._C import layout as _alg
from . import layout_ops as ops
from .diagnostics import ARGUMENT_MISMATCH, LAYOUT_ALGEBRA, DSLError, user_location
from .int_tuple import IntTuple, is_static, is_tuple, leaves, rebuild, spell  # noqa: F401 - re-exported
from .layout_ops import add_offsets
from .numeric import known_divisor


def crd2idx(coord, shape: IntTuple, stride: IntTuple):
    """CuTe's crd2idx: a tuple coordinate maps mode by mode; an integer coordinate into a tuple
    shape is split colexicographically (first mode fastest)."""
    return ops.crd2idx(coord, shape, stride)


def idx2crd(index, shape: IntTuple):
    """The natural (colexicographic) coordinate of a linear index in a shape: C++ when static;
    for a run-time index each leaf is the crd2idx of the index into (prefix, extent, 1):(0,1,0),
    that is (index / prefix) % extent, the last leaf taking the rest."""
    if isinstance(index, int) and is_static(shape):
        return _alg.idx2crd(index, shape)
    flat = leaves(shape)
    coords, prefix = [], 1
    for i, extent in enumerate(flat):
        last = i == len(flat) - 1
        coords.append(ops.crd2idx(index, (prefix, 1), (0, 1)) if last else
                      ops.crd2idx(index, (prefix, extent, 1), (0, 1, 0)))
        prefix = prefix * extent if isinstance(prefix, int) and isinstance(extent, int) else ops.size((prefix, extent))
    return rebuild(shape, coords) if is_tuple(shape) else coords[0]


def compact_col_major(shape: IntTuple) -> IntTuple:
    """Column-major strides (extent-1 modes get stride 0, as in CuTe)."""
    return ops.compact_col_major(shape)


# -- layouts ----------------------------------------------------------------------------------------

class Layout:
    """`shape:stride`, printed in CuTe's notation, e.g. `(4,8):(1,4)`. Callable on coordinates."""

    __slots__ = ("shape", "stride", "_hash")

    def __init__(self, shape: IntTuple, stride: IntTuple):
        self.shape, self.stride = shape, stride
        self._hash = None

    def __call__(self, *coord):
        return crd2idx(coord[0] if len(coord) == 1 else coord, self.shape, self.stride)

    def __str__(self) -> str:
        return f"{spell(self.shape)}:{spell(self.stride)}"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and self.is_static and other.is_static and str(self) == str(other)

    def __hash__(self) -> int:
        # Layouts are specialization keys (Constexpr arguments), hashed on every call: spell once.
        if self._hash is None:
            self._hash = hash(str(self))
        return self._hash

    def __getitem__(self, mode: int) -> "Layout":
        """Mode `mode` as a layout (CuTe's layout<i>)."""
        if not is_tuple(self.shape):
            if mode != 0:
                raise IndexError(f"mode {mode} of the rank-1 layout {self}")
            return self
        return Layout(self.shape[mode], self.stride[mode])

    def __len__(self) -> int:
        return rank(self)

    def __iter__(self):
        return iter(self[i] for i in range(rank(self)))

    @property
    def is_static(self) -> bool:
        return is_static(self.shape) and is_static(self.stride)

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    def size(self):
        return ops.size(self.shape)

    def cosize(self):
        return ops.cosize(self.shape, self.stride)

    def _pair(self) -> tuple:
        return (self.shape, self.stride)

    def get_hier_coord(self, index):
        """The natural coordinate of a linear index, shaped like the shape (CuTe's name)."""
        return idx2crd(index, self.shape)

    def get_flat_coord(self, index) -> tuple:
        """The natural coordinate of a linear index, one entry per leaf of the shape."""
        return tuple(leaves(idx2crd(index, self.shape)))


def _from_pair(pair) -> Layout:
    return Layout(pair[0], pair[1])


def make_layout(shape: IntTuple, *, stride: IntTuple | None = None) -> Layout:
    """A layout; without `stride`, compact column-major (CuTe's default)."""
    shape = _as_shape(shape)
    return Layout(shape, compact_col_major(shape) if stride is None else _as_shape(stride))


def _as_shape(x):
    return tuple(_as_shape(e) for e in x) if isinstance(x, (tuple, list)) else x


def make_ordered_layout(shape: IntTuple, order: IntTuple) -> Layout:
    """Compact strides assigned in increasing `order` (order 0 fastest)."""
    return _call("make_ordered_layout", _as_shape(shape), _as_shape(order))


def make_identity_layout(shape: IntTuple) -> Layout:
    """The compact layout whose offsets decode (idx2crd) back into coordinates of `shape`."""
    return make_layout(shape)


def make_layout_tv(thr_layout: Layout, val_layout: Layout) -> tuple:
    """CuTe DSL's thread-value partition: each thread owns a `val_layout` block, the blocks laid
    out by `thr_layout`. Returns (tiler_mn, tv_layout) where tv_layout maps (thread, value) to a
    coordinate of the (tiler_mn) tile."""
    layout_mn = raked_product(thr_layout, val_layout)
    tv = composition(right_inverse(layout_mn), make_layout((size(thr_layout), size(val_layout))))
    tiler = tuple(size(layout_mn[i]) for i in range(rank(layout_mn)))
    return tiler, tv


# -- structure ----------------------------------------------------------------------------------------

def _layout_of(x) -> "Layout | ComposedLayout":
    from .tensor import Tensor  # tensors answer with their layouts
    if isinstance(x, Tensor):
        return x.layout
    if isinstance(x, (Layout, ComposedLayout)):
        return x
    return make_layout(x)


def _shape_of(x):
    from .tensor import Tensor
    if isinstance(x, Tensor):
        return x.shape
    if isinstance(x, (Layout, ComposedLayout)):
        return x.shape
    return x


def _select(x, mode):
    for m in ([mode] if isinstance(mode, int) else mode or []):
        x = x[m]
    return x


def size(x, mode: Sequence[int] | int | None = None):
    """The number of elements of a tensor, layout or shape (a Python int when static)."""
    return ops.size(_select(_shape_of(x), mode))


def rank(x, mode=None) -> int:
    shape = _select(_shape_of(x), mode)
    return len(shape) if is_tuple(shape) else 1


def depth(x, mode=None) -> int:
    def d(s):
        return 1 + max((d(e) for e in s), default=0) if is_tuple(s) else 0
    return d(_select(_shape_of(x), mode))


def shape(x, mode=None):
    return _select(_shape_of(x), mode)


def cosize(x, mode=None):
    layout = _layout_of(x)
    if mode is not None:
        layout = _select(layout, mode)
    return layout.cosize()


def get(x, mode):
    return _select(x, mode)


def group_modes(x, begin: int, end: int | None = None):
    """Modes [begin, end) of a layout or tensor grouped into one mode (CuTe's group_modes)."""
    from .tensor import Tensor
    if isinstance(x, Tensor):
        return x.with_layout(group_modes(x.layout, begin, end))
    if isinstance(x, ComposedLayout):
        return ComposedLayout(x.inner, x.offset, group_modes(x.outer, begin, end))
    modes = list(x) if is_tuple(x.shape) else [x]
    end = len(modes) if end is None else end
    if not 0 <= begin <= end <= len(modes):
        _fail("group_modes", f"modes [{begin}, {end}) of the rank-{len(modes)} layout {x}")
    grouped = modes[:begin] + [Layout(tuple(m.shape for m in modes[begin:end]),
                                      tuple(m.stride for m in modes[begin:end]))] + modes[end:]
    return Layout(tuple(m.shape for m in grouped), tuple(m.stride for m in grouped))


def ceil_div(a, b):
    """ceil(a / b) for ints and DSL integers, mode by mode for tuples (a shape over a tiler)."""
    if is_tuple(a) or is_tuple(b):
        bs = b if is_tuple(b) else (b,) * len(a)
        return tuple(ceil_div(x, y) for x, y in zip(a, bs)) + tuple(a[len(bs):])
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + (b - 1)) // b


def size_in_bytes(dtype, layout) -> int:
    """The bytes `layout`'s elements of `dtype` span (cosize times the element size)."""
    return cosize(layout) * dtype.width // 8


def select(layout: Layout, mode: Sequence[int]) -> Layout:
    return Layout(tuple(layout.shape[m] for m in mode), tuple(layout.stride[m] for m in mode))


def flatten(x):
    if isinstance(x, Layout):
        if not is_tuple(x.shape):
            return x
        return Layout(tuple(leaves(x.shape)), tuple(leaves(x.stride)))
    return tuple(leaves(x)) if is_tuple(x) else x


def append(layout: Layout, mode: Layout) -> Layout:
    modes = list(layout) if is_tuple(layout.shape) else [layout]
    modes.append(mode)
    return Layout(tuple(m.shape for m in modes), tuple(m.stride for m in modes))


def prepend(layout: Layout, mode: Layout) -> Layout:
    modes = list(layout) if is_tuple(layout.shape) else [layout]
    return Layout((mode.shape,) + tuple(m.shape for m in modes), (mode.stride,) + tuple(m.stride for m in modes))


def slice_(x, coord):
    """The sub-layout (or sub-tensor) of the modes where `coord` is None (CuTe's `_`)."""
    from .tensor import Tensor
    if isinstance(x, Tensor):
        return x[coord]
    kept, _ = slice_and_offset(coord, x)
    return kept


def slice_and_offset(coord, layout: Layout) -> tuple:
    """(kept layout, offset of the fixed coordinates). Works with run-time coordinates and
    leaves: the kept modes are picked structurally, the offset is crd2idx of the coordinate
    with its holes (one `cute.crd2idx` op when anything is a run-time value)."""
    if coord is None:
        return layout, 0
    shapes, strides = [], []
    _kept_modes(coord, layout.shape, layout.stride, shapes, strides)
    return Layout(tuple(shapes), tuple(strides)), crd2idx(coord, layout.shape, layout.stride)


def _kept_modes(coord, shape, stride, shapes, strides) -> None:
    if coord is None:
        shapes.append(shape)
        strides.append(stride)
        return
    if is_tuple(coord):
        if not is_tuple(shape) or len(coord) != len(shape):
            raise DSLError(ARGUMENT_MISMATCH, f"slice coordinate {spell(coord)} does not fit the shape {spell(shape)}",
                           user_location(), "give one entry (an index or None) per mode")
        for c, s, d in zip(coord, shape, stride):
            _kept_modes(c, s, d, shapes, strides)


# -- the algebra (static parts in C++) ----------------------------------------------------------------

def _fail(name: str, problem: str):
    raise DSLError(LAYOUT_ALGEBRA, f"{name}: {problem}", user_location(),
                   "check the shapes against CuTe's rules for this operation (docs/layout.md)")


def _static_pair(x, name: str) -> tuple:
    layout = _layout_of(x)
    if isinstance(layout, ComposedLayout):
        _fail(name, f"takes a plain layout, got the swizzled {layout}")
    if not layout.is_static:
        _fail(name, f"needs a static layout, but {layout} has run-time leaves ('?')")
    return layout._pair()


def _tiler(tiler, name: str) -> tuple:
    """(by_mode, [layout pairs]): a Layout applies to the whole layout, a tuple mode by mode
    (ints and shapes become compact layouts)."""
    if isinstance(tiler, Layout):
        return False, [_static_pair(tiler, name)]
    if isinstance(tiler, (tuple, list)):
        modes = []
        for t in tiler:
            modes.append(_static_pair(t if isinstance(t, Layout) else make_layout(t), name))
        return True, modes
    if isinstance(tiler, int):
        return True, [(tiler, 1)]
    _fail(name, f"a tiler is a Layout or a tuple of layouts/shapes, got {type(tiler).__name__}")


def _raw(name: str, *args):
    try:
        return getattr(_alg, name)(*args)
    except ValueError as problem:
        _fail(name, str(problem))


def _call(name: str, *args) -> Layout:
    return _from_pair(_raw(name, *args))


def coalesce(layout: Layout, target_profile=None) -> Layout:
    return _call("coalesce", _static_pair(layout, "coalesce"), target_profile)


def filter(layout: Layout) -> Layout:  # noqa: A001 - CuTe's name
    return _call("filter", _static_pair(layout, "filter"))


def filter_zeros(layout: Layout) -> Layout:
    return _call("filter_zeros", _static_pair(layout, "filter_zeros"))


def complement(layout: Layout, cotarget=None) -> Layout:
    if cotarget is not None and not isinstance(cotarget, int):
        cotarget = size(cotarget)
    return _call("complement", _static_pair(layout, "complement"), cotarget)


def right_inverse(layout: Layout) -> Layout:
    return _call("right_inverse", _static_pair(layout, "right_inverse"))


def left_inverse(layout: Layout) -> Layout:
    return _call("left_inverse", _static_pair(layout, "left_inverse"))


def composition(a, b):
    """(A o B)(c) = A(B(c)). A may be a tensor (its layout is composed) or a swizzled layout."""
    from .tensor import Tensor
    if isinstance(a, Tensor):
        return a.with_layout(composition(a.layout, b))
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.inner, a.offset, composition(a.outer, b))
    if isinstance(a, Layout) and not a.is_static and is_static(a.shape):
        return _compose_runtime_strides(a, b)
    return _call("composition", _static_pair(a, "composition"), *_tiler(b, "composition"))


def _compose_runtime_strides(a: Layout, b) -> Layout:
    """A o B for a static shape with run-time strides (a global-memory tile partitioned by an
    MMA's thread-value layout). CuTe's composition splits B along A's leaves, so each result
    stride is k times one leaf's stride. Compose a stand-in of the same shape whose leaf j has
    the static stride g_j = prod_{i<j} 2*s_i (no two leaves coalesce, and a stride names its
    leaf), then map each result stride k*g_j back to k*d_j (a crd2idx op when d_j is run-time)."""
    extents, strides = leaves(a.shape), leaves(a.stride)
    gaps, g = [], 1
    for s in extents:
        gaps.append(g)
        g *= 2 * s
    standin = composition(Layout(a.shape, rebuild(a.shape, list(gaps))), b)  # rebuild consumes its list

    def original(stride: int):
        if stride == 0:
            return 0
        for j, (gap, s, d) in enumerate(zip(gaps, extents, strides)):
            last = j == len(gaps) - 1
            if stride % gap == 0 and gap <= stride and (last or stride < gap * s):
                k = stride // gap
                return k * d if isinstance(d, int) else ops.crd2idx(k, k + 1, d)
        _fail("composition", f"{a} o {b}: a result stride {stride} of the stand-in falls between leaves")

    result = [original(x) for x in leaves(standin.stride)]
    return Layout(standin.shape, rebuild(standin.stride, result))


def _divide(name: str):
    def divide(target, tiler):
        from .tensor import Tensor
        if isinstance(target, Tensor):
            return target.with_layout(divide(target.layout, tiler))
        if isinstance(target, ComposedLayout):
            return ComposedLayout(target.inner, target.offset, divide(target.outer, tiler))
        if not target.is_static:
            return _dynamic_divide(name, target, tiler)
        return _call(name, target._pair(), *_tiler(tiler, name))
    divide.__name__ = name
    divide.__doc__ = f"CuTe's {name} (see docs/layout.md)."
    return divide


logical_divide = _divide("logical_divide")
zipped_divide = _divide("zipped_divide")
tiled_divide = _divide("tiled_divide")
flat_divide = _divide("flat_divide")


def _dynamic_divide(name: str, layout: Layout, tiler) -> Layout:
    """A layout with run-time leaves divided mode by mode by static tiles; which divisions exist
    and how each result leaf is computed is csrc/layout/DynamicLayout.cpp's business (a tiled
    mode must be one extent:stride, its tile n:1), the run-time leaves come from the op."""
    if isinstance(tiler, Layout) or not isinstance(tiler, (tuple, list)):
        _fail(name, f"a layout with run-time leaves ({layout}) can only be divided mode by mode by a tuple of "
                    "tile sizes")
    tiles = [(t, 1) if isinstance(t, int) else _static_pair(t, name) for t in tiler]
    return Layout(*ops.divide(name, layout.shape, layout.stride, tiles))


def _product_op(name: str):
    def prod(a, b):
        return _call(name, _static_pair(a, name), *_tiler(b, name))
    prod.__name__ = name
    return prod


logical_product = _product_op("logical_product")
zipped_product = _product_op("zipped_product")
tiled_product = _product_op("tiled_product")
flat_product = _product_op("flat_product")


def blocked_product(a: Layout, b: Layout) -> Layout:
    return _call("blocked_product", _static_pair(a, "blocked_product"), _static_pair(b, "blocked_product"))


def raked_product(a: Layout, b: Layout) -> Layout:
    return _call("raked_product", _static_pair(a, "raked_product"), _static_pair(b, "raked_product"))


def tile_to_shape(block, target_shape, order=None):
    if isinstance(block, ComposedLayout):
        return ComposedLayout(block.inner, block.offset, tile_to_shape(block.outer, target_shape, order))
    return _call("tile_to_shape", _static_pair(block, "tile_to_shape"), _as_shape(target_shape),
                 None if order is None else _as_shape(order))


def recast_layout(new_bits: int, old_bits: int, layout: Layout) -> Layout:
    """The layout of the same memory with `new_bits`-wide elements instead of `old_bits`."""
    return _call("recast", _static_pair(layout, "recast_layout"), old_bits, new_bits)


def max_common_vector(a: Layout, b: Layout) -> int:
    return _raw("max_common_vector", _static_pair(a, "max_common_vector"), _static_pair(b, "max_common_vector"))


def max_common_layout(a: Layout, b: Layout) -> Layout:
    return _call("max_common_layout", _static_pair(a, "max_common_layout"), _static_pair(b, "max_common_layout"))


def shape_div(a, b):
    return _raw("shape_div", a, b)


# -- tiling and partitioning (run-time coordinates welcome) ---------------------------------------

def local_tile(x, tiler, coord, proj=None):
    """The tile of `x` at tile coordinate `coord` (CuTe's inner partition): zipped_divide by
    `tiler`, keep every tile mode, index the rest. `proj` (a tuple with None for modes to skip)
    drops modes from both tiler and coordinate, as CuTe's Step does."""
    if proj is not None:
        tiler = tuple(t for t, p in zip(tiler, proj) if p is not None)
        coord = tuple(c for c, p in zip(coord, proj) if p is not None) if is_tuple(coord) else coord
    divided = zipped_divide(x, tiler)
    layout = _layout_of(divided)
    tile_rank, rest_rank = rank(layout[0]), rank(layout[1])
    if is_tuple(coord) and len(coord) < rest_rank:
        coord = tuple(coord) + (None,) * (rest_rank - len(coord))
    keep = tuple([None] * tile_rank) if is_tuple(layout[0].shape) else None
    return _slice_any(divided, (keep, coord))


def local_partition(x, thr_layout: Layout, index):
    """The elements of `x` thread `index` owns when `thr_layout` threads tile it (CuTe's outer
    partition): zipped_divide by the size of each of thr_layout's modes, index the tile by the
    thread's coordinate. As in CuTe (get_flat_coord), the thread's coordinate in a leaf s:d is
    (index / d) % s (0 for a broadcast leaf, d = 0), each mode's leaves linearized
    colexicographically: crd2idx into (d, s, 1):(0, 1, 0), then into the mode's compact layout."""
    modes = list(thr_layout) if is_tuple(thr_layout.shape) else [thr_layout]
    coord, tiler = [], []
    for mode in modes:
        per_leaf = [0 if d == 0 else crd2idx(index, (d, s, 1), (0, 1, 0))
                    for s, d in zip(leaves(mode.shape), leaves(mode.stride))]
        coord.append(crd2idx(rebuild(mode.shape, per_leaf), mode.shape, compact_col_major(mode.shape)))
        tiler.append(size(mode))
    divided = zipped_divide(x, tuple(tiler))
    layout = _layout_of(divided)
    rest = tuple([None] * rank(layout[1])) if is_tuple(layout[1].shape) else None
    return _slice_any(divided, (tuple(coord), rest))


def _slice_any(x, coord):
    from .tensor import Tensor
    if isinstance(x, Tensor):
        return x[coord]
    if isinstance(x, ComposedLayout):
        kept, offset = slice_and_offset(coord, x.outer)
        return ComposedLayout(x.inner, add_offsets(x.offset, offset), kept)
    return slice_and_offset(coord, x)[0]


# -- swizzles -------------------------------------------------------------------------------------------

class Swizzle:
    """CuTe's Swizzle<B, M, S>: offset ^ ((offset & yyy_mask) >> S), applied to the offset it is
    given; a tensor applies it to byte addresses (Tensor._offset_value)."""

    __slots__ = ("bits", "base", "shift")

    def __init__(self, bits: int, base: int, shift: int):
        if bits < 0 or base < 0 or abs(shift) < bits:
            raise DSLError(LAYOUT_ALGEBRA, f"Swizzle<{bits},{base},{shift}>: needs bits, base >= 0 and |shift| >= bits",
                           user_location())
        self.bits, self.base, self.shift = bits, base, shift

    def __call__(self, offset):
        if isinstance(offset, int):
            return _alg.swizzle(self.bits, self.base, self.shift, offset)
        return ops.swizzle(offset, self.bits, self.base, self.shift)

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Swizzle) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


def make_swizzle(bits: int, base: int, shift: int) -> Swizzle:
    return Swizzle(bits, base, shift)


class ComposedLayout:
    """inner o offset o outer: c -> inner(offset + outer(c)). The algebra acts on `outer`."""

    __slots__ = ("inner", "offset", "outer")

    def __init__(self, inner: Swizzle, offset, outer: Layout):
        self.inner, self.offset, self.outer = inner, offset, outer

    def __call__(self, *coord):
        return self.inner(add_offsets(self.offset, self.outer(*coord)))

    def __str__(self) -> str:
        return f"{self.inner} o {spell(self.offset)} o {self.outer}"

    __repr__ = __str__

    @property
    def shape(self):
        return self.outer.shape

    @property
    def is_static(self) -> bool:
        return self.outer.is_static and isinstance(self.offset, int)

    def size(self):
        return self.outer.size()

    def cosize(self):
        return self.outer.cosize()

    def __getitem__(self, mode: int) -> "ComposedLayout":
        return ComposedLayout(self.inner, self.offset, self.outer[mode])


def make_composed_layout(inner: Swizzle, offset, outer: Layout) -> ComposedLayout:
    return ComposedLayout(inner, offset, outer)


# -- printing -------------------------------------------------------------------------------------------

def print_layout(layout) -> None:
    """Prints a rank-2 layout as a table of offsets (rows: mode 0, columns: mode 1)."""
    print(format_layout(layout))


def format_layout(layout) -> str:
    layout = _layout_of(layout)
    if not layout.is_static:
        _fail("print_layout", f"needs a static layout, got {layout}")
    if rank(layout) == 1:
        layout = Layout((layout.shape, 1), (layout.stride, 0))
    if rank(layout) != 2:
        _fail("print_layout", f"prints rank-2 layouts, got the rank-{rank(layout)} {layout}")
    rows, cols = size(layout[0]), size(layout[1])
    cells = [[layout((i, j)) for j in range(cols)] for i in range(rows)]
    width = max(len(str(v)) for row in cells for v in row)
    lines = [str(layout)]
    lines.append(" " * 4 + " ".join(f"{j:>{width}}" for j in range(cols)))
    for i, row in enumerate(cells):
        lines.append(f"{i:>3} " + " ".join(f"{v:>{width}}" for v in row))
    return "\n".join(lines)


def divisibility(coord, shape: IntTuple, stride: IntTuple) -> int:
    """What crd2idx(coord, shape, stride) is known to be a multiple of (0: it is 0). Run-time
    coordinates contribute the gcd of the strides they multiply (times what the coordinate is
    known to be a multiple of, into a single leaf); a run-time value counts for what
    cute.assume promised of it (else 1)."""
    if coord is None:
        return 0
    if is_tuple(coord):
        result = 0
        for c, s, d in zip(coord, shape, stride):
            result = _math.gcd(result, divisibility(c, s, d))
        return result
    if isinstance(coord, int):
        offset = crd2idx(coord, shape, stride)
        if isinstance(offset, int):
            return abs(offset)
    if not is_tuple(coord) and not is_tuple(shape):   # a run-time coordinate times one stride
        return known_divisor(coord) * known_divisor(stride)
    result = 0     # any offset is an integer combination of the strides
    for d in leaves(stride):
        result = _math.gcd(result, known_divisor(d))
    return result
