"""Tiled MMAs: an MMA atom repeated over threads (`atom_layout_mnk`) and over the operands'
tiles, CuTe DSL's `make_tiled_mma`, `get_slice`, `partition_A/B/C`, `make_fragment_A/B/C` and
`cute.gemm`.

Partitioning follows CuTe's thrfrg: divide a tile into atom-sized blocks
((AtomM, AtomN), (RestM, RestN)), compose the block mode with the atom's thread-value layout
((AtomThreads, AtomValues), ...), divide the rest by the atoms' thread layout
(ThrM, ThrN), then fix this thread's coordinates. What is left is (AtomValues, FrgM, FrgN, ...):
the thread's values of one atom, repeated over the atoms it computes (and any modes past the
second, such as k-tiles or pipeline stages, kept as they are).
"""

from __future__ import annotations

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .layout import Layout, composition, divisibility, idx2crd, is_tuple, make_layout, rank, size, zipped_divide
from .mma_atom import MmaAtom
from .tensor import Tensor, make_rmem_tensor

# Which atom layout modes (of M, N, K) each operand's tile spans.
_OPERAND_MODES = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}


class TiledMma:
    """`atom` repeated over an (M, N, K) grid of atoms (`atom_layout_mnk`), one per group of
    `atom.threads` threads; `permutation_mnk` (ints) widens the tile the MMA covers per step
    (the extra atoms are repeats each thread computes)."""

    def __init__(self, atom: MmaAtom, atom_layout_mnk=(1, 1, 1), permutation_mnk=None):
        if not isinstance(atom, MmaAtom):
            raise DSLError(ARGUMENT_MISMATCH, f"make_tiled_mma takes an MMA op (cute.nvgpu.warp.MmaF16BF16Op, "
                           f"cute.nvgpu.warpgroup.MmaF16BF16Op), got {type(atom).__name__}", user_location())
        atom_layout_mnk = tuple(atom_layout_mnk) + (1,) * (3 - len(tuple(atom_layout_mnk)))
        if len(atom_layout_mnk) != 3 or not all(isinstance(x, int) and x > 0 for x in atom_layout_mnk):
            raise DSLError(ARGUMENT_MISMATCH, f"atom_layout_mnk is up to three positive ints, got {atom_layout_mnk}",
                           user_location())
        self.atom, self.atom_layout_mnk = atom, atom_layout_mnk
        covered = tuple(s * n for s, n in zip(atom.shape_mnk, atom_layout_mnk))
        if permutation_mnk is None:
            self.tile_mnk = covered
        else:
            if not all(isinstance(p, int) for p in permutation_mnk) or len(permutation_mnk) != 3:
                raise DSLError(ARGUMENT_MISMATCH, "permutation_mnk is three tile sizes (ints); permuting layouts "
                               "are not supported", user_location())
            for p, c, mode in zip(permutation_mnk, covered, "MNK"):
                if p % c:
                    raise DSLError(ARGUMENT_MISMATCH, f"permutation_mnk {mode} = {p} is not a multiple of the {c} "
                                   f"the atoms cover", user_location())
            self.tile_mnk = tuple(permutation_mnk)
        self.thr_layout_vmnk = make_layout((atom.threads,) + atom_layout_mnk)
        self.accumulate = True

    @property
    def size(self) -> int:
        """Threads the tiled MMA takes."""
        return size(self.thr_layout_vmnk)

    def get_tile_size(self, mode: int) -> int:
        return self.tile_mnk[mode]

    @property
    def shape_mnk(self) -> tuple:
        return self.tile_mnk

    @property
    def op(self) -> MmaAtom:
        return self.atom

    def __str__(self) -> str:
        return f"TiledMma({self.atom}, atoms {self.atom_layout_mnk}, tile {self.tile_mnk})"

    __repr__ = __str__

    def set(self, field, value) -> None:
        """CuTe DSL's `tiled_mma.set(warpgroup.Field.ACCUMULATE, flag)`: whether the next gemm
        adds to the accumulators (True) or overwrites them (False). A compile-time bool or a
        run-time Boolean."""
        from .nvgpu.warpgroup import Field
        if field is not Field.ACCUMULATE:
            raise DSLError(ARGUMENT_MISMATCH, f"TiledMma.set knows Field.ACCUMULATE, got {field}", user_location())
        b = ir.current()
        if b is not None and isinstance(self.accumulate, bool) and isinstance(value, bool) and \
                value != self.accumulate and getattr(self, "_set_depth", 1) < b.mark()[0]:
            raise DSLError(ARGUMENT_MISMATCH, "ACCUMULATE is compile-time state: changing it inside a dynamic loop "
                           "would only take effect in the traced body, not per iteration", user_location(),
                           "pass a run-time flag (e.g. k_tile > 0), or zero the accumulators before the loop and "
                           "keep ACCUMULATE True, or peel the first k-block out of the loop")
        self.accumulate = value
        self._set_depth = b.mark()[0] if b is not None else 1

    def get_slice(self, thr_idx) -> "ThrMma":
        return ThrMma(self, thr_idx)

    get_thread_slice = get_slice

    # Fragments of a partitioned tensor: registers with its shape (CuTe DSL spells these on the
    # tiled MMA and on a thread's slice).
    def make_fragment_A(self, partitioned):
        return _fragment(self.atom, "A", partitioned)

    def make_fragment_B(self, partitioned):
        return _fragment(self.atom, "B", partitioned)

    def make_fragment_C(self, partitioned):
        return _fragment(self.atom, "C", partitioned)

    def partition_shape_C(self, shape_mn) -> tuple:
        """The shape of a thread's C partition of an (M, N) tile, without a tensor."""
        return _thread_modes(_partition_layout(self, "C", make_layout(tuple(shape_mn))))[1].shape


