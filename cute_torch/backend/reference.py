"""The backend's graphs without a GPU: each cute::pointwise and cute::gemm call evaluated on CPU
in torch (pointwise/dtypes.py `reference`, op by op; a GEMM's product in fp32). The CPU tests
and examples/mlp_block.py use it to check that a rewritten graph computes what the original one
did, forward and backward."""

from __future__ import annotations

import re

import torch
import torch.fx as fx
from torch._functorch.aot_autograd import make_boxed_func

from ..pointwise.dtypes import reference
from . import aot_backend, rewrite_graph
from .options import Options


class ReferenceInterpreter(fx.Interpreter):
    """Runs a rewritten graph; cute::pointwise(.multi) calls evaluate their expressions."""

    def call_function(self, target, args, kwargs):
        if target is torch.ops.cute.pointwise.default:
            expr, inputs, dtype = args
            return reference(expr, inputs).to(dtype).contiguous()   # the op's outputs are contiguous
        if target is torch.ops.cute.pointwise.multi:
            exprs, inputs, dtypes = args
            return [reference(e, inputs).to(d).contiguous() for e, d in zip(exprs, dtypes)]
        if target is torch.ops.cute.gemm.default:
            a, b, epilogue, inputs, dtype = args
            return gemm_reference(a, b, epilogue, inputs, dtype)
        if target is torch.ops.cute.gemm.multi:
            a, b, epilogues, inputs, dtypes = args
            return [gemm_reference(a, b, e, inputs, d) for e, d in zip(epilogues, dtypes or [None] * len(epilogues))]
        return super().call_function(target, args, kwargs)


def gemm_reference(a, b, epilogue: str, inputs: list, dtype=None) -> torch.Tensor:
    """cute::gemm in torch: the fp32 product, the epilogue with `acc` as one more input."""
    acc = torch.matmul(a.float(), b.float())
    expr = re.sub(r"\bacc\b", f"x{len(inputs)}", epilogue)
    return reference(expr, list(inputs) + [acc]).to(dtype or a.dtype).contiguous()


def reference_backend(options: Options | None = None, seen: list | None = None):
    """A torch.compile backend: the cute backend's AOTAutograd and rewrite (CPU tensors admitted),
    the graphs run by ReferenceInterpreter. `seen` collects (kind, graph module, rewrite result)."""
    options = options or Options(devices=("cpu",))

    def make_compiler(kind):
        def compile_graph(gm, example_inputs):
            result = rewrite_graph(gm, example_inputs, options, kind)
            if seen is not None:
                seen.append((kind, gm, result))
            return make_boxed_func(ReferenceInterpreter(gm).run)
        return compile_graph
    return aot_backend(make_compiler)
