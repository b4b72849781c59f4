"""The backend's options: torch.compile(m, backend="cute", options={...})."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from ..env import knobs

FALLBACKS = ("aten", "inductor")


@dataclass(frozen=True)
class Options:
    fallback: str = "aten"        # what runs the rest of the graph: ATen ops, or Inductor
    strict: bool = False          # a region whose kernel fails to build raises instead of staying ATen
    debug_dir: str | None = None  # each graph before and after the rewrite, and its regions, as files
    log_graphs: bool = False      # print the same to stderr (also CUTE_TORCH_LOG_GRAPHS=1)
    devices: tuple = ("cuda",)    # device types whose tensors are fused (tests add "cpu")
    check_builds: bool = True     # build each region's kernel at compile time (fallback on failure)
    gemm: bool = True             # matmuls take their pointwise epilogue (cute::gemm, backend/gemm.py)
    rows: bool = True             # softmax, the norms, cross-entropy and column sums run the row kernels
    cuda_graphs: bool = False     # replay the graphs as CUDA graphs (as mode="reduce-overhead"; cuda_graphs.py)
    gemm_routes: str | None = None  # the table of plain matmuls run as cute::gemm (None: the installed
                                    # backend/gemm_routes.json; "": none, every plain matmul stays ATen)

    @classmethod
    def parse(cls, options: dict | None) -> "Options":
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"cute backend: unknown option(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(sorted(known))}")
        if options.get("fallback", "aten") not in FALLBACKS:
            raise ValueError(f"cute backend: option 'fallback' must be one of {FALLBACKS}, "
                             f"got {options['fallback']!r}")
        routes = options.get("gemm_routes")
        if routes not in (None, "") and not (isinstance(routes, str) and os.path.isfile(routes)):
            raise ValueError(f"cute backend: option 'gemm_routes' is the path of a table file "
                             f"(benchmarks/gemm_routes.py --write), \"\" for none or None for the installed one; "
                             f"got {routes!r}, which is not a file")
        if "devices" in options:
            options["devices"] = tuple(options["devices"])
        if knobs().log_graphs:
            options.setdefault("log_graphs", True)
        return cls(**options)