class ThrMma:
    """One thread's view of a tiled MMA (`tiled_mma.get_slice(thread_index)`)."""

    def __init__(self, tiled: TiledMma, thr_idx):
        self.tiled, self.thr_idx = tiled, thr_idx
        t, m, n, k = idx2crd(thr_idx, tiled.thr_layout_vmnk.shape)
        self._coords = {"A": (t, (m, k)), "B": (t, (n, k)), "C": (t, (m, n))}

    def partition_A(self, tensor: Tensor) -> Tensor:
        """This thread's part of an (M, K, ...) tile: (AtomValues, FrgM, FrgK, ...)."""
        return self._partition("A", tensor)

    def partition_B(self, tensor: Tensor) -> Tensor:
        """This thread's part of an (N, K, ...) tile: (AtomValues, FrgN, FrgK, ...)."""
        return self._partition("B", tensor)

    def partition_C(self, tensor: Tensor) -> Tensor:
        """This thread's part of an (M, N, ...) tile: (AtomValues, FrgM, FrgN, ...)."""
        return self._partition("C", tensor)

    def _partition(self, operand: str, tensor: Tensor, tv: Layout | None = None) -> Tensor:
        """This thread's part of `tensor` for `operand`; `tv` replaces the atom's thread-value
        layout (a copy atom that gives each thread other elements of the same atom tile)."""
        if not isinstance(tensor, Tensor):
            raise DSLError(ARGUMENT_MISMATCH, f"partition_{operand} takes a tensor, got {type(tensor).__name__}",
                           user_location())
        thread_mode, kept = _thread_modes(_partition_layout(self.tiled, operand, tensor._layout, tv))
        coord = self._coords[operand]
        return tensor.with_layout(kept, tensor.offset_at(thread_mode, coord),
                                  divisibility(coord, thread_mode.shape, thread_mode.stride))

    def make_fragment_A(self, partitioned):
        return self.tiled.make_fragment_A(partitioned)

    def make_fragment_B(self, partitioned):
        return self.tiled.make_fragment_B(partitioned)

    def make_fragment_C(self, partitioned):
        return self.tiled.make_fragment_C(partitioned)


def make_tiled_mma(op: MmaAtom, atom_layout_mnk=(1, 1, 1), permutation_mnk=None) -> TiledMma:
    """CuTe DSL's make_tiled_mma: `op` tiled over an (M, N, K) grid of atoms."""
    return TiledMma(op, atom_layout_mnk, permutation_mnk)


def _partition_layout(tiled: TiledMma, operand: str, layout: Layout, tv: Layout | None = None) -> Layout:
    """((AtomThreads, (ThrX, ThrY)), (AtomValues, (FrgX, FrgY, rest...))) of a tile's layout."""
    atom = tiled.atom
    x, y = _OPERAND_MODES[operand]
    if rank(layout) < 2:
        raise DSLError(ARGUMENT_MISMATCH, f"partition_{operand} needs a tile of at least two modes "
                       f"({'MNK'[x]}, {'MNK'[y]}), got {layout}", user_location())
    tv = tv or {"A": atom.layout_a, "B": atom.layout_b, "C": atom.layout_c}[operand]
    blocks = zipped_divide(layout, (atom.shape_mnk[x], atom.shape_mnk[y]))   # ((AtomX, AtomY), (RestX, RestY, ...))
    atom_tv = composition(blocks[0], tv)                                         # (AtomThreads, AtomValues)
    thr = zipped_divide(blocks[1], (tiled.atom_layout_mnk[x], tiled.atom_layout_mnk[y]))  # ((ThrX, ThrY), (Frg...))
    return Layout(((atom_tv.shape[0], thr.shape[0]), (atom_tv.shape[1], thr.shape[1])),
                  ((atom_tv.stride[0], thr.stride[0]), (atom_tv.stride[1], thr.stride[1])))


