"""Modules over torch.ops.cute.*: drop-in replacements for torch.nn layers.

`cute_torch.nn.Linear(in_features, out_features, bias=True, activation=None)` is an nn.Linear
(its parameters, initialization and state dict are nn.Linear's, so checkpoints load either way)
whose forward is one GEMM with the bias and the activation fused, differentiable, on the
library's Hopper GEMM (cute_torch.ops.linear). Where that GEMM cannot run (not a Hopper GPU,
fp32 or mixed dtypes, CPU tensors) it computes the same thing with torch.

`RMSNorm`, `LayerNorm` and `CrossEntropyLoss` are torch's modules (same arguments, parameters
and state dicts) whose forward runs the row kernels (cute_torch.ops.rms_norm, layer_norm,
cross_entropy_loss) on CUDA tensors over the last dimension, and torch's own forward where
those cannot (CPU tensors, a normalized shape of several dims, rows over 262144 elements, class
weights; label smoothing runs in the kernels).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .kernels.norms import MAX_NORM_N
from .ops.linear import check_activation, linear
from .ops.row_ops import DEFAULT_RMS_EPS, cross_entropy_loss, layer_norm_fn, rms_norm

_TORCH_ACTIVATIONS = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu,
                      "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "sigmoid": torch.sigmoid}


def fusable(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether cute_torch.ops.linear runs for these tensors: both bf16 or both fp16 on an sm_90
    GPU."""
    return (x.is_cuda and x.dtype == weight.dtype and x.dtype in (torch.bfloat16, torch.float16)
            and weight.device == x.device and torch.cuda.get_device_capability(x.device) == (9, 0))


class Linear(torch.nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str | None = None,
                 device=None, dtype=None):
        check_activation(activation)
        super().__init__(in_features, out_features, bias, device, dtype)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if fusable(x, self.weight):
            return linear(x, self.weight, self.bias, self.activation)
        return _TORCH_ACTIVATIONS[self.activation](F.linear(x, self.weight, self.bias))

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation!r}"


def _rows_fit(x: torch.Tensor, normalized_shape) -> bool:
    return x.is_cuda and len(normalized_shape) == 1 and 1 <= x.shape[-1] <= MAX_NORM_N


class RMSNorm(torch.nn.RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _rows_fit(x, self.normalized_shape):
            return super().forward(x)
        return rms_norm(x, self.weight, self.eps if self.eps is not None else DEFAULT_RMS_EPS)


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _rows_fit(x, self.normalized_shape):
            return super().forward(x)
        return layer_norm_fn(x, self.weight, self.bias, self.eps)


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if (not logits.is_cuda or logits.dim() != 2 or target.dim() != 1 or target.is_floating_point()
                or self.weight is not None):
            return super().forward(logits, target)
        return cross_entropy_loss(logits, target, self.ignore_index, self.reduction, self.label_smoothing)
