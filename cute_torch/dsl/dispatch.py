"""The C++ side of a @cute.jit call's memory-cache hit (csrc/torch/JitDispatch.cpp, in the torch
extension, which reads a tensor from its at::Tensor instead of through torch's Python bindings).

A memory cache registers a specialization here on its second call with plain torch tensors and
Python scalars (the first call of a process, often a disk-cache hit, does not pay for loading the
extension); later calls with the same argument types, shapes, strides, alignment and device are
keyed, found and launched in one C++ call. The memory cache stays the owner: a hit moves its
entry to the most recent end, and its evictions are removed here.
"""

from __future__ import annotations

import ctypes
import os

from .._C import CudaError

# The torch extension (cute_torch.ops.registration loads it from here too; twice is a no-op).
LIBRARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "lib", "libcute_torch_ops.so")

_make = None  # the extension's cute_torch_jit_dispatch, or False where it cannot be loaded


class Dispatch:
    """One memory cache's registered specializations. `call(args)` is True when the call ran."""

    __slots__ = ("call", "_add", "remove")

    def __init__(self, touch):
        self.call, self._add, self.remove = _make(touch, CudaError)

    def add(self, args: tuple, key, spec) -> bool:
        """Registers `spec` (kept under `key`) for calls keyed like `args`; False where it
        cannot go through here (CPU tensors, compile-time arguments, ...)."""
        fast = spec.fast_entry()
        return fast is not None and self._add(args, key, spec, *fast)


def make(touch) -> Dispatch | None:
    """A Dispatch for a memory cache whose `touch(key)` moves an entry to its most recent end,
    or None without the torch extension (the Python path then serves every call)."""
    global _make
    if _make is None:
        try:
            library = ctypes.PyDLL(LIBRARY)
            function = library.cute_torch_jit_dispatch
        except (OSError, AttributeError):
            _make = False
        else:
            function.restype = ctypes.py_object
            function.argtypes = (ctypes.py_object, ctypes.py_object)
            _make = function
    return Dispatch(touch) if _make else None
