"""Matmuls with their epilogues: after the pointwise fusion, a cute::pointwise(.multi) call that
reads the result of an mm, bmm or addmm of its own shape becomes one cute::gemm(.multi) whose
epilogues are the call's expressions, the matmul's value spelled `acc`.

    mm = aten.mm(x, t(w))                      gemm = cute.gemm(x, t(w),
    y = cute.pointwise("gelu(x0 + x1)",   ->                     "gelu(acc + x0)", [b], bf16)
                       [mm, b], bf16)

- addmm(bias, a, b) (alpha = beta = 1) is `acc + bias`, the bias one more epilogue input.
- A matmul whose value is also needed elsewhere (saved for backward, another op) gets one more
  epilogue output, the value itself: the pre-activation of a training graph costs no extra pass.
- A matmul read through a view to the pointwise shape (F.linear on (B, T, in) inputs: addmm on
  (B * T, in), then view to (B, T, out)) is fused when every other input of the call is a
  broadcast row (its sizes but the last are 1) or has the call's shape (it is then reshaped to
  the matmul's rows); the outputs are viewed back.
- Conditions: bf16 or fp16 operands of one dtype, bf16 or fp16 outputs, rows of the output and
  K multiples of 16 bytes, at most MAX_OUTPUTS outputs, a bmm's sizes under BATCHED_LIMIT, no
  other input computed from the matmul, a device type the options allow, and on CUDA an sm_90
  GPU (the backend fuses into the Hopper kernels only). Anything else stays as it was.
"""

from __future__ import annotations

import operator
import re

import torch
import torch.fx as fx

from .fusion import fake_value, same_shape
from .options import Options
from .rewrite import stable_topological_sort

aten = torch.ops.aten
MAX_OUTPUTS = 4                      # cute::gemm.multi's limit
BATCHED_LIMIT = 1 << 19              # a batched GEMM's M, N and K (kernels/gemm_sm90.py)
MATMULS = (aten.mm.default, aten.bmm.default, aten.addmm.default)
ROW_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
HALF = (torch.bfloat16, torch.float16)
POINTWISE = (torch.ops.cute.pointwise.default, torch.ops.cute.pointwise.multi)


def _matmul_of(node: fx.Node):
    """(matmul node, view node or None) when `node` is a matmul or a row view of one."""
    if node.op == "call_function" and node.target in MATMULS:
        return node, None
    if node.op == "call_function" and node.target in ROW_VIEWS and isinstance(node.args[0], fx.Node) \
            and node.args[0].target in (aten.mm.default, aten.addmm.default):
        return node.args[0], node
    return None, None


def device_ok(value, options: Options) -> bool:
    device = value.device
    if device.type not in options.devices:
        return False
    return device.type != "cuda" or torch.cuda.get_device_capability(device) == (9, 0)


def _operands(mm: fx.Node):
    """(a, b, bias or None) of a fusible matmul node."""
    if mm.target is aten.addmm.default:
        if mm.kwargs.get("beta", 1) != 1 or mm.kwargs.get("alpha", 1) != 1:
            return None
        bias, a, b = mm.args[:3]
        return a, b, bias
    return mm.args[0], mm.args[1], None


def _renumbered(expr: str, mapping: dict) -> str:
    return re.sub(r"\bx(\d+)\b", lambda m: mapping[int(m.group(1))], expr)


def _depends_on(node: fx.Node, target: fx.Node, order: dict) -> bool:
    """Whether `node` is computed from `target` (walking back no further than `target`)."""
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if current is target:
            return True
        if current in seen or order.get(current, -1) < order[target]:
            continue
        seen.add(current)
        stack.extend(current.all_input_nodes)
    return False


def _has_extra(call: fx.Node, mm: fx.Node, view) -> bool:
    """Whether the matmul's value is needed besides this call (then the GEMM writes it too)."""
    return any(u is not call and u is not view for u in mm.users) or (
        view is not None and any(u is not call for u in view.users))


def _fusible(call: fx.Node, index: int, options: Options, order: dict):
    """The plan for fusing input `index` of a pointwise call, or None."""
    source = call.args[1][index]
    if not isinstance(source, fx.Node):
        return None
    mm, view = _matmul_of(source)
    if mm is None:
        return None
    operands = _operands(mm)
    if operands is None:
        return None
    a, b, bias = operands
    values = [fake_value(n) for n in (a, b, mm, source)]
    if any(v is None for v in values) or values[0].dtype != values[1].dtype or values[0].dtype not in HALF:
        return None
    outs = fake_value(call)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if any(o is None or o.dtype not in HALF for o in outs) or not device_ok(values[0], options):
        return None
    if len(outs) + _has_extra(call, mm, view) > MAX_OUTPUTS:
        return None
    shape = outs[0].shape
    k, n = values[0].shape[-1], values[2].shape[-1]
    if not same_shape(values[3].shape, shape):
        return None
    per_16_bytes = 16 // values[0].element_size()   # TMA reads rows of K and writes rows of N
    if not (isinstance(n, int) and n % per_16_bytes == 0 and isinstance(k, int) and k % per_16_bytes == 0):
        return None
    if mm.target is aten.bmm.default and not all(isinstance(s, int) and s < BATCHED_LIMIT
                                                 for s in values[2].shape[1:] + values[0].shape[-1:]):
        return None
    others = [x for i, x in enumerate(call.args[1]) if i != index]
    if any(isinstance(x, fx.Node) and (fake_value(x) is None or _depends_on(x, mm, order)) for x in others):
        return None   # an input computed from the matmul (a softmax's max): the GEMM cannot read it
    if view is not None:  # the call reads rows through a view that only splits the rows
        if not same_shape(values[3].shape[-1:], values[2].shape[-1:]):
            return None
        for x in others:
            v = fake_value(x)
            rows_broadcast = all(s == 1 for s in v.shape[:-1]) and v.shape[-1] in (1, n)
            if not (rows_broadcast or same_shape(v.shape, shape)):
                return None
    return mm, view, a, b, bias


