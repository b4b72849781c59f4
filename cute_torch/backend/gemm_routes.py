"""Plain matmuls (no pointwise work to take as an epilogue) as cute::gemm where ours measured at
least as fast as cuBLAS for their shape class, else ATen.

The table is gemm_routes.json beside this file, filled by `python benchmarks/gemm_routes.py
--write` on each device: per device name, per shape class, the median ratio cuBLAS time / ours
over the shapes of that class it measured. A class is the operands' dtype, which of their modes
is contiguous (a: "k" or "m", b: "k" or "n"; "kk" is F.linear's x @ W^T, "kn" a backward's
dY @ W, "mn" its dY^T @ X) and M, N and K each rounded to the nearest power of two (in log
scale: 6144 counts as 8192, 5504 as 4096). A matmul is routed when its class's ratio is at
least 1.0; an unmeasured class, another device, a symbolic size, an operand TMA cannot read in
place (it would be copied first, which the table did not measure) or an aten.addmm whose
alpha or beta is not 1 stays ATen. addmm's bias becomes the epilogue `acc + x0` (the table
measures `acc` alone; a bias epilogue cost 0.5 % on an H200, benchmarks/RESULTS.md).
"""

from __future__ import annotations

import functools
import json
import math
import pathlib

import torch
import torch.fx as fx

from .fusion import fake_value
from .gemm import BATCHED_LIMIT, device_ok
from .options import Options

aten = torch.ops.aten
TABLE = pathlib.Path(__file__).with_name("gemm_routes.json")
DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
PLAIN = (aten.mm.default, aten.addmm.default, aten.bmm.default)


def rounded(size: int) -> int:
    """The power of two nearest `size` in log scale."""
    return 1 << max(0, round(math.log2(max(size, 1))))


def shape_class(dtype: torch.dtype, layout: str, m: int, n: int, k: int) -> str:
    """The table's key of a matmul: e.g. "bf16 kn 8192x2048x8192"."""
    return f"{DTYPES[dtype]} {layout} {rounded(m)}x{rounded(n)}x{rounded(k)}"


def layout_of(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """"kk", "kn", "mk" or "mn": which mode of a (.., M, K) and b (.., K, N) is contiguous,
    when each operand has one and TMA can read it in place (16-byte aligned strides and offset)."""
    def contiguous_mode(t, row_letter, col_letter):
        size = t.element_size()
        strides = t.stride()[-2:]
        if (t.storage_offset() * size) % 16 or any(s != 1 and (s * size) % 16 for s in t.stride()):
            return None
        if strides[1] == 1:
            return col_letter
        if strides[0] == 1:
            return row_letter
        return None
    a_mode, b_mode = contiguous_mode(a, "m", "k"), contiguous_mode(b, "k", "n")
    return None if a_mode is None or b_mode is None else a_mode + b_mode


@functools.lru_cache(maxsize=8)
def load_table(path: str) -> dict:
    """{device name: {class: ratio}} from a table file ({} when there is none)."""
    try:
        text = pathlib.Path(path).read_text()
    except FileNotFoundError:
        return {}
    try:
        return {device: {key: float(entry["ratio"]) for key, entry in facts["classes"].items()}
                for device, facts in json.loads(text).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"cute backend: {path} is not a gemm_routes table ({{device: {{\"classes\": {{class: "
                         f"{{\"ratio\": r}}}}}}}} as benchmarks/gemm_routes.py --write makes): "
                         f"{type(error).__name__}: {error}") from error


def device_name(device: torch.device) -> str:
    """The table's device key: the CUDA device's name ("NVIDIA H200"), or the device type."""
    if device.type != "cuda":
        return device.type
    return torch.cuda.get_device_name(device.index if device.index is not None else torch.cuda.current_device())


def _route(mm: fx.Node, options: Options, table: dict) -> tuple | None:
    """(a, b, bias or None, class, ratio) of a matmul the table sends to cute::gemm, or None."""
    if mm.target is aten.addmm.default and (mm.kwargs.get("beta", 1) != 1 or mm.kwargs.get("alpha", 1) != 1):
        return None
    bias, (a, b) = (mm.args[0], mm.args[1:3]) if mm.target is aten.addmm.default else (None, mm.args[:2])
    values = [fake_value(n) for n in (a, b, mm)]
    if any(v is None for v in values) or bias is not None and fake_value(bias) is None:
        return None
    va, vb, out = values
    if va.dtype not in DTYPES or vb.dtype != va.dtype or out.dtype != va.dtype or not device_ok(va, options):
        return None
    sizes = (*out.shape, va.shape[-1])
    if not all(isinstance(s, int) for s in sizes + tuple(va.stride()) + tuple(vb.stride())):
        return None   # a symbolic size: the class is not known until run time
    if (sizes[-2] * va.element_size()) % 16 or len(sizes) == 4 and max(sizes[1:]) >= BATCHED_LIMIT or min(sizes) == 0:
        return None   # output rows TMA cannot store, a batched GEMM past the kernel's sizes, or nothing to do
    layout = layout_of(va, vb)
    if layout is None:
        return None
    key = shape_class(va.dtype, layout, *sizes[-3:])
    ratio = table.get(device_name(va.device), {}).get(key)
    if ratio is None or ratio < 1.0:
        return None
    return a, b, bias, key, ratio


def route_plain_gemms(gm: fx.GraphModule, fake_mode, options: Options) -> dict:
    """Rewrites `gm` in place (after backend/gemm.py has fused the matmuls with epilogues);
    returns {"routed": [descriptions of the routed matmuls]}."""
    table = load_table(str(options.gemm_routes or TABLE)) if options.gemm and options.gemm_routes != "" else {}
    done = []
    for mm in list(gm.graph.nodes):
        if not table or mm.op != "call_function" or mm.target not in PLAIN:
            continue
        route = _route(mm, options, table)
        if route is None:
            continue
        a, b, bias, key, ratio = route
        epilogue, inputs = ("acc", []) if bias is None else ("acc + x0", [bias])
        with gm.graph.inserting_before(mm):
            gemm = gm.graph.call_function(torch.ops.cute.gemm.default, (a, b, epilogue, inputs, fake_value(mm).dtype))
        gemm.meta["val"] = fake_value(mm)
        mm.replace_all_uses_with(gemm)
        gm.graph.erase_node(mm)
        done.append(f"{mm.name} ({mm.target.__name__.split('.')[0]}) plain, class {key}: {ratio:.3f}x cuBLAS")
    if done:
        gm.graph.lint()
        gm.recompile()
    return {"routed": done}
