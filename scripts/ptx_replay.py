"""PTX replay: compiles every example and library kernel for fixed arguments and diffs the PTX
against the committed baseline in tests/ptx_replay/, so a change that alters generated code
shows it (tinygrad's process replay, for kernels). No GPU needed.

    python scripts/ptx_replay.py            # diff against the baseline; exit 1 on any change
    python scripts/ptx_replay.py --update   # rewrite the baseline (commit it with the change)
    python scripts/ptx_replay.py --only copy_add   # cases whose name contains a string
    python scripts/ptx_replay.py --time 5   # also: each case's cold compile, median of 5 (ms)

A case is a name and a function returning PTX text. Each compiles with the disk cache off, for
sm_90a and, where the kernel also serves Ampere, sm_80.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import re
import statistics
import sys
import time

os.environ["CUTE_TORCH_NO_CACHE"] = "1"  # a cache hit would replay stored PTX, not compile it
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import cute_torch as cute  # noqa: E402

BASELINE = os.path.join(ROOT, "tests", "ptx_replay")
ARCHS = ("sm_90a", "sm_80")


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# NVPTX numbers call sites per process (`// callseq 7`, `prototype_7`): the same kernel prints
# differently depending on what compiled before it, so the numbers are erased.
_CALL_SITE = re.compile(r"\b(callseq|prototype_)\s*\d+")


def _normalized(ptx: str) -> str:
    return _CALL_SITE.sub(r"\1 N", ptx)


def _ptx(fn, *args, arch: str) -> str:
    return cute.compile(fn, *args, options={"arch": arch}).__ptx__


def _example_cases(arch: str) -> dict:
    cases = {}
    hello = _example("hello_world")
    cases["hello_world"] = lambda: _ptx(hello.host, arch=arch)
    add = _example("vector_add")
    a = torch.randn(10_000)
    cases["vector_add_static"] = lambda: _ptx(add.vector_add, a, a, torch.empty_like(a), arch=arch)
    dyn = [cute.from_dlpack(torch.randn(4096)).mark_layout_dynamic() for _ in range(3)]
    cases["vector_add_dynamic"] = lambda: _ptx(add.vector_add, *dyn, arch=arch)
    epi = _example("epilogue_metaprogramming")
    A, B, C = torch.randn(300, 64), torch.randn(64, 8), torch.empty(300, 8)
    for epilogue in (epi.Epilogue, epi.ReLU):
        name = epilogue.__name__.lower()
        cases[f"matmul_dynamic_{name}"] = (
            lambda e=epilogue: _ptx(epi.matmul_dynamic, e, A, B, cute.from_dlpack(C).mark_layout_dynamic(), arch=arch))
        cases[f"matmul_unrolled_{name}"] = lambda e=epilogue: _ptx(epi.matmul_unrolled, e, A, B, C, arch=arch)
    return cases


def _copy_kernel_cases(arch: str) -> dict:
    from cute_torch.kernels import copy_kernels as k
    cases = {}
    for dtype in (torch.float32, torch.bfloat16):
        short = str(dtype).replace("torch.", "")
        a = torch.randn(104, 320).to(dtype)  # edge tiles in both modes
        cases[f"copy_add_{short}"] = (
            lambda a=a, d=dtype: _ptx(k._add, a, a, torch.empty_like(a), *k._add_layouts(d), arch=arch))
        cases[f"copy_transpose_{short}"] = (
            lambda a=a, d=dtype: _ptx(k._transpose, a, torch.empty(320, 104, dtype=d), *k._transpose_layouts(d),
                                      arch=arch))
    return cases


def _pointwise_cases(arch: str) -> dict:
    from cute_torch.pointwise.kernel import SEPARATOR, Plan, _pointwise_host, stand_ins
    plans = {
        "pointwise_add_f32_vec4": Plan("x0 + x1", ("float32", "float32"), (False, False), "float32", 1, "11", 4, False),
        "pointwise_gelu_bf16_vec8": Plan("gelu(x0) * x1", ("bfloat16", "bfloat16"), (False, False), "bfloat16", 1,
                                         "11", 8, False),
        "pointwise_broadcast_rank2": Plan("x0 * x1 + 1.5", ("float32", "float16"), (False, False), "float32", 2, "10",
                                          1, False),
        "pointwise_strided_wide": Plan("where(x0 > 0, x0, -x0)", ("float32",), (False,), "float32", 2, "s", 1, True),
        "pointwise_multi_output": Plan(f"sigmoid(x0){SEPARATOR}x0 * sigmoid(x0)", ("float16",), (False,),
                                       "float16,float32", 1, "1", 8, False),
        "pointwise_segments_bf16": Plan(f"x0 * 0.9 + x1{SEPARATOR}x0 - x2 * x1", ("bfloat16", "bfloat16", "float32"),
                                        (False, False, True), "bfloat16,bfloat16", 1, "110", 8, False, 4),
    }
    return {name: (lambda p=plan: _ptx(_pointwise_host, p, *stand_ins(p, -1), arch=arch))
            for name, plan in plans.items()}


def _gemm_cases(arch: str) -> dict:
    """The library's Hopper GEMM: the three tile widths, a fused epilogue with an input, two
    outputs, the ping-pong schedule."""
    from cute_torch.kernels.gemm_sm90 import _gemm_host, host_arguments
    a, b = torch.randn(304, 448).bfloat16(), torch.randn(448, 520).bfloat16()
    c, c2, bias = torch.empty(304, 520).bfloat16(), torch.empty(304, 520).bfloat16(), torch.randn(520)
    variants = {
        "gemm_sm90_256": lambda: host_arguments(a, b, c, tile_n=256),
        "gemm_sm90_128": lambda: host_arguments(a, b, c, tile_n=128),
        "gemm_sm90_64": lambda: host_arguments(a, b, c, tile_n=64),
        "gemm_sm90_gelu_bias": lambda: host_arguments(a, b, c, "gelu_tanh(acc + x0)", (bias,), tile_n=256),
        "gemm_sm90_two_outputs": lambda: host_arguments(a, b, (c, c2), ("acc + x0", "relu(acc + x0)"), (bias,),
                                                  tile_n=128),
        "gemm_sm90_pingpong": lambda: host_arguments(a, b, c, schedule="pingpong"),
        "gemm_sm90_cluster": lambda: host_arguments(a, b, c, tile_n=256, cluster=True),
    }
    return {name: (lambda v=v: _ptx(_gemm_host, *v(), arch=arch)) for name, v in variants.items()}


def _row_cases(arch: str) -> dict:
    """The row kernels at shapes with their own tuned rules (kernels/norms.py, softmax.py,
    cross_entropy.py), built as the torch ops build them (cute_torch/ops/row_build.py): their
    speed hangs on ptxas's schedule (one CTA of 8 warps per SM in LayerNorm's 256-thread
    backward moved by 30 % on arithmetic alone), so any change to their code shows here."""
    from cute_torch.ops import row_build

    def build(op: str, dtype: str, n: int, operands: str, flags: str):
        r, c = f"r;{dtype};{n};{n};16;0", f"c;{dtype};{n};1;16;0"
        stats, part = "v;float32;1;1;16;0", f"r;float32;{n};{n};16;0"
        described = operands.format(r=r, c=c, v=stats, p=part)
        # device -1: no GPU's rules (fast_memory), the same kernels on a GPU machine as without
        return lambda: row_build.build(op, described, flags, -1, arch=arch)[-1].__ptx__
    layer_norm = "{r}|-|{c}|{c}|{r}|-|{v}|{v}"
    layer_norm_backward = "{r}|{c}|{r}|{v}|{v}|{r}|{p}|{p}|{c}|{c}"
    return {
        "row_softmax_4096": build("softmax", "bfloat16", 4096, "{r}|{r}", "0"),
        "row_log_softmax_32768": build("softmax", "bfloat16", 32768, "{r}|{r}", "1"),
        "row_softmax_backward_32768": build("softmax_backward", "bfloat16", 32768, "{r}|{r}|{r}", "0"),
        "row_layer_norm_16384": build("layer_norm", "bfloat16", 16384, layer_norm, "0"),
        "row_rms_norm_4096": build("layer_norm", "bfloat16", 4096, "{r}|-|{c}|-|{r}|-|{v}|-", "1"),
        "row_layer_norm_backward_4096": build("layer_norm_backward", "bfloat16", 4096, layer_norm_backward, ""),
        "row_layer_norm_backward_16384": build("layer_norm_backward", "bfloat16", 16384, layer_norm_backward, ""),
        "row_layer_norm_backward_131072": build("layer_norm_backward", "bfloat16", 131072, layer_norm_backward, ""),
    }


def _mlir_cases(arch: str) -> dict:
    folder = os.path.join(ROOT, "tests", "mlir")
    cases = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith(".mlir"):
            path = os.path.join(folder, file)
            cases[f"mlir_{file[:-5]}"] = (
                lambda p=path: cute.compile_mlir(open(p).read(), arch=arch, keep=["ptx"]).stage("ptx").decode())
    return cases


def cases() -> dict:
    """name -> function returning PTX text, for every arch the kernel targets."""
    result = {}
    for arch in ARCHS:
        found = {**_example_cases(arch), **_copy_kernel_cases(arch), **_pointwise_cases(arch)}
        if arch == "sm_90a":
            found.update(_mlir_cases(arch))  # some of them use Hopper-only ops
            found.update(_gemm_cases(arch))
            found.update(_row_cases(arch))
        result.update({f"{name}.{arch}": fn for name, fn in found.items()})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite the baseline")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--time", type=int, default=0, metavar="N",
                        help="also time each case's cold compile (trace, passes, PTX, CUBIN): median of N, ms")
    args = parser.parse_args()
    os.makedirs(BASELINE, exist_ok=True)
    selected = {n: f for n, f in cases().items() if args.only in n}
    changed, added, times = [], [], {}
    for name, make in selected.items():
        ptx = _normalized(make())
        if args.time:
            walls = []
            for _ in range(args.time):
                start = time.perf_counter()
                make()
                walls.append((time.perf_counter() - start) * 1e3)
            times[name] = statistics.median(walls)
        path = os.path.join(BASELINE, f"{name}.ptx")
        old = open(path).read() if os.path.exists(path) else None
        if old == ptx:
            continue
        if args.update:
            with open(path, "w") as f:
                f.write(ptx)
        if old is None:
            added.append(name)
            continue
        changed.append(name)
        if not args.update:
            diff = difflib.unified_diff(old.splitlines(), ptx.splitlines(), f"baseline/{name}.ptx", f"now/{name}.ptx",
                                        lineterm="", n=2)
            sys.stdout.write("\n".join(list(diff)[:80]) + "\n")
    stale = [] if args.only else sorted(f[:-4] for f in os.listdir(BASELINE)
                                        if f.endswith(".ptx") and f[:-4] not in selected)
    if args.update:
        for name in stale:
            os.remove(os.path.join(BASELINE, f"{name}.ptx"))
    print(f"ptx replay: {len(selected)} cases, {len(changed)} changed, {len(added)} new, {len(stale)} stale"
          + (" (baseline updated)" if args.update else ""))
    if times:
        for name, ms in times.items():
            print(f"  {name:<40} {ms:8.1f} ms")
        print(f"  {'total (sum of medians)':<40} {sum(times.values()):8.1f} ms")
    for what, names in (("changed", changed), ("new", added), ("stale", stale)):
        if names:
            print(f"  {what}: {', '.join(names)}")
    return 0 if args.update or not (changed or added or stale) else 1


if __name__ == "__main__":
    sys.exit(main())
