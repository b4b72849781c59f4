"""cute.copy: tensor to tensor through registers, each side in its widest vectors.

The source is loaded as one TensorSSA and stored into the destination; cute.load/cute.store
pick, per side, the widest access (up to 16 bytes) that its layout, alignment and swizzle allow,
so a copy between a row-major global tile and a swizzled shared tile vectorizes both halves.
"""

from __future__ import annotations

from .diagnostics import ARGUMENT_MISMATCH, DSLError, user_location
from .layout import size
from .nvgpu.cpasync import TmaAtom, tma_copy
from .tensor import Tensor


def copy(*args, **kwargs) -> None:
    """copy(src, dst) or CuTe DSL's copy(atom, src, dst). A TMA atom issues a bulk tensor copy
    (`tma_bar_ptr=` for loads); other atoms are accepted and unused: the vector width comes
    from the layouts. Guard it with an `if` for partial tiles."""
    if len(args) == 3 and isinstance(args[0], TmaAtom):
        tma_copy(*args, **kwargs)
        return
    if kwargs:
        raise DSLError(ARGUMENT_MISMATCH, f"copy takes {', '.join(kwargs)} only with a TMA atom", user_location())
    if len(args) == 3:
        args = args[1:]
    if len(args) != 2 or not all(isinstance(a, Tensor) for a in args):
        raise DSLError(ARGUMENT_MISMATCH, "copy takes (src, dst) tensors", user_location())
    src, dst = args
    if size(src) != size(dst):
        raise DSLError(ARGUMENT_MISMATCH, f"copy of {size(src)} elements ({src.layout}) into {size(dst)} "
                       f"({dst.layout})", user_location())
    dst.store(src.load())


autovec_copy = copy
