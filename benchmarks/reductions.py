"""Row reductions (kernels/softmax.py: softmax and log_softmax; kernels/norms.py;
kernels/cross_entropy.py) against torch eager, Inductor and quack (where it imports), with copy
as the ceiling.

    python benchmarks/reductions.py [--dtypes bfloat16 float32] [--ns 256 1024 ... 131072]
                                    [--ops softmax log_softmax rms_norm layer_norm cross_entropy]
                                    [cross_entropy_smoothed]
                                    [--plot reductions.png]

M x N = 2^27 elements. Bytes counted: forward reads x and writes y (2 x M x N x size; the
weight's N elements are left out), backward reads y or x and dy and writes dx (3 x);
cross-entropy's forward reads the logits (1 x, a loss per row out), its backward reads them and
writes dlogits (2 x); `cross_entropy_smoothed` is the same with label smoothing 0.1 (not in the
default ops; quack has none). Time is
the median CUPTI device time of all the kernels of a call (benchmarks/timing.kernel_ms): our
norm backward's count includes its second launch, which sums the partial dweight / dbias
rows (column_sums.launch_sum_partials). Eager and Inductor
backward time autograd.grad over a graph built once. "of copy" divides a bandwidth by the
fastest out.copy_(x) of the run: one before the first shape and one at each shape, all of 2^27
elements. (On one H200, 2026-11-26, copy_ took 4.23 TB/s at the first shape and 3.84 at every
later one, while our kernels moved up to 4.1 TB/s at those: a copy timed beside them was a
ceiling 10 % too low.) Our outputs (forward, and every gradient backward)
are checked against float32 autograd on the same inputs ("err": the largest error relative to
the reference's largest magnitude, "!" past TOLERANCE); any past it make the run exit 1.
quack's are checked the same way ("q. err"; its LayerNorm, which takes no bias, is not) and
reported, without failing the run.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from timing import kernel_ms

from cute_torch.kernels import cross_entropy, norms, softmax
from cute_torch.kernels.norms import MAX_NORM_N

try:   # quack's CuTe DSL kernels, where installed (their entries as of quack-kernels 0.2.2)
    import importlib

    import quack  # noqa: F401
    # (modules by name: the package's softmax, rmsnorm, ... attributes are functions)
    quack_cross_entropy, quack_layernorm, quack_rmsnorm, quack_softmax = (
        importlib.import_module(f"quack.{m}") for m in ("cross_entropy", "layernorm", "rmsnorm", "softmax"))
except Exception:  # noqa: BLE001 - any import failure means "not measured"
    quack = None


# Bytes moved per element of x, forward and backward: cross-entropy's forward reads the logits
# only (a per-row loss out), its backward reads them and writes dlogits.
BYTES = {"softmax": (2, 3), "log_softmax": (2, 3), "rms_norm": (2, 3), "layer_norm": (2, 3), "cross_entropy": (1, 2),
         "cross_entropy_smoothed": (1, 2)}
SMOOTHING = 0.1                                     # cross_entropy_smoothed's label smoothing


# Largest error allowed, relative to the reference's largest magnitude: the dtype's rounding
# (bf16 2^-8, fp16 2^-11) with room for sums over many rows (dweight, dbias).
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}


def _tally(err, dtype, where: str, tally: tuple) -> str:
    """Counts a checked case (err not None) in `tally` ([cases], [past tolerance]); its flag."""
    if err is None:
        return " "
    tally[0].append(where)
    if err <= TOLERANCE[dtype]:
        return " "
    tally[1].append(f"{where}: {err:.1e}")
    return "!"


def _reference(fn, params, x, grad) -> tuple:
    """(forward output, gradients of x and each parameter) of float32 autograd of `fn` on the
    inputs."""
    leaves = [x.detach().float().requires_grad_()] + [p.detach().float().requires_grad_() for p in params]
    y = fn(*leaves)
    return y.detach(), torch.autograd.grad(y, leaves, grad.float())


def _error(got, ref) -> float:
    """The largest |got - ref| relative to ref's largest magnitude; NaN counts as infinite."""
    diff = (got.float() - ref).abs().max().item()
    return math.inf if math.isnan(diff) else diff / max(ref.abs().max().item(), 1e-30)


