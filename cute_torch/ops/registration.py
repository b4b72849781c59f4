"""Loads the torch extension (libcute_torch_ops.so: the schemas and the CUDA, CPU and Autograd
kernels of torch.ops.cute.*), installs the Python builder its C++ caches call on a miss, and
registers the fake (meta) kernels, which need the expression language and so live here."""

from __future__ import annotations

import ctypes
import functools
import threading

import torch

from ..dsl.dispatch import LIBRARY
from ..pointwise.dtypes import dtype_name, result_dtype
from ..pointwise.grad import gradient
from ..pointwise.kernel import SEPARATOR, Plan, build
from . import gemm_autograd, gemm_build


_lock = threading.Lock()
_loaded = False
kernel_builds = 0  # kernels the C++ caches asked for (tests check that a new shape builds none)
fast_pointwise = None  # csrc/torch/PythonEntry.cpp: (expr, tuple, dtype|None) -> Tensor | NotImplemented
_op_entry = None       # csrc/torch/PythonEntry.cpp: (name, overload) -> the operator's entry, or None


def _dtypes(names: str) -> tuple:
    return tuple(getattr(torch, n) for n in names.split(",")) if names else ()


def _builder(kind: str, *args):
    """What the C++ side asks on a cache miss (see csrc/torch/Pointwise.cpp and Gemm.cpp)."""
    global kernel_builds
    if kind == "dtype":  # one name per expression, joined by ","
        expr, names, zero_dims, out = args
        exprs = expr.split(SEPARATOR)
        outs = _dtypes(out) if out else (None,) * len(exprs)
        zeros = tuple(z == "1" for z in zero_dims)
        return ",".join(dtype_name(result_dtype(e, _dtypes(names), zeros, o))
                        for e, o in zip(exprs, outs))
    if kind == "kernel":
        kernel_builds += 1
        expr, names, zero_dims, out, rank, inner, vec, wide, device, segments = args
        plan = Plan(expr, tuple(names.split(",")), tuple(z == "1" for z in zero_dims), out, rank, inner, vec, wide,
                    segments)
        return build(plan, device)
    if kind == "grad":
        expr, n, index = args
        return gradient(expr, n, index)
    if kind == "gemm_grads":
        return gemm_autograd.gradient_table(*args)
    if kind == "gemm":
        kernel_builds += 1
        return gemm_build.build(*args)
    if kind == "device":
        return gemm_build.device_facts(*args)
    if kind == "rows":
        kernel_builds += 1
        from . import row_build
        return row_build.build(*args)
    raise ValueError(f"unknown builder request {kind!r}")


