"""cute.copy: without an atom, tensor to tensor through registers, each side in its widest
vectors; with an atom (TMA, ldmatrix / stmatrix, cp.async, bulk copies) or a tiled copy, that
atom's op (copy()).

Without an atom, the source is loaded as one TensorSSA and stored into the destination; cute.load/cute.store
pick, per side, the widest access (up to 16 bytes) that its layout, alignment and swizzle allow,
so a copy between a row-major global tile and a swizzled shared tile vectorizes both halves.
"""

from __future__ import annotations

from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .layout import size
from .nvgpu.cpasync import TmaAtom, tma_copy, tma_prefetch
from .tensor import Tensor
from .tiled_copy import (CopyAtom, MmaOperandCopy, TiledCopy, ldmatrix_c_copy, ldmatrix_copy, stmatrix_copy,
                         tiled_copy)


def prefetch(atom, src) -> None:
    """CuTe DSL's prefetch(atom, src): with a TMA load atom, tile `src` (of the atom's
    coordinate tensor) into L2 ahead of its use (cpasync.tma_prefetch)."""
    if not isinstance(atom, TmaAtom):
        raise DSLError(ARGUMENT_MISMATCH, f"prefetch takes a TMA load atom, got {type(atom).__name__}",
                       user_location())
    tma_prefetch(atom, src)


def copy(*args, **kwargs) -> None:
    """copy(src, dst) or CuTe DSL's copy(atom_or_tiled_copy, src, dst, pred=None). A TMA atom
    issues a bulk tensor copy (`tma_bar_ptr=` for loads); a copy atom or tiled copy issues its
    op per chunk of a (Val, Rest...) partition (tiled_copy.py); without an atom, the vector
    width comes from the layouts."""
    if len(args) == 3 and isinstance(args[0], TmaAtom):
        tma_copy(*args, **kwargs)
        return
    if len(args) == 3 and isinstance(args[0], MmaOperandCopy):
        tiled = args[0]
        if tiled.operand != "C":
            ldmatrix_copy(*args)
        else:
            (ldmatrix_c_copy if tiled.reads_shared else stmatrix_copy)(*args)
        return
    if len(args) == 3 and isinstance(args[0], (CopyAtom, TiledCopy)):
        unknown = set(kwargs) - {"pred", "mbar_ptr"}
        if unknown:
            raise DSLError(ARGUMENT_MISMATCH, f"copy with a copy atom takes pred= (or mbar_ptr= for a bulk copy), not "
                           f"{sorted(unknown)}", user_location())
        if not all(isinstance(a, Tensor) for a in args[1:]):
            raise DSLError(ARGUMENT_MISMATCH, "copy takes (atom, src, dst) tensors", user_location())
        tiled_copy(*args, **kwargs)
        return
    if kwargs:
        raise DSLError(ARGUMENT_MISMATCH, f"copy takes {', '.join(kwargs)} only with an atom", user_location())
    if len(args) == 3:
        raise DSLError(ARGUMENT_MISMATCH, f"copy's first argument is a copy atom, tiled copy or TMA atom, got "
                       f"{type(args[0]).__name__}", user_location(), "make one with cute.make_copy_atom")
    if len(args) != 2 or not all(isinstance(a, Tensor) for a in args):
        raise DSLError(ARGUMENT_MISMATCH, "copy takes (src, dst) tensors", user_location())
    src, dst = args
    if size(src) != size(dst):
        raise DSLError(ARGUMENT_MISMATCH, f"copy of {size(src)} elements ({src.layout}) into {size(dst)} "
                       f"({dst.layout})", user_location())
    dst.store(src.load())


autovec_copy = copy