def _errors(reference, calls) -> tuple:
    """(forward, backward) error of `calls` (forward call, backward call; either None) against
    `reference` (_reference): the forward's first output; the backward's gradients, in the
    reference's order (None outputs dropped: quack's RMSNorm backward returns dx, dw, None, None)."""
    y, want = reference
    errors = []
    for k, call in enumerate(calls):
        if call is None:
            errors.append(None)
            continue
        out = call()
        outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if t is not None]
        if k == 0:
            errors.append(_error(outs[0], y))
        else:
            assert len(outs) == len(want), (len(outs), len(want))
            errors.append(max(_error(got, ref) for got, ref in zip(outs, want)))
    return tuple(errors)


def _eager(op: str, n: int, dtype, target=None):
    w = torch.randn(n, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    if op.startswith("cross_entropy"):
        smoothing = SMOOTHING if op == "cross_entropy_smoothed" else 0.0
        return (lambda x: F.cross_entropy(x, target, reduction="none", label_smoothing=smoothing)), []
    if op in ("softmax", "log_softmax"):
        return (lambda x: torch.softmax(x, -1)) if op == "softmax" else (lambda x: torch.log_softmax(x, -1)), []
    if op == "rms_norm":
        return (lambda x, w=w: F.rms_norm(x, (n,), w, 1e-6)), [w]
    return (lambda x, w=w, b=b: F.layer_norm(x, (n,), w, b, 1e-6)), [w, b]


def _ours(op: str, x, dy, params, target=None):
    """(forward call, backward call) of our kernels on x and dy."""
    if op.startswith("cross_entropy"):
        e = SMOOTHING if op == "cross_entropy_smoothed" else 0.0
        _, lse = cross_entropy.cross_entropy_forward(x, target, label_smoothing=e)
        return ((lambda: cross_entropy.cross_entropy_forward(x, target, label_smoothing=e)),
                (lambda: cross_entropy.cross_entropy_backward(x, target, lse, dy, label_smoothing=e)))
    if op in ("softmax", "log_softmax"):
        log = op == "log_softmax"
        y = softmax.softmax(x, log=log)
        return (lambda: softmax.softmax(x, log=log)), (lambda: softmax.softmax_backward(y, dy, log=log))
    rms = op == "rms_norm"
    w, b = params[0], (None if rms else params[1])
    _, _, rstd, mean = norms.norm_forward(x, w, b, eps=1e-6, rms=rms)
    return ((lambda: norms.norm_forward(x, w, b, eps=1e-6, rms=rms)),
            (lambda: norms.norm_backward(x, w, dy, rstd, mean, weight_grad=True, bias_grad=not rms)))


def _autograd(fn, x, dy, params):
    """(forward call, backward call) of `fn` under autograd."""
    xg = x.detach().requires_grad_()
    leaves = [xg] + [p.detach().requires_grad_() for p in params]
    y = fn(xg, *leaves[1:]) if params else fn(xg)
    return (lambda: fn(x, *params) if params else fn(x)), \
        (lambda: torch.autograd.grad(y, leaves, dy, retain_graph=True))


def quack_takes(n: int) -> bool:
    """Whether quack runs over rows of n columns here. Past 65536 columns (its cluster path) only
    powers of two: at 100000 its softmax returned inf and its Float32 RMSNorm faulted (0.2.2,
    H100), and a fault ends the process's CUDA context, every later row of the table with it."""
    return n <= 65536 or n & (n - 1) == 0


def _quack(op: str, x, dy, params, target=None) -> tuple:
    """(forward call, backward call) of quack's kernels, None where it has none: its LayerNorm
    (0.2.2) takes a weight and no bias, and has no backward; softmax takes no log."""
    if quack is None or not quack_takes(x.shape[-1]):
        return None, None
    if op == "softmax":
        y = quack_softmax.softmax_fwd(x)
        return (lambda: quack_softmax.softmax_fwd(x)), (lambda: quack_softmax.softmax_bwd(dy, y))
    if op == "rms_norm":
        w = params[0]
        _, _, rstd = quack_rmsnorm.rmsnorm_fwd(x, w, eps=1e-6, store_rstd=True)
        return ((lambda: quack_rmsnorm.rmsnorm_fwd(x, w, eps=1e-6, store_rstd=True)),
                (lambda: quack_rmsnorm.rmsnorm_bwd(x, w, dy, rstd)))
    if op == "layer_norm":
        w32 = params[0].float()                     # (its weight must be Float32)
        return (lambda: quack_layernorm.layernorm(x, w32, eps=1e-6, return_rstd=True, return_mean=True)), None
    if op == "cross_entropy":
        _, lse = quack_cross_entropy.cross_entropy_fwd(x, target, return_lse=True)
        return ((lambda: quack_cross_entropy.cross_entropy_fwd(x, target, return_lse=True)),
                (lambda: quack_cross_entropy.cross_entropy_bwd(x, target, dy, lse)))
    return None, None


def main() -> None:
    # The backward graphs run again and again (retain_graph): no buffer donation.
    import torch._functorch.config
    torch._functorch.config.donated_buffer = False
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    # Powers of two as issue 18 lists them, and two widths that are not (2560: rows the CTA shapes
    # can pad; 50257: GPT-2's vocabulary, an odd row stride).
    parser.add_argument("--ns", nargs="+", type=int, default=[256, 1024, 2560, 4096, 8192, 16384, 32768, 50257, 131072])
    parser.add_argument("--ops", nargs="+",
                        default=["softmax", "log_softmax", "rms_norm", "layer_norm", "cross_entropy"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--plot", default=None)
    args = parser.parse_args()
    total = 1 << 27
    print(f"{torch.cuda.get_device_name()}, M x N = 2^27, GPU time (CUPTI) median of {args.repeats}; "
          "TB/s counts bytes read + written")
    print(f"{'op':11} {'dtype':9} {'N':>6} {'dir':4} {'ours TB/s':>9} {'of copy':>7} {'eager':>7} "
          f"{'Inductor':>8} {'quack':>7} {'vs eager':>8} {'vs Ind.':>7} {'vs quack':>8} {'err':>8} {'q. err':>7}")
    curves: dict = {}
    ours_tally, quack_tally = ([], []), ([], [])   # (quack's reported, not failing the run: not our kernels)
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        copies = [_copy_tbs(torch.randn(total, device="cuda").to(dtype), args.repeats)]
        for n in args.ns:
            m = total // n
            x = torch.randn(m, n, device="cuda").to(dtype)
            dy = torch.randn(m, n, device="cuda").to(dtype)
            size = x.numel() * x.element_size()
            copies.append(_copy_tbs(x, args.repeats))
            copy_tbs = max(copies)
            target = torch.randint(0, n, (m,), device="cuda")
            dloss = torch.randn(m, device="cuda")
            for op in args.ops:
                fn, params = _eager(op, n, dtype, target)
                grad = dloss if op.startswith("cross_entropy") else dy
                eager = _autograd(fn, x, grad, params)
                torch._dynamo.reset()      # a fresh, static compile per case (no recompile limit, no dynamic)
                inductor = None if args.no_inductor else _autograd(torch.compile(fn, dynamic=False), x, grad, params)
                # softmax and cross-entropy take any N (softmax chunks past 262144, or past 32768 for unaligned
                # 16-bit rows), the norms up to MAX_NORM_N
                ours = _ours(op, x, grad, params, target) if n <= MAX_NORM_N or not op.endswith("norm") else None
                reference = _reference(fn, params, x, grad)
                errors = _errors(reference, ours) if ours else None
                try:
                    quacks = _quack(op, x, grad, params, target)
                    # (quack's LayerNorm takes no bias: its output is not this reference's)
                    quack_errors = _errors(reference, quacks) if op != "layer_norm" else (None, None)
                except Exception as e:  # noqa: BLE001 - a shape or dtype quack does not take
                    print(f"quack {op} {dtype_name} {n}: {type(e).__name__}: {str(e)[:120]}")
                    quacks, quack_errors = (None, None), (None, None)
                for direction, bytes_ in zip(("fwd", "bwd"), (b * size for b in BYTES[op])):
                    k = 0 if direction == "fwd" else 1

                    def tbs(call):
                        return None if call is None else bytes_ / kernel_ms(call, args.repeats) / 1e9
                    ours_tbs = tbs(ours[k]) if ours else None
                    eager_tbs = tbs(eager[k])
                    ind_tbs = tbs(inductor[k]) if inductor else None
                    try:
                        quack_tbs = tbs(quacks[k])
                    except Exception as e:  # noqa: BLE001
                        print(f"quack {op} {dtype_name} {n} {direction}: {type(e).__name__}: {str(e)[:120]}")
                        quack_tbs = None

                    def cell(v, width=7, fmt="{:.2f}"):
                        return f"{'-':>{width}}" if v is None else f"{fmt.format(v):>{width}}"
                    ratio = (lambda other: None if ours_tbs is None or other is None else ours_tbs / other)
                    err, quack_err = None if errors is None else errors[k], quack_errors[k]
                    where = f"{op} {dtype_name} {n} {direction}"
                    flag = _tally(err, dtype, where, ours_tally)
                    _tally(quack_err, dtype, where, quack_tally)
                    print(f"{op:11} {dtype_name:9} {n:>6} {direction:4} {cell(ours_tbs, 9)} "
                          f"{cell(None if ours_tbs is None else ours_tbs / copy_tbs)} {cell(eager_tbs)} "
                          f"{cell(ind_tbs, 8)} {cell(quack_tbs)} {cell(ratio(eager_tbs), 8)} {cell(ratio(ind_tbs))} "
                          f"{cell(ratio(quack_tbs), 8)} "
                          f"{cell(err, 7, '{:.0e}')}{flag} {cell(quack_err, 7, '{:.0e}')}")
                    if ours_tbs is not None:
                        curves.setdefault((op, dtype_name, direction), []).append((n, ours_tbs / copy_tbs))
            x = dy = None                               # the next shape's tensors need the memory
            torch.cuda.empty_cache()
        print(f"{dtype_name} copies: {min(copies):.2f}-{max(copies):.2f} TB/s (the ceiling: the fastest)")
    if args.plot:
        plot(curves, args.plot)
    print(f"outputs checked against float32 autograd: {len(ours_tally[0])} cases, {len(ours_tally[1])} past "
          "tolerance")
    if quack_tally[0]:
        print(f"quack's outputs checked the same way: {len(quack_tally[0])} cases, {len(quack_tally[1])} past "
              "tolerance" + "".join(f"\n  {w}" for w in quack_tally[1]))
    if ours_tally[1]:
        print("\n".join(ours_tally[1]))
        raise SystemExit(1)


def _copy_tbs(x: torch.Tensor, repeats: int) -> float:
    """Bandwidth (bytes read + written) of copying x into a new tensor."""
    out = torch.empty_like(x)
    return 2 * x.numel() * x.element_size() / kernel_ms(lambda: out.copy_(x), repeats, copies=True) / 1e9


def plot(curves: dict, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {path} not written)")
        return
    plt.figure(figsize=(7, 4.5))
    for (op, dtype, direction), points in sorted(curves.items()):
        plt.plot([p[0] for p in points], [p[1] for p in points], "o-" if direction == "fwd" else "s--",
                 label=f"{op} {dtype} {direction}")
    plt.axhline(1.0, color="gray", lw=0.8)
    plt.xscale("log", base=2)
    plt.xlabel("N (row length)")
    plt.ylabel("bandwidth / copy bandwidth")
    plt.title(f"cute_torch row kernels, M x N = 2^27, {torch.cuda.get_device_name()}")
    plt.legend(fontsize=7)
    plt.tight_layout()
    plt.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
