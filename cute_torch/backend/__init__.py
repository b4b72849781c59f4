"""torch.compile(model, backend="cute"): AOTAutograd ATen graphs in, fused DSL kernels out.

    import torch
    compiled = torch.compile(model, backend="cute", options={"fallback": "aten"})
    compiled = torch.compile(model, backend="cute", mode="reduce-overhead")   # as CUDA graphs

Dynamo captures the graph; AOTAutograd (with the core ATen decompositions, so pointwise work
arrives as core ATen ops) splits it into forward and backward graphs; each graph then goes
through REWRITES, which replace matched subgraphs by torch.ops.cute.* calls; the rest runs as
ATen (fallback="aten") or is compiled by Inductor, which treats the cute ops as opaque
(fallback="inductor"). docs/backend.md has the options, the logs and how to add a pattern.

The backend is registered under the name "cute" when this module is imported, and through the
`torch_dynamo_backends` entry point of the package, so the name resolves in a fresh process.
"""

from __future__ import annotations

import functools
import itertools

import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.backends.registry import register_backend
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._guards import detect_fake_mode
from torch.fx._lazy_graph_module import _LazyGraphModule

import cute_torch.ops

from .cuda_graphs import CudaGraphs, wants_graphs
from .foreach import foreach_decompositions
from .fusion import find_regions
from .gemm import fuse_gemms
from .gemm_routes import route_plain_gemms
from .horizontal import merge_in_place
from .in_place import write_in_place
from .normalize import copies_as_casts, powers_as_exponentials
from .options import Options
from .report import emit, emit_runtime, graph_text
from .rewrite import BackendError, apply
from .rows import fuse_rows
from .torch_calls import replace_calls
from .views import reinterpret_views

__all__ = ["BackendError", "Options", "aot_backend", "cute_backend", "decompositions", "rewrite_graph"]

_graph_ids = itertools.count()


def _pointwise(gm: fx.GraphModule, fake_mode, options: Options) -> dict:
    copies_as_casts(gm.graph, options.devices)
    powers_as_exponentials(gm.graph, options.devices)
    regions = find_regions(gm.graph, options.devices)
    return apply(gm, regions, fake_mode, options.strict, options.check_builds)


# The graph rewrites, in order. A pattern that consumes pointwise ops (a norm) goes before
# "pointwise", so that the fusion sees only what is left; "gemm" takes the pointwise calls that
# read a matmul and makes the matmul's epilogue of them.
REWRITES = [("rows", fuse_rows), ("pointwise", _pointwise), ("gemm", fuse_gemms), ("routes", route_plain_gemms)]


def rewrite_graph(gm: fx.GraphModule, example_inputs, options: Options | None = None, name: str = "graph") -> dict:
    """Applies REWRITES to an ATen graph in place; returns what they did: the pointwise regions
    fused and fallen back, the matmuls that took an epilogue ("gemms"), the softmax and norm
    nodes that became row kernels ("rows"), the plain matmuls run as cute::gemm ("routed")."""
    options = options or Options()
    before = graph_text(gm) if options.log_graphs or options.debug_dir else ""
    fake_mode = detect_fake_mode(example_inputs)
    result = {"fused": [], "fallback": [], "gemms": [], "rows": [], "routed": []}
    for _, rewrite in REWRITES:
        step = rewrite(gm, fake_mode, options)
        for key in result:
            result[key] += step.get(key, [])
    emit(options, name, before, gm, result)
    return result


def _run_pointwise(expr: str, inputs: list, dtype):
    """torch.ops.cute.pointwise through the short C entry (about 2 us less host time per call)."""
    out = cute_torch.ops.registration.fast_pointwise(expr, tuple(inputs), dtype)
    return out if out is not NotImplemented else torch.ops.cute.pointwise.default(expr, inputs, dtype)


# What the runtime's own rewrites did, as report.emit_runtime names them.
IN_PLACE, MERGED = "kernels write the inputs they update (in_place.py)", "launches merge several (horizontal.py)"
VIEWS = "views as one call (views.py)"


