"""Median MLIR-to-CUBIN time of the vector add in a warm process, per CUBIN backend.

    python benchmarks/compile_latency.py [--repeats 30] [--arch sm_90a]

"same" compiles the identical module each time; "fresh" adds a uniquely named device function
each time, so no cache below us (nvJitLink's, the driver's) can serve it.
Prints one table row per backend and module kind with the median and the stage breakdown the compiler reports
(timings_ms in the artifact's metadata). Target (issue 2): at most 30 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cute_torch  # noqa: E402
from cute_torch.toolkit import nvjitlink_path  # noqa: E402

SOURCE = os.path.join(os.path.dirname(__file__), "..", "tests", "mlir", "vector_add.mlir")


def fresh(text: str, i: int) -> str:
    """The same module plus a uniquely named device function, so that its PTX differs from every
    earlier one and no assembler-side cache can answer."""
    marker = "  gpu.module @kernels {\n"
    return text.replace(marker, marker + f"    llvm.func @unique_{i}() {{ llvm.return }}\n", 1)


def measure(text: str, backend: str, arch: str, repeats: int, unique: bool) -> tuple[float, dict]:
    cute_torch.compile_mlir(text, arch=arch, cubin_backend=backend)  # warm: libraries loaded
    walls, stages = [], []
    for i in range(repeats):
        source = fresh(text, i) if unique else text
        start = time.perf_counter()
        module = cute_torch.compile_mlir(source, arch=arch, cubin_backend=backend)
        walls.append((time.perf_counter() - start) * 1e3)
        stages.append(module.metadata["timings_ms"])
    median_stages = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return statistics.median(walls), median_stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--arch", default="sm_90a")
    args = parser.parse_args()
    text = open(SOURCE).read()
    backends = ["ptxas"] + (["nvjitlink"] if nvjitlink_path() else [])
    print(f"vector add, MLIR -> CUBIN + host JIT, arch {args.arch}, median of {args.repeats} (warm process)")
    print(f"{'backend':<10} {'module':<7} {'total ms':>9} {'parse':>6} {'passes':>7} {'llvm':>6} {'ptx':>6} {'cubin':>7} {'host':>6}")
    for backend in backends:
        for unique in (False, True):
            wall, s = measure(text, backend, args.arch, args.repeats, unique)
            print(f"{backend:<10} {'fresh' if unique else 'same':<7} {wall:9.2f} {s['parse']:6.2f} {s['device_passes']:7.2f} {s['llvm']:6.2f} "
                  f"{s['ptx']:6.2f} {s['cubin']:7.2f} {s['host']:6.2f}")


if __name__ == "__main__":
    main()
