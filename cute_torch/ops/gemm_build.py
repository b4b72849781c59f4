"""The Python side of a cute::gemm cache miss (csrc/torch/Gemm.cpp): compile the library GEMM
(kernels/gemm_sm90.py) for the operands' views and say how the C++ side fills its arguments.

C++ describes each view as "dtype;sizes;strides;alignment" (the (rows, cols[, L]) view the kernel reads:
a, b, the outputs, the epilogue inputs, in that order). Each becomes a TensorArg with a run-time
layout (mark_layout_dynamic(keep_broadcast=True), as kernels/gemm_sm90.host_arguments makes),
so one kernel serves every size with the same static pattern. The recipe lists, per argument
slot of the compiled host function, where its value comes from: kind * 1000 + view * 10 + dim,
kinds 0 the view's data pointer, 1 an extent, 2 a stride, 3 the SM count.
"""

from __future__ import annotations

import torch

from ..dsl.tensor import TensorArg, _needs_64bit, numeric_of_torch_dtype

SEPARATOR = "\x1e"  # between the epilogues of cute::gemm.multi (Gemm.cpp's kSeparator)
POINTER, EXTENT, STRIDE, SM_COUNT = 0, 1, 2, 3


def sm_count(device: int) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _view(text: str, device: int) -> TensorArg:
    dtype, sizes, strides, alignment = text.split(";")
    shape = tuple(int(s) for s in sizes.split(","))
    stride = tuple(int(s) for s in strides.split(","))
    numeric = numeric_of_torch_dtype(getattr(torch, dtype))
    arg = TensorArg.describe(numeric, shape, stride, int(alignment), device, _needs_64bit(shape, stride))
    return arg.mark_layout_dynamic(keep_broadcast=True)


def _slots(view: int, arg: TensorArg) -> list[int]:
    return ([POINTER * 1000 + view * 10] + [EXTENT * 1000 + view * 10 + d for d in sorted(arg.dynamic_shape)]
            + [STRIDE * 1000 + view * 10 + d for d in sorted(arg.dynamic_stride)])


def build(epilogues: str, outputs: int, views: str, tile_n: int, device: int, arch: str | None = None):
    """(host entry address, runtime address, *recipe, the compiled function that keeps both
    alive) for cute::gemm's C++ cache. `arch` (tests without a GPU) overrides the device's."""
    from cute_torch.kernels.gemm_sm90 import Config, _gemm_host, reads_pairs

    args = [_view(text, device) for text in views.split("|")]
    exprs = tuple(epilogues.split(SEPARATOR))
    if len(exprs) != outputs:
        raise ValueError(f"cute::gemm: {outputs} outputs but {len(exprs)} epilogues")
    input_dtypes = tuple(text.split(";")[0] for text in views.split("|")[2 + outputs:])
    input_pairs = tuple(reads_pairs(arg.stride) for arg in args[2 + outputs:])
    sms = sm_count(device) if arch is None else 132
    compiled = _gemm_host.compile(args[0], args[1], sms, Config(tile_n), exprs, input_dtypes, input_pairs, *args[2:],
                                  options={"arch": arch} if arch else None)
    recipe = _slots(0, args[0]) + _slots(1, args[1]) + [SM_COUNT * 1000]
    for i, arg in enumerate(args[2:], start=2):
        recipe += _slots(i, arg)
    entry = compiled.host_entry()
    return (entry.address, entry.runtime, *recipe, compiled)