def _runtime_forward(gm: fx.GraphModule, options: Options | None = None, name: str = "graph"):
    """The rewritten graph as fallback="aten" runs it: kernels that compute the new values of
    the graph's inputs write them there (in_place.py), such kernels of the same expressions as
    one launch (horizontal.py), views of static shape as one cheap call
    (views.py), the cute ops through their short C entries, and the generated forward called
    directly (not through nn.Module.__call__), below autograd. AOTAutograd differentiates around
    the graph, so no op in it needs its autograd kernel (C++ for our ops, Python for
    column_sum's), which would run on every call. With log_graphs or debug_dir, the graph at
    this point is reported (report.emit_runtime)."""
    counts = {IN_PLACE: write_in_place(gm), MERGED: merge_in_place(gm), VIEWS: reinterpret_views(gm)}
    emit_runtime(options, name, gm, counts)
    for node in gm.graph.nodes:
        if node.target is torch.ops.cute.pointwise.default:
            node.target = _run_pointwise
        elif isinstance(node.target, torch._ops.OpOverload) and node.target.namespace == "cute" and not node.kwargs:
            node.target = cute_torch.ops.registration.short_call(node.target)
    gm.recompile()
    if isinstance(gm, _LazyGraphModule):
        gm.real_recompile()
    forward = gm.forward

    def run(*args):
        with torch._C._AutoDispatchBelowAutograd():
            return forward(*args)
    return run


def _aten_compiler(options: Options, graph_id: int, graphs: CudaGraphs | None, kind: str):
    def compile_graph(gm: fx.GraphModule, example_inputs):
        name = f"graph{graph_id}_{kind}"
        rewrite_graph(gm, example_inputs, options, name)

        def make_run():
            return make_boxed_func(_runtime_forward(gm, options, name))
        return graphs.wrap(kind, gm, example_inputs, make_run) if graphs else make_run()
    return compile_graph


def _inductor_compiler(options: Options, graph_id: int):
    from torch._inductor.compile_fx import compile_fx_inner

    kinds = itertools.count()

    def inner_compile(gm: fx.GraphModule, example_inputs, **kwargs):
        kind = "backward" if kwargs.get("is_backward") else "forward"
        rewrite_graph(gm, example_inputs, options, f"graph{graph_id}_{kind}{next(kinds)}")
        return compile_fx_inner(gm, example_inputs, **kwargs)
    return inner_compile


def cute_backend(gm: fx.GraphModule, example_inputs, options: dict | None = None, mode: str | None = None):
    """The Dynamo backend. `options` as in options.Options; `mode` "reduce-overhead" (or
    "max-autotune"), like the option cuda_graphs, replays the graphs as CUDA graphs
    (cuda_graphs.py; torch.compile takes a mode or options, not both)."""
    parsed = Options.parse(options)
    record = wants_graphs(mode) or parsed.cuda_graphs
    graph_id = next(_graph_ids)
    replace_calls(gm, parsed)      # before AOTAutograd: the row ops' own backward formulas
    if parsed.fallback == "inductor":
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs, inner_compile=_inductor_compiler(parsed, graph_id),
                          config_patches={"triton.cudagraphs": True} if record else None)
    graphs = CudaGraphs(len(example_inputs)) if record else None
    return aot_backend(functools.partial(_aten_compiler, parsed, graph_id, graphs))(gm, example_inputs)


def aot_backend(make_compiler):
    """AOTAutograd as the backend uses it; make_compiler(kind) gives the boxed compiler of the
    "forward", "backward" and "inference" graphs."""
    return aot_autograd(
        fw_compiler=make_compiler("forward"),
        bw_compiler=make_compiler("backward"),
        inference_compiler=make_compiler("inference"),
        decompositions=decompositions(),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )


@functools.lru_cache(maxsize=1)
def decompositions() -> dict:
    """Core ATen: composite ops (silu, the activations' backward, mse_loss, ...) arrive as the
    pointwise ops they are made of. gelu is core ATen and fused as one function. Attention is
    kept whole: it is no pointwise work, and the decomposition of the CPU flash attention gives
    wrong gradients with is_causal=True in torch 2.13 (the q/k/v weights of a transformer block
    off by 10x; examples/transformer_block.py found it). The backward ops of softmax, log_softmax
    and LayerNorm are kept whole too: backend/rows.py gives them to the row kernels (and where it
    does not, one ATen kernel beats their decomposition's pointwise ops and sums). The pointwise
    foreach ops (an optimizer's default path on CUDA) split into one op per tensor (foreach.py)."""
    from torch._decomp import core_aten_decompositions
    aten = torch.ops.aten
    kept = {aten._scaled_dot_product_flash_attention_for_cpu.default, aten._softmax_backward_data.default,
            aten._log_softmax_backward_data.default, aten.native_layer_norm_backward.default}
    return {**foreach_decompositions(), **{op: fn for op, fn in core_aten_decompositions().items() if op not in kept}}


def _register() -> None:
    # When the entry point is what imports this module, Dynamo registers the function itself
    # right after (registering here too would be a duplicate).
    from torch._dynamo.backends import registry
    if "cute" not in registry._COMPILER_FNS and registry._BACKENDS.get("cute") is None:
        register_backend(name="cute")(cute_backend)


_register()