def _thread_modes(layout: Layout) -> tuple:
    """(the thread mode, what one thread keeps flattened to (AtomValues, FrgX, FrgY, ...))."""
    values, frg = layout[1][0], layout[1][1]
    shapes = (values.shape,) + (tuple(frg.shape) if is_tuple(frg.shape) else (frg.shape,))
    strides = (values.stride,) + (tuple(frg.stride) if is_tuple(frg.stride) else (frg.stride,))
    return layout[0], Layout(shapes, strides)


def _fragment(atom: MmaAtom, operand: str, partitioned) -> Tensor:
    """Registers for an operand of the shape of a thread's partition (or a shape): the
    accumulator type for C, the input type for A and B."""
    shape = partitioned.shape if isinstance(partitioned, Tensor) else partitioned
    dtype = {"A": atom.a_dtype, "B": atom.b_dtype, "C": atom.acc_dtype}[operand]
    source = {"A": atom.a_source, "B": atom.b_source, "C": "rmem"}[operand]
    if source == "smem":
        from .nvgpu.warpgroup import smem_operand
        return smem_operand(atom, operand, partitioned)
    return make_rmem_tensor(make_layout(shape), dtype)


def gemm(atom_or_tiled, d, a, b, c) -> None:
    """D = A * B + C over a thread's fragments (CuTe DSL's cute.gemm): A (V, M, K), B (V, N, K),
    C and D (V, M, N), the atom issued once per (m, n, k) (k outermost, n serpentine so
    consecutive MMAs share an A fragment). Fragments of a single atom (rank 1) work too."""
    tiled = atom_or_tiled if isinstance(atom_or_tiled, TiledMma) else None
    atom = tiled.atom if tiled else atom_or_tiled
    if not isinstance(atom, MmaAtom):
        raise DSLError(ARGUMENT_MISMATCH, f"cute.gemm takes a tiled MMA or an MMA op first, got "
                       f"{type(atom_or_tiled).__name__}", user_location())
    accumulate = tiled.accumulate if tiled else True
    a3, b3, c3, d3 = (_rank3(x, name) for x, name in ((a, "A"), (b, "B"), (c, "C"), (d, "D")))
    m_count, k_count = size(a3.shape[1]), size(a3.shape[2])
    n_count = size(b3.shape[1])
    if size(b3.shape[2]) != k_count or size(c3.shape[1]) != m_count or size(c3.shape[2]) != n_count:
        raise DSLError(ARGUMENT_MISMATCH, f"cute.gemm: fragments do not agree: A {a.shape}, B {b.shape}, C {c.shape} "
                       "(A is (V, M, K), B (V, N, K), C and D (V, M, N))", user_location())
    for k in range(k_count):
        for m in range(m_count):
            ns = range(n_count) if m % 2 == 0 else reversed(range(n_count))
            for n in ns:
                cc = c3 if k == 0 else d3
                atom.call(d3[None, m, n], a3[None, m, k], b3[None, n, k], cc[None, m, n],
                          accumulate if k == 0 else True)


def _rank3(t, name: str):
    """(V, X, Y) view of a fragment given as (V,) or (V, X) or (V, X, Y)."""
    if not hasattr(t, "shape"):
        raise DSLError(ARGUMENT_MISMATCH, f"cute.gemm: {name} must be a fragment tensor, got {type(t).__name__}",
                       user_location())
    r = len(t.shape) if is_tuple(t.shape) else 1
    if r > 3:
        raise DSLError(ARGUMENT_MISMATCH, f"cute.gemm: {name} has {r} modes (slice the k-tile or stage first): "
                       f"{t.shape}", user_location())
    return _pad_modes(t, r)


def _pad_modes(t, r: int):
    """`t` (a tensor or a descriptor fragment) with size-1 modes appended up to three."""
    if r == 3:
        return t
    layout = t._layout
    shapes = tuple(layout.shape) if r > 1 else (layout.shape,)
    strides = tuple(layout.stride) if r > 1 else (layout.stride,)
    shapes += (1,) * (3 - len(shapes))
    strides += (0,) * (3 - len(strides))
    return t.with_layout(Layout(shapes, strides))

