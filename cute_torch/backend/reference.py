"""The backend's graphs without a GPU: each cute::pointwise, cute::gemm and row-op call (softmax,
layer_norm, cross_entropy, column_sum and their backwards: ROW_REFERENCES) evaluated on CPU
in torch (pointwise/dtypes.py `reference`, op by op; a GEMM's product in fp32). The CPU tests
and examples/mlp_block.py use it to check that a rewritten graph computes what the original one
did, forward and backward."""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch._functorch.aot_autograd import make_boxed_func

from ..ops.registration import foreach_segments
from ..pointwise.dtypes import reference
from . import IN_PLACE, MERGED, aot_backend, rewrite_graph
from .horizontal import merge_in_place
from .in_place import write_in_place
from .torch_calls import replace_calls
from .options import Options
from .report import emit_runtime


class ReferenceInterpreter(fx.Interpreter):
    """Runs a rewritten graph; cute::pointwise(.multi) calls evaluate their expressions, cute::gemm
    and the row ops their references."""

    def call_function(self, target, args, kwargs):
        if target is torch.ops.cute.pointwise.default:
            expr, inputs, dtype = args
            return reference(expr, inputs).to(dtype).contiguous()   # the op's outputs are contiguous
        if target is torch.ops.cute.pointwise.multi:
            exprs, inputs, dtypes = args
            return [reference(e, inputs).to(d).contiguous() for e, d in zip(exprs, dtypes)]
        if target is torch.ops.cute.pointwise.into:     # in_place.py: every result computed, then written
            exprs, inputs, outs = args
            for value, out in zip([reference(e, inputs).to(o.dtype) for e, o in zip(exprs, outs)], outs):
                out.copy_(value)
            return None
        if target is torch.ops.cute.pointwise.foreach_into:    # horizontal.py: independent segments
            exprs, inputs, outs = args
            for segment in foreach_segments(exprs, inputs, outs):
                self.call_function(torch.ops.cute.pointwise.into, (exprs, *segment), {})
            return None
        if target is torch.ops.cute.gemm.default:
            a, b, epilogue, inputs, dtype = args
            return gemm_reference(a, b, epilogue, inputs, dtype)
        if target is torch.ops.cute.gemm.multi:
            a, b, epilogues, inputs, dtypes = args
            return [gemm_reference(a, b, e, inputs, d) for e, d in zip(epilogues, dtypes or [None] * len(epilogues))]
        if target in ROW_REFERENCES:
            return ROW_REFERENCES[target](*args, **kwargs)
        return super().call_function(target, args, kwargs)


def gemm_reference(a, b, epilogue: str, inputs: list, dtype=None) -> torch.Tensor:
    """cute::gemm in torch: the fp32 product, the epilogue with `acc` as one more input (a gated
    one: `gate` and `up`, the halves of each 16-column group)."""
    from cute_torch.kernels.gemm_common import accumulators_as_inputs, is_gated, split_gated
    acc = torch.matmul(a.float(), b.float())
    accs = split_gated(acc) if is_gated([epilogue]) else (acc,)
    expr = accumulators_as_inputs(epilogue, len(inputs))
    return reference(expr, list(inputs) + list(accs)).to(dtype or a.dtype).contiguous()


def _softmax(x, log=False):
    return (torch.log_softmax if log else torch.softmax)(x.float(), -1).to(x.dtype)


def _softmax_backward(y, dy, log=False):
    y32, dy32 = y.float(), dy.float()
    dx = dy32 - torch.exp(y32) * dy32.sum(-1, keepdim=True) if log else \
        y32 * (dy32 - (dy32 * y32).sum(-1, keepdim=True))
    return dx.to(dy.dtype)