def _pointwise_fake(expr: str, inputs: list, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    (out,) = _pointwise_multi_fake([expr], inputs, None if out_dtype is None else [out_dtype])
    return out


# A ScalarType[] argument reaches Python kernels as c10's codes: the extension says which code
# each dtype has (cute::scalar_type_code), filled in by load().
_SCALAR_TYPES: dict = {}
_OUT_DTYPES = (torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64,
               torch.bool, torch.bfloat16)


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
    shape = torch.broadcast_shapes(*(t.shape for t in inputs))
    dtypes, zeros = tuple(t.dtype for t in inputs), tuple(t.dim() == 0 for t in inputs)
    return [inputs[0].new_empty(shape, dtype=result_dtype(e, dtypes, zeros, o))
            for e, o in zip(exprs, [_as_dtype(o) for o in out_dtypes] if out_dtypes else [None] * len(exprs))]


def _pointwise_into_fake(exprs: list, inputs: list, outs: list) -> None:
    """cute::pointwise.into writes its outs: their shapes and dtypes must be what the
    expressions give (checked as pointwise.multi types them)."""
    if len(outs) != len(exprs):
        raise ValueError(f"cute::pointwise.into: {len(exprs)} expressions but {len(outs)} outs")
    for i, (want, out) in enumerate(zip(_pointwise_multi_fake(exprs, inputs, [o.dtype for o in outs]), outs)):
        if want.shape != out.shape or not out.is_contiguous():
            raise ValueError(f"cute::pointwise.into: outs[{i}] must be a contiguous tensor of shape "
                             f"{list(want.shape)}, got {list(out.shape)}")


def foreach_segments(exprs: list, inputs: list, outs: list) -> list:
    """cute::pointwise.foreach_into's segments as (inputs, outs) pairs: outs in segments of one
    per expression, inputs in as many segments of equally many (the C++ op's checks)."""
    if not exprs:
        raise ValueError("cute::pointwise.foreach_into needs at least one expression")
    count = len(outs) // len(exprs)
    if not count or len(outs) % len(exprs):
        raise ValueError(f"cute::pointwise.foreach_into: {len(outs)} outs are not segments of one out per "
                         f"expression ({len(exprs)})")
    if not inputs or len(inputs) % count:
        raise ValueError(f"cute::pointwise.foreach_into: {len(inputs)} inputs do not split into {count} segments "
                         f"of equally many (one segment per {len(exprs)} outs)")
    k, m = len(inputs) // count, len(exprs)
    return [(inputs[s * k:(s + 1) * k], outs[s * m:(s + 1) * m]) for s in range(count)]


def _pointwise_foreach_into_fake(exprs: list, inputs: list, outs: list) -> None:
    """Each segment is checked as cute::pointwise.into checks its call."""
    for segment_inputs, segment_outs in foreach_segments(exprs, inputs, outs):
        _pointwise_into_fake(exprs, segment_inputs, segment_outs)


def _gemm_multi_fake(a, b, epilogues: list, inputs: list = (), out_dtypes: list | None = None) -> list:
    """Shapes and dtypes of cute::gemm.multi (the checks of Gemm.cpp that need no data)."""
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError(f"cute::gemm: a and b are (M, K) / (L, M, K) and (K, N) / (L, K, N), got a "
                         f"{list(a.shape)} and b {list(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"cute::gemm: a {list(a.shape)} and b {list(b.shape)} disagree on K")
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    if not (a.dtype == b.dtype and a.dtype in (torch.bfloat16, torch.float16)) and not (a.dtype in fp8
                                                                                         and b.dtype in fp8):
        raise ValueError(f"cute::gemm: a and b are both bfloat16, both float16, or float8 (e4m3fn / e5m2), got "
                         f"{a.dtype} and {b.dtype}")
    if not 1 <= len(epilogues) <= 4 or (out_dtypes is not None and len(out_dtypes) != len(epilogues)):
        raise ValueError(f"cute::gemm.multi: {len(epilogues)} epilogues (1 to 4) and out_dtypes {out_dtypes}")
    batch = [t.shape[0] for t in (a, b) if t.dim() == 3]
    if len(batch) == 2 and batch[0] != batch[1]:      # (SymInts compare, they do not hash)
        raise ValueError(f"cute::gemm: a {list(a.shape)} and b {list(b.shape)} have different batch sizes")
    from cute_torch.kernels.gemm_common import is_gated
    gated = is_gated(epilogues)
    if gated and b.shape[-1] % 16:
        raise ValueError(f"cute::gemm: a gated GEMM's b has {b.shape[-1]} columns, not a multiple of 16 (groups of 8 "
                         "gate and 8 up columns)")
    shape = (*batch[:1], a.shape[-2], b.shape[-1] // 2 if gated else b.shape[-1])
    for i, x in enumerate(inputs):
        try:
            if x.dim() > len(shape):
                raise RuntimeError
            torch.broadcast_shapes(x.shape, shape)
        except RuntimeError:
            raise ValueError(f"cute::gemm: input x{i} of shape {list(x.shape)} does not broadcast to the output's "
                             f"{list(shape)}") from None
    default = torch.bfloat16 if a.dtype in fp8 else a.dtype
    dtypes = [_as_dtype(d) for d in out_dtypes] if out_dtypes else [default] * len(epilogues)
    for d in dtypes:
        if d not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"cute::gemm writes bfloat16, float16 or float32 outputs, got {d}")
    return [a.new_empty(shape, dtype=d) for d in dtypes]


def _gemm_fake(a, b, epilogue: str = "acc", inputs: list = (), out_dtype: torch.dtype | None = None):
    (out,) = _gemm_multi_fake(a, b, [epilogue], inputs, None if out_dtype is None else [out_dtype])
    return out


def load() -> None:
    """Makes torch.ops.cute.* usable; idempotent and thread-safe."""
    global _loaded, fast_pointwise, _op_entry
    with _lock:
        if _loaded:
            return
        torch.ops.load_library(LIBRARY)
        _SCALAR_TYPES.update({torch.ops.cute.scalar_type_code(d): d for d in _OUT_DTYPES})
        # PyDLL keeps the GIL during these calls (one takes a reference to the builder).
        library = ctypes.PyDLL(LIBRARY)
        library.cute_torch_set_builder(ctypes.py_object(_builder))
        library.cute_torch_pointwise_entry.restype = ctypes.py_object
        fast_pointwise = library.cute_torch_pointwise_entry()
        library.cute_torch_op_entry.restype = ctypes.py_object
        library.cute_torch_op_entry.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        _op_entry = library.cute_torch_op_entry
        torch.library.register_fake("cute::pointwise")(_pointwise_fake)
        torch.library.register_fake("cute::pointwise.multi")(_pointwise_multi_fake)
        torch.library.register_fake("cute::pointwise.into")(_pointwise_into_fake)
        torch.library.register_fake("cute::pointwise.foreach_into")(_pointwise_foreach_into_fake)
        torch.library.register_fake("cute::gemm")(_gemm_fake)
        torch.library.register_fake("cute::gemm.multi")(_gemm_multi_fake)
        from . import row_ops
        row_ops.register()
        _loaded = True


@functools.lru_cache(maxsize=None)
def short_call(op: torch._ops.OpOverload):
    """`op` (a torch.ops.cute overload) as a function that takes the short C entry
    (csrc/torch/PythonEntry.cpp) with positional arguments and torch.ops' route otherwise
    (keyword arguments, tensor subclasses, torch-function modes): the same dispatcher op either
    way, 0.2-7.8 us less host time per call on the short one (benchmarks/op_host_time.py on
    the H100 and H200 machines)."""
    load()
    name, _, overload = op.name().partition(".")
    entry = _op_entry(name.encode(), ("" if overload == "default" else overload).encode())
    if entry is None:
        return op

    def call(*args, **kwargs):
        if not kwargs:
            out = entry(*args)
            if out is not NotImplemented:
                return out
        return op(*args, **kwargs)
    call.__name__ = call.__qualname__ = f"short_{name.replace('::', '_')}_{overload}"
    return call


def call(op: torch._ops.OpOverload, *args):
    """op(*args) through short_call's entry, or the op itself while Dynamo traces (which must
    see the op, not a C function)."""
    return op(*args) if torch.compiler.is_compiling() else short_call(op)(*args)
