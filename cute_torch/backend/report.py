"""What the backend tells about each graph: CUTE_TORCH_LOG_GRAPHS=1 (stderr) and debug_dir (files),
after the rewrite (emit) and as the runtime runs it (emit_runtime)."""

from __future__ import annotations

import collections
import os
import sys

import torch.fx as fx

from .rewrite import describe


def graph_text(gm: fx.GraphModule) -> str:
    return gm.print_readable(print_output=False)


def summary(name: str, result: dict, gm: fx.GraphModule) -> str:
    """One line: what was fused and what stays ATen."""
    fused, fallback = result["fused"], result["fallback"]
    nodes = sum(len(r.nodes) for r in fused)
    multi = sum(len(r.outputs) > 1 for r in fused)
    kept = collections.Counter(str(n.target).replace("aten.", "").replace(".default", "")
                               for n in gm.graph.nodes if n.op == "call_function" and
                               not str(n.target).startswith("cute.") and n.target.__name__ != "getitem")
    kept_text = ", ".join(f"{t} x{c}" for t, c in kept.most_common(8)) or "none"
    gemms = len(result.get("gemms", []))
    gemm_text = f", {gemms} of them into a matmul's epilogue (cute::gemm)" if gemms else ""
    rows = len(result.get("rows", []))
    gemm_text += f", {rows} softmax/norm nodes to row kernels" if rows else ""
    routed = len(result.get("routed", []))
    gemm_text += f", {routed} plain matmuls to cute::gemm (gemm_routes.json)" if routed else ""
    return (f"cute backend [{name}]: {nodes} ops fused into {len(fused)} kernels ({multi} multi-output), "
            f"{len(fallback)} regions fell back to ATen{gemm_text}; ATen ops left: {kept_text}")


def regions_text(result: dict) -> str:
    lines = [f"fused: {describe(r)}" for r in result["fused"]]
    lines += [f"fallback: {describe(r)}: {type(e).__name__}: {e}" for r, e in result["fallback"]]
    lines += [f"gemm: {g}" for g in result.get("gemms", [])]
    lines += [f"rows: {r}" for r in result.get("rows", [])]
    lines += [f"routed: {r}" for r in result.get("routed", [])]
    return "\n".join(lines) + "\n"


def emit(options, name: str, before: str, gm: fx.GraphModule, result: dict) -> None:
    if not (options.log_graphs or options.debug_dir):
        return
    after, line = graph_text(gm), summary(name, result, gm)
    if options.log_graphs:
        print(f"== cute backend [{name}]: before\n{before}\n== cute backend [{name}]: after\n{after}\n{line}",
              file=sys.stderr)
    if options.debug_dir:
        os.makedirs(options.debug_dir, exist_ok=True)
        for suffix, text in (("before.py", before), ("after.py", after),
                             ("regions.txt", regions_text(result) + line + "\n")):
            with open(os.path.join(options.debug_dir, f"{name}.{suffix}"), "w") as f:
                f.write(text)


def emit_runtime(options, name: str, gm: fx.GraphModule, counts: dict) -> None:
    """The graph as the runtime runs it, after its own rewrites (`counts`: what each did, by a
    description): one line, and with debug_dir the graph as `<name>.runtime.py`."""
    if options is None or not (options.log_graphs or options.debug_dir):
        return
    line = f"cute backend [{name}]: runtime: " + ", ".join(f"{n} {what}" for what, n in counts.items())
    if options.log_graphs:
        print(line, file=sys.stderr)
    if options.debug_dir:
        os.makedirs(options.debug_dir, exist_ok=True)
        with open(os.path.join(options.debug_dir, f"{name}.runtime.py"), "w") as f:
            f.write(f"{graph_text(gm)}\n# {line}\n")
