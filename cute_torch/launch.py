"""Which device and stream a launch goes to: the tensors' device and its current torch stream,
unless the caller names them."""

from __future__ import annotations

import sys
from typing import Any


def _torch():
    # Only consult torch if the caller already uses it: importing it costs seconds.
    return sys.modules.get("torch")


def _stream_handle(stream: Any) -> int:
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream / ExternalStream
    if handle is None:
        raise TypeError(f"stream must be an int (CUstream) or a torch.cuda.Stream, got {type(stream).__name__}")
    return int(handle)


def resolve_device_and_stream(args: tuple, stream: Any, device: int | None) -> tuple[int, int]:
    torch = _torch()
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
    if stream is None:
        if torch is not None and torch.cuda.is_available():
            stream = torch.cuda.current_stream(device).cuda_stream
        else:
            stream = 0
    return device, _stream_handle(stream)
