"""Which device and stream a launch goes to: the tensors' device and its current torch stream,
unless the caller names them."""

from __future__ import annotations

import sys
from typing import Any


def loaded_torch():
    """torch if the caller already imported it (importing it here would cost seconds)."""
    return sys.modules.get("torch")


_current_stream = None


def current_stream_handle(device: int) -> int:
    """The CUstream of torch's current stream on `device` (0 without CUDA); the fast raw-handle
    getter when torch has one, since this runs on every launch."""
    global _current_stream
    if _current_stream is None:
        torch = loaded_torch()
        if torch is None or not torch.cuda.is_available():
            return 0
        _current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _current_stream(device)


def is_stream(value: Any) -> bool:
    """Whether `value` names a CUDA stream: a torch.cuda.Stream (ExternalStream too), or a
    driver CUstream object as CuTe DSL programs pass one (cuda-python's
    `cuda.bindings.driver.CUstream(handle)`, whose int() is the handle). Not imported here:
    recognized by its type's name."""
    torch = loaded_torch()
    if torch is not None and hasattr(torch, "cuda") and isinstance(value, torch.cuda.Stream):
        return True
    return type(value).__name__ == "CUstream" and hasattr(value, "__int__")


def stream_handle(stream: Any) -> int:
    """The CUstream handle of an int, a torch.cuda.Stream or a driver CUstream object."""
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream / ExternalStream
    if handle is None and is_stream(stream):
        handle = int(stream)
    if handle is None:
        raise TypeError(f"stream must be an int (CUstream), a CUstream or a torch.cuda.Stream, got "
                        f"{type(stream).__name__}")
    return int(handle)


def resolve_device_and_stream(args: tuple, stream: Any, device: int | None) -> tuple[int, int]:
    torch = loaded_torch()
    tensor_devices = []
    if torch is not None:
        tensor_devices = [a.device for a in args if isinstance(a, torch.Tensor)]
        non_cuda = [d for d in tensor_devices if d.type != "cuda"]
        if non_cuda:
            raise ValueError(f"kernel arguments must be CUDA tensors, got a tensor on {non_cuda[0]}")
        if len({d.index for d in tensor_devices}) > 1:
            raise ValueError(f"kernel arguments are on different devices: {sorted({str(d) for d in tensor_devices})}")
    if device is None:
        if tensor_devices:
            device = tensor_devices[0].index
        elif torch is not None and torch.cuda.is_available():
            device = torch.cuda.current_device()
        else:
            device = 0
    return device, current_stream_handle(device) if stream is None else stream_handle(stream)
