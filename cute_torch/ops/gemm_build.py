"""The Python side of a cute::gemm cache miss (csrc/torch/Gemm.cpp): compile the library GEMM
(kernels/gemm_sm90.py, or kernels/gemm_sm80.py before Hopper and when CUTE_TORCH_GEMM_KERNEL=sm80)
for the operands' views and say how the C++ side fills its arguments.

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

SEPARATOR = "\x1e"  # between the epilogues of cute::gemm.multi (OpCommon.h's kExprSeparator)
POINTER, EXTENT, STRIDE, SM_COUNT = 0, 1, 2, 3


def device_facts(device: int) -> tuple:
    """(SM count, GEMM kernel family: 90 or 80, fast memory: 1 or 0) of a device (OpCommon.h's
    DeviceFacts; fast memory as kernels/row_reduce.py's fast_memory)."""
    from cute_torch.env import knobs
    from cute_torch.kernels.row_reduce import fast_memory
    props = torch.cuda.get_device_properties(device)
    ampere = props.major < 9 or knobs().gemm_kernel == "sm80"
    return props.multi_processor_count, 80 if ampere else 90, int(fast_memory(device))


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


def build(epilogues: str, outputs: int, views: str, tile_n: int, device: int, family: int = 90,
          schedule: str = "", arch: str | None = None):
    """(host entry address, runtime address, *recipe, the compiled function that keeps both
    alive) for cute::gemm's C++ cache. `family` picks the kernels (90 or 80); `schedule` is
    Gemm.cpp's chooseSchedule: "" cooperative, else "p" (ping-pong), "h" (ping-pong over 64-row
    tiles) or "c" (cooperative) and
    per epilogue input whether it is staged ("p01", "c01"); `arch` (tests without a GPU)
    overrides the device's."""
    args = [_view(text, device) for text in views.split("|")]
    exprs = tuple(epilogues.split(SEPARATOR))
    if len(exprs) != outputs:
        raise ValueError(f"cute::gemm: {outputs} outputs but {len(exprs)} epilogues")
    input_dtypes = tuple(text.split(";")[0] for text in views.split("|")[2 + outputs:])
    options = {"arch": arch} if arch else None
    inputs = args[2 + outputs:]
    if family == 80:
        from cute_torch.kernels import gemm_sm80
        capability = torch.cuda.get_device_capability(device) if arch is None else (int(arch[3]), int(arch[4]))
        smem = gemm_sm80.SMEM_BYTES.get(capability, 99 * 1024)
        fits = gemm_sm80._c_bytes(tile_n) <= smem          # else the 256 of Gemm.cpp's rule is 128 here
        config = gemm_sm80.choose_config(0, 0, 1, 1, smem, tile_n if fits else 128)
        n = args[2].shape[1]
        vectors = tuple(gemm_sm80.reads_vectors(arg.stride, n, arg.alignment) for arg in inputs)
        compiled = gemm_sm80._gemm_host.compile(args[0], args[1], config, exprs, input_dtypes, vectors, *args[2:],
                                                options=options)
        recipe = _slots(0, args[0]) + _slots(1, args[1])
    else:
        from cute_torch.kernels.gemm_sm90 import Config, _gemm_host, reads_pairs
        input_pairs = tuple(reads_pairs(arg.stride) for arg in inputs)
        sms = device_facts(device)[0] if arch is None else 132
        staged = tuple(flag == "1" for flag in schedule[1:])
        config = Config(tile_n, pingpong=schedule[:1] in ("p", "h"), staged=staged if any(staged) else (),
                        tile_m=64 if schedule.startswith("h") else 128)
        compiled = _gemm_host.compile(args[0], args[1], sms, config, exprs, input_dtypes, input_pairs,
                                      *args[2:], options=options)
        recipe = _slots(0, args[0]) + _slots(1, args[1]) + [SM_COUNT * 1000]
    for i, arg in enumerate(args[2:], start=2):
        recipe += _slots(i, arg)
    entry = compiled.host_entry()
    return (entry.address, entry.runtime, *recipe, compiled)