def _layer_norm(x, weight, bias, residual, eps, rms):
    s = x.float() + (residual.float() if residual is not None else 0)
    mean = torch.zeros_like(s[..., 0]) if rms else s.mean(-1)
    var = s.pow(2).mean(-1) if rms else (s - mean[..., None]).pow(2).mean(-1)
    rstd = torch.rsqrt(var + eps)
    y = (s - mean[..., None]) * rstd[..., None]
    y = y * weight.float() if weight is not None else y
    y = y + bias.float() if bias is not None else y
    empty = x.new_empty((0,))
    return (y.to(x.dtype), empty if residual is None else s.to(residual.dtype), rstd.reshape(-1),
            empty.float() if rms else mean.reshape(-1))


def _layer_norm_backward(x, weight, dy, rstd, mean, weight_grad, bias_grad):
    n = x.shape[-1]
    rstd = rstd.reshape(x.shape[:-1] + (1,))
    x_hat = (x.float() - (mean.reshape(rstd.shape) if mean.numel() else 0)) * rstd
    g = dy.float() * (weight.float() if weight is not None else 1)
    c1 = (g * x_hat).sum(-1, keepdim=True) / n
    c2 = g.sum(-1, keepdim=True) / n if mean.numel() else 0
    dx = ((g - c2 - x_hat * c1) * rstd).to(x.dtype)
    rows = (dy.float() * x_hat).reshape(-1, n)
    empty = x.new_empty((0,))
    dw = rows.sum(0).to(weight.dtype) if weight_grad and weight is not None else empty
    db = dy.float().reshape(-1, n).sum(0).to(weight.dtype if weight is not None else x.dtype) if bias_grad else empty
    return dx, dw, db


def _cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    lse = torch.logsumexp(logits.float(), -1)
    picked = logits.float().gather(1, target.clamp_min(0)[:, None])[:, 0]
    loss = (1 - label_smoothing) * (lse - picked) + label_smoothing * (lse - logits.float().mean(-1))
    return torch.where(target == ignore_index, 0.0, loss), lse


def _cross_entropy_backward(logits, target, lse, dloss, ignore_index=-100, label_smoothing=0.0):
    p = torch.exp(logits.float() - lse[:, None]) - label_smoothing / logits.shape[1]
    p = p - (1 - label_smoothing) * F.one_hot(target.clamp_min(0), logits.shape[1]).float()
    scale = torch.where(target == ignore_index, 0.0, dloss.float().expand(target.shape))
    return (p * scale[:, None]).to(logits.dtype)


def _column_sum(x):
    return x.float().reshape(-1, x.shape[-1]).sum(0).to(x.dtype)


# The row ops (backend/rows.py, backend/torch_calls.py) in torch, in float32.
ROW_REFERENCES = {torch.ops.cute.softmax.default: _softmax, torch.ops.cute.softmax_backward.default: _softmax_backward,
                  torch.ops.cute.layer_norm.default: _layer_norm,
                  torch.ops.cute.layer_norm_backward.default: _layer_norm_backward,
                  torch.ops.cute.cross_entropy.default: _cross_entropy,
                  torch.ops.cute.cross_entropy_backward.default: _cross_entropy_backward,
                  torch.ops.cute.column_sum.default: _column_sum}


def reference_backend(options: Options | None = None, seen: list | None = None):
    """A torch.compile backend: the cute backend's AOTAutograd and rewrite (CPU tensors admitted),
    the graphs run by ReferenceInterpreter. `seen` collects (kind, graph module, rewrite result)."""
    options = options or Options(devices=("cpu",))

    def make_compiler(kind):
        def compile_graph(gm, example_inputs):
            result = rewrite_graph(gm, example_inputs, options, kind)
            if seen is not None:
                seen.append((kind, gm, result))
            # as the runtime of fallback="aten" does (views stay ops: the interpreter runs them)
            emit_runtime(options, kind, gm, {IN_PLACE: write_in_place(gm), MERGED: merge_in_place(gm)})
            return make_boxed_func(ReferenceInterpreter(gm).run)
        return compile_graph
    aot = aot_backend(make_compiler)

    def backend(gm, example_inputs):
        replace_calls(gm, options)
        return aot(gm, example_inputs)
    return backend