def _fuse(graph: fx.Graph, call: fx.Node, index: int, plan, fake_mode) -> str:
    mm, view, a, b, bias = plan
    multi = call.target is torch.ops.cute.pointwise.multi
    exprs = list(call.args[0]) if multi else [call.args[0]]
    outs = fake_value(call)
    dtypes = [o.dtype for o in (outs if multi else [outs])]   # what the call computes (out_dtype may be None)
    inputs = list(call.args[1])
    # x{index} becomes acc (plus the bias of an addmm); the other inputs keep their order.
    others = [x for i, x in enumerate(inputs) if i != index]
    mapping = {i: f"x{i - (i > index)}" for i in range(len(inputs)) if i != index}
    acc = "acc"
    if bias is not None:
        acc = f"(acc + x{len(others)})"
        others.append(bias)
    mapping[index] = acc
    epilogues = [_renumbered(e, mapping) for e in exprs]
    # The matmul's value where it is needed besides this call: one more output.
    extra = _has_extra(call, mm, view)
    if extra:
        epilogues.append(acc)
        dtypes.append(fake_value(mm).dtype)
    with graph.inserting_before(call):
        rows = []
        n = fake_value(mm).shape[-1]
        for x in others:
            v = fake_value(x)
            if view is not None and x is not bias and v.dim() > 1:
                # Through the row view: an input of the call's shape as rows, a broadcast row as (N,).
                full = not all(s == 1 for s in v.shape[:-1])
                x = graph.call_function(aten.reshape.default, (x, [-1, n] if full else [v.shape[-1]]))
                if fake_mode is not None:
                    with fake_mode:
                        x.meta["val"] = v.reshape(*x.args[1])
            rows.append(x)
        if len(epilogues) == 1:
            gemm = graph.call_function(torch.ops.cute.gemm.default, (a, b, epilogues[0], rows, dtypes[0]))
            results = [gemm]
        else:
            gemm = graph.call_function(torch.ops.cute.gemm.multi, (a, b, epilogues, rows, dtypes))
            results = [graph.call_function(operator.getitem, (gemm, i)) for i in range(len(epilogues))]
        if fake_mode is not None:
            with fake_mode:
                values = gemm.target(fake_value(a), fake_value(b), gemm.args[2],
                                     [fake_value(x) for x in rows], gemm.args[4])
            gemm.meta["val"] = values
            if len(results) > 1:
                for r, v in zip(results, values):
                    r.meta["val"] = v
        outputs = results
        if view is not None:  # back to the call's shape
            shaped = []
            for r, d in zip(results[:len(exprs)], dtypes):
                node = graph.call_function(aten.view.default, (r, list(view.args[1])))
                if "val" in r.meta:
                    node.meta["val"] = r.meta["val"].view(fake_value(view).shape)
                shaped.append(node)
            outputs = shaped + results[len(exprs):]
    if multi:
        for user in list(call.users):
            if user.target is operator.getitem:
                user.replace_all_uses_with(outputs[user.args[1]])
    else:
        call.replace_all_uses_with(outputs[0])
    if extra:  # every other reader of the matmul (and of its view) reads the extra output
        mm.replace_all_uses_with(results[-1])
    return f"{mm.name} ({mm.target.__name__.split('.')[0]}) + [{' ; '.join(exprs)}]"


def fuse_gemms(gm: fx.GraphModule, fake_mode, options: Options) -> dict:
    """Rewrites `gm` in place; returns {"fused": [], "fallback": [], "gemms": [descriptions]}."""
    graph = gm.graph
    done = []
    if not options.gemm:
        return {"fused": [], "fallback": [], "gemms": done}
    for call in list(graph.nodes):
        if call.op != "call_function" or call.target not in POINTWISE:
            continue
        order = {node: i for i, node in enumerate(graph.nodes)}
        for index in range(len(call.args[1])):
            plan = _fusible(call, index, options, order)
            if plan is not None:
                done.append(_fuse(graph, call, index, plan, fake_mode))
                break
    if done:
        stable_topological_sort(graph)   # the extra output may have readers placed before the call
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return {"fused": [], "fallback": [], "gemms": done}
