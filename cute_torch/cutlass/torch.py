"""`cutlass.torch`: conversions between the DSL's numeric types and torch's."""

from __future__ import annotations

import torch as _torch

from cute_torch.dsl.tensor import numeric_of_torch_dtype

_TORCH_OF = {}


def dtype(numeric) -> _torch.dtype:
    """The torch dtype of a DSL numeric type (cutlass.Float32 -> torch.float32, ...)."""
    if not _TORCH_OF:
        for t in (_torch.float32, _torch.float16, _torch.bfloat16, _torch.float64, _torch.int8, _torch.int16,
                  _torch.int32, _torch.int64, _torch.uint8, _torch.bool):
            _TORCH_OF[numeric_of_torch_dtype(t)] = t
    if numeric not in _TORCH_OF:
        raise TypeError(f"cutlass.torch.dtype: no torch dtype for {getattr(numeric, '__name__', numeric)}")
    return _TORCH_OF[numeric]


def current_stream():
    """The current CUDA stream (torch's), to pass where a kernel launch takes a stream."""
    return _torch.cuda.current_stream()
