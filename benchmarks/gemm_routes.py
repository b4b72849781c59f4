"""Plain matmuls, ours (cute::gemm with the epilogue `acc`) against cuBLAS (torch.mm), by shape
class; with --write, the table backend="cute" routes plain matmuls by
(cute_torch/backend/gemm_routes.json; classes as backend/gemm_routes.py defines them).

    python benchmarks/gemm_routes.py [--tokens 4096 8192 16384] [--widths 1024 2048 4096]
                                     [--dtypes bfloat16] [--repeats 10] [--rounds 3] [--sustained 0.5] [--write]

The shapes are the matmuls of training linear layers: for each width d, layers d -> d, 3d,
4d and LLaMA's 8/3 d (rounded up to 64) and back, over `tokens` rows; each layer gives its
forward x @ W^T (layout "kk"), dX = dY @ W ("kn") and dW = dY^T @ X ("mn"). Both sides run
through the calls the backend's graph makes (torch.ops.cute.gemm, aten.mm) on the same operand
views, GPU time by CUPTI (benchmarks/timing.kernel_ms; the least of `rounds` medians), every
result of ours checked against cuBLAS's; with --sustained S, each side's time in the power-capped steady state
instead (benchmarks/timing.steady: S seconds back to back, twice in turn, the least kept), the regime a training step
runs in. A class's entry is the median ratio cuBLAS time / ours over its shapes; the
backend routes a class at ratio >= 1.0. --write replaces this device's entry in the table and
keeps the other devices'.
"""

import argparse
import collections
import datetime
import json
import statistics

import torch
from timing import interleaved_ms, interleaved_steady

from cute_torch.backend.gemm_routes import TABLE, layout_of, shape_class


def linear_layers(widths, tokens) -> list:
    """(tokens, in, out) of the layers measured."""
    layers = set()
    for d in widths:
        for out in (d, 3 * d, 4 * d, -(-8 * d // 3 // 64) * 64):
            layers |= {(d, out), (out, d)}
    return [(t, i, o) for t in tokens for i, o in sorted(layers)]


def operands(t: int, i: int, o: int, kind: str, dtype):
    """(a, b) of one matmul of a linear layer (t tokens, in i, out o) as the training graph has them."""
    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)
    if kind == "forward":          # x (t, i) @ W^T, W (o, i)
        return randn(t, i), randn(o, i).t()
    if kind == "dX":               # dY (t, o) @ W (o, i)
        return randn(t, o), randn(o, i)
    return randn(t, o).t(), randn(t, i)   # dW: dY^T (o, t) @ X (t, i)


def timed(args, fns) -> list:
    """Each call's ms: in bursts, or with --sustained in the steady state, twice in turn, the least."""
    if not args.sustained:
        # One median of 10 let classes whose kernels had not changed move by up to 0.2 between two
        # runs on an H200 (2026-11-26): the least of `rounds` medians, the sides in turn.
        return interleaved_ms(fns, args.repeats, args.rounds)
    return [ms for ms, _clock, _watts in interleaved_steady(fns, args.sustained)]


def measure(args, dtype) -> list:
    """(class, M, N, K, cuBLAS ms, ours ms) of every shape, printed as it goes."""
    rows, seen = [], set()
    print(f"{'class':24} {'M':>6} {'N':>6} {'K':>6} {'cuBLAS ms':>9} {'ours ms':>9} {'ratio':>6} {'max err':>8}")
    for t, i, o in linear_layers(args.widths, args.tokens):
        for kind in ("forward", "dX", "dW"):
            a, b = operands(t, i, o, kind, dtype)
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
            layout = layout_of(a, b)
            if (layout, m, n, k) in seen:
                continue
            seen.add((layout, m, n, k))
            key = shape_class(dtype, layout, m, n, k)
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            torch.mm(a, b, out=out)
            ours = torch.ops.cute.gemm.default(a, b, "acc", [], dtype)
            err = ((ours.float() - out.float()).abs().max() / out.float().abs().max()).item()
            cublas_ms, ours_ms = timed(args, (lambda: torch.mm(a, b, out=out),
                                              lambda: torch.ops.cute.gemm.default(a, b, "acc", [], dtype)))
            verdict = "WRONG" if err > 2e-2 else ""
            print(f"{key:24} {m:6d} {n:6d} {k:6d} {cublas_ms:9.4f} {ours_ms:9.4f} {cublas_ms / ours_ms:6.3f} "
                  f"{err:8.1e} {verdict}", flush=True)
            if not verdict:
                rows.append((key, m, n, k, cublas_ms, ours_ms))
            a = b = out = ours = None               # the next shape's operands need the memory
    return rows


def classes(rows: list) -> dict:
    """{class: {"ratio": median cuBLAS / ours, "shapes": [[M, N, K, ratio], ...]}}."""
    grouped = collections.defaultdict(list)
    for key, m, n, k, cublas_ms, ours_ms in rows:
        grouped[key].append([m, n, k, round(cublas_ms / ours_ms, 4)])
    return {key: {"ratio": round(statistics.median(s[3] for s in shapes), 4), "shapes": shapes}
            for key, shapes in sorted(grouped.items())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--widths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="medians per shape and side; the least is kept")
    parser.add_argument("--sustained", type=float, default=0.0,
                        help="seconds each side runs back to back (the power-capped steady state); 0: bursts")
    parser.add_argument("--write", action="store_true", help=f"replace this device's entry in {TABLE}")
    args = parser.parse_args()
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}: plain matmuls, cute::gemm against torch.mm (GPU ms, CUPTI medians)")
    rows = []
    for name in args.dtypes:
        rows += measure(args, getattr(torch, name))
    table = classes(rows)
    routed = [key for key, entry in table.items() if entry["ratio"] >= 1.0]
    print(f"\n{len(table)} classes, {len(routed)} routed to cute::gemm (median ratio >= 1.0):")
    for key, entry in table.items():
        mark = "  routed" if key in routed else ""
        print(f"  {key:24} {entry['ratio']:6.3f} over {len(entry['shapes'])} shapes{mark}")
    if args.write:
        known = json.loads(TABLE.read_text()) if TABLE.exists() else {}
        known[device] = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
                         "command": "python benchmarks/gemm_routes.py " + " ".join(
                             f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                             for k, v in vars(args).items() if k != "write"), "classes": table}
        TABLE.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
        print(f"wrote {TABLE} ({device})")


if __name__ == "__main__":
    main()
