"""Host time per call of the ops a torch.compile(backend="cute") graph runs, and of the views
around them, below autograd as the backend runs its graphs (issue 17).

    python benchmarks/op_host_time.py [--calls 100] [--repeats 7]

Small tensors (64 x 2048 bf16, a 2048-wide weight) so that the GPU never limits: each row is the
median over `repeats` of (wall time of `calls` back-to-back calls and a synchronize) / calls
(timing.per_call_us). The view rows are what backend/views.py trades: an ATen view op through the dispatcher
against `_reinterpret_tensor` (what Inductor's generated code and the backend's ATen graphs call
for a view of static shape). The cute rows are the C++ ops with their Python entry
(torch.ops.cute.X.default) and through their short C entries (registration.short_call, what the
backend's graphs and cute_torch.ops call).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from torch._C._dynamo.guards import _empty_strided_cuda, _reinterpret_tensor  # noqa: E402

import cute_torch.ops  # noqa: E402
from timing import per_call_us  # noqa: E402


def _cases() -> dict:
    aten, cute = torch.ops.aten, torch.ops.cute
    bf = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 2048, device="cuda", generator=g).to(bf)
    w = torch.randn(2048, device="cuda", generator=g).to(bf)
    weight = torch.randn(2048, 2048, device="cuda", generator=g).to(bf)
    bias = torch.randn(2048, device="cuda", generator=g).to(bf)
    wt, x3 = weight.permute(1, 0), x.view(8, 8, 2048)
    fast = cute_torch.ops.registration.fast_pointwise
    short = cute_torch.ops.registration.short_call
    return {
        "aten.view.default": lambda: aten.view.default(x, [8, 8, 2048]),
        "aten.permute.default": lambda: aten.permute.default(weight, [1, 0]),
        "aten.reshape.default": lambda: aten.reshape.default(x3, [-1, 2048]),
        "_reinterpret_tensor": lambda: _reinterpret_tensor(x, (8, 8, 2048), (16384, 2048, 1), 0),
        "aten.empty.memory_format": lambda: aten.empty.memory_format([64, 2048], dtype=bf, device=x.device),
        "_empty_strided_cuda": lambda: _empty_strided_cuda((64, 2048), (2048, 1), bf),
        "aten.mm.default": lambda: aten.mm.default(x, wt),
        "aten.addmm.default": lambda: aten.addmm.default(bias, x, wt),
        "cute.gemm (bias)": lambda: cute.gemm.default(x, wt, "(acc + x0)", [bias], bf),
        "cute.gemm.multi (2 outputs)": lambda: cute.gemm.multi(x, wt, ["gelu_tanh((acc + x0))", "(acc + x0)"],
                                                               [bias], [bf, bf]),
        "cute.layer_norm (RMSNorm)": lambda: cute.layer_norm.default(x, w, None, None, 1e-6, True),
        "cute.pointwise": lambda: cute.pointwise.default("(x0 + x1)", [x, x], bf),
        "cute.pointwise, short C entry": lambda: fast("(x0 + x1)", (x, x), bf),
        "cute.pointwise.multi": lambda: cute.pointwise.multi(["(x0 + x1)", "(x0 * x1)"], [x, x], [bf, bf]),
        "cute.column_sum": lambda: cute.column_sum.default(x),
        "cute.gemm (bias), short entry": lambda: short(cute.gemm.default)(x, wt, "(acc + x0)", [bias], bf),
        "cute.gemm.multi, short entry": lambda: short(cute.gemm.multi)(x, wt, ["gelu_tanh((acc + x0))", "(acc + x0)"],
                                                                         [bias], [bf, bf]),
        "cute.layer_norm, short entry": lambda: short(cute.layer_norm.default)(x, w, None, None, 1e-6, True),
        "cute.pointwise.multi, short entry": lambda: short(cute.pointwise.multi)(["(x0 + x1)", "(x0 * x1)"], [x, x],
                                                                                 [bf, bf]),
        "cute.column_sum, short entry": lambda: short(cute.column_sum.default)(x),
        "aten.mean.default": lambda: aten.mean.default(x),
        "aten.add.Tensor": lambda: aten.add.Tensor(x, x),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; us of host time per call, median of "
          f"{args.repeats} x {args.calls} calls")
    with torch._C._AutoDispatchBelowAutograd():
        for name, fn in _cases().items():
            print(f"| {name} | {per_call_us(fn, args.calls, args.repeats):.2f} |", flush=True)


if __name__ == "__main__":
    main()
