"""Loads the torch extension (libcute_torch_ops.so: the schemas and the CUDA, CPU and Autograd
kernels of torch.ops.cute.*), installs the Python builder its C++ caches call on a miss, and
registers the fake (meta) kernels, which need the expression language and so live here."""

from __future__ import annotations

import ctypes
import os
import threading

import torch

from ..pointwise.dtypes import dtype_name, result_dtype
from ..pointwise.grad import gradient
from ..pointwise.kernel import SEPARATOR, Plan, build

LIBRARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "lib", "libcute_torch_ops.so")

_lock = threading.Lock()
_loaded = False
kernel_builds = 0  # kernels the C++ caches asked for (tests check that a new shape builds none)
fast_pointwise = None  # csrc/torch/PythonEntry.cpp: (expr, tuple, dtype|None) -> Tensor | NotImplemented


def _dtypes(names: str) -> tuple:
    return tuple(getattr(torch, n) for n in names.split(",")) if names else ()


def _builder(kind: str, *args):
    """What the C++ side asks on a cache miss (see csrc/torch/Pointwise.cpp)."""
    if kind == "dtype":  # one name per expression, joined by ","
        expr, names, zero_dims, out = args
        exprs = expr.split(SEPARATOR)
        outs = _dtypes(out) if out else (None,) * len(exprs)
        zeros = tuple(z == "1" for z in zero_dims)
        return ",".join(dtype_name(result_dtype(e, _dtypes(names), zeros, o))
                        for e, o in zip(exprs, outs))
    if kind == "kernel":
        global kernel_builds
        kernel_builds += 1
        expr, names, zero_dims, out, rank, inner, vec, wide, device = args
        plan = Plan(expr, tuple(names.split(",")), tuple(z == "1" for z in zero_dims), out, rank, inner, vec, wide)
        return build(plan, device)
    if kind == "grad":
        expr, n, index = args
        return gradient(expr, n, index)
    raise ValueError(f"unknown builder request {kind!r}")


def _pointwise_fake(expr: str, inputs: list, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    (out,) = _pointwise_multi_fake([expr], inputs, None if out_dtype is None else [out_dtype])
    return out


# c10::ScalarType's (stable) values: a ScalarType[] argument reaches Python kernels as ints.
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 3: torch.int32, 4: torch.int64, 5: torch.float16, 6: torch.float32,
                 7: torch.float64, 11: torch.bool, 15: torch.bfloat16}


def _as_dtype(value) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    if value not in _SCALAR_TYPES:
        raise TypeError(f"cute::pointwise.multi: out_dtypes has an unsupported dtype (ScalarType {value})")
    return _SCALAR_TYPES[value]


def _pointwise_multi_fake(exprs: list, inputs: list, out_dtypes: list | None = None) -> list:
    if not inputs:
        raise ValueError("cute::pointwise needs at least one input tensor")
    if not exprs:
        raise ValueError("cute::pointwise.multi needs at least one expression")
    if out_dtypes is not None and len(out_dtypes) != len(exprs):
        raise ValueError(f"cute::pointwise.multi: {len(exprs)} expressions but {len(out_dtypes)} out_dtypes")
    devices = {t.device for t in inputs}
    if len(devices) > 1:
        raise RuntimeError(f"cute::pointwise: expected all inputs on the same device, got {sorted(map(str, devices))}")
    shape = broadcast_shape([t.shape for t in inputs])
    dtypes, zeros = tuple(t.dtype for t in inputs), tuple(t.dim() == 0 for t in inputs)
    return [inputs[0].new_empty(shape, dtype=result_dtype(e, dtypes, zeros, o))
            for e, o in zip(exprs, [_as_dtype(o) for o in out_dtypes] if out_dtypes else [None] * len(exprs))]


def broadcast_shape(shapes: list) -> list:
    """torch's broadcasting, with at::infer_size's error (what the CUDA kernel raises); sizes
    may be SymInts."""
    result = list(shapes[0])
    for shape in shapes[1:]:
        ndim = max(len(result), len(shape))
        a = [1] * (ndim - len(result)) + result
        b = [1] * (ndim - len(shape)) + list(shape)
        for d in range(ndim):
            if a[d] != b[d] and a[d] != 1 and b[d] != 1:
                raise RuntimeError(f"The size of tensor a ({a[d]}) must match the size of tensor b ({b[d]}) at "
                                   f"non-singleton dimension {d}")
        result = [y if x == 1 else x for x, y in zip(a, b)]
    return result


def load() -> None:
    """Makes torch.ops.cute.* usable; idempotent and thread-safe."""
    global _loaded, fast_pointwise
    with _lock:
        if _loaded:
            return
        torch.ops.load_library(LIBRARY)
        # PyDLL keeps the GIL during these calls (one takes a reference to the builder).
        library = ctypes.PyDLL(LIBRARY)
        library.cute_torch_set_builder(ctypes.py_object(_builder))
        library.cute_torch_pointwise_entry.restype = ctypes.py_object
        fast_pointwise = library.cute_torch_pointwise_entry()
        torch.library.register_fake("cute::pointwise")(_pointwise_fake)
        torch.library.register_fake("cute::pointwise.multi")(_pointwise_multi_fake)
        _loaded = True
