"""Rewrites that make a functionalized in-place update fusible, run before the pointwise
fusion (fusion.py): a compiled optimizer's step arrives as functional copies and powers of a
0-dim step count, which the expression language does not spell as they are."""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from ..pointwise.dtypes import SUPPORTED_DTYPES
from .fusion import fake_value, same_shape


def copies_as_casts(graph: fx.Graph, devices: tuple = ("cuda",)) -> int:
    """Rewrites each functional `aten.copy(self, src)` whose operands have one shape, on one
    device of `devices`, in supported dtypes, with `self` contiguous, as
    `convert_element_type(src, self.dtype)`: the value is src's, in self's dtype and
    (contiguous) layout, so the copy fuses like a cast. Functionalized in-place updates (a
    compiled optimizer's step) are full of these. Returns the count."""
    count = 0
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.copy.default or len(node.args) < 2:
            continue
        dst, src = (fake_value(a) for a in node.args[:2])
        if not (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.device == src.device
                and dst.device.type in devices and {dst.dtype, src.dtype} <= set(SUPPORTED_DTYPES)
                and same_shape(dst.shape, src.shape) and dst.is_contiguous()):
            continue
        with graph.inserting_before(node):
            cast = graph.call_function(torch.ops.prims.convert_element_type.default, (node.args[1], dst.dtype))
        cast.meta = dict(node.meta)
        node.replace_all_uses_with(cast)
        graph.erase_node(node)
        count += 1
    return count


def powers_as_exponentials(graph: fx.Graph, devices: tuple = ("cuda",)) -> int:
    """Rewrites each `aten.pow.Scalar(base, e)` with a positive number `base` and a 0-dim
    float32 tensor `e` on one of `devices` as `exp(e * log(base))`, which fuses: an
    optimizer's bias corrections (0.9 ** step) then join the update's kernel instead of
    launching two kernels of one element each per parameter. Only 0-dim exponents: there the
    product's rounding costs under 1e-6 relative for |e * log(base)| up to 10, and the value
    is computed once a thread. Returns the count."""
    count = 0
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.pow.Scalar or len(node.args) != 2 or node.kwargs:
            continue
        base, exponent = node.args
        e = fake_value(exponent)
        if not (isinstance(base, (int, float)) and not isinstance(base, bool) and base > 0
                and isinstance(e, torch.Tensor) and e.dim() == 0 and e.dtype == torch.float32
                and e.device.type in devices):
            continue
        with graph.inserting_before(node):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (exponent, math.log(base)))
            power = graph.call_function(torch.ops.aten.exp.default, (scaled,))
        scaled.meta = dict(node.meta)
        power.meta = dict(node.meta)
        node.replace_all_uses_with(power)
        graph.erase_node(node)
        count += 1
    return count
