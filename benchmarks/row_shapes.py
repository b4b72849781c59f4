"""A/B of the row kernels' CTA shapes: the library's choice (`lib`) against shapes named on the
command line, through the library's own entries with its shape function replaced, so what is
measured is what a rule in kernels/norm_shapes.py or kernels/cross_entropy.py would ship.

    python benchmarks/row_shapes.py layer_norm bwd --ns 10240 12288 --shapes lib c4t128v4 c8t128v4
    python benchmarks/row_shapes.py layer_norm fwd --params wb --ns 3072 --shapes lib c1t128v8 c1t128r64v8
    python benchmarks/row_shapes.py cross_entropy fwd --dtype float32 --ns 256 --shapes lib c1t128r16v4
    python benchmarks/row_shapes.py softmax bwd --ns 100000 --shapes lib c8t256v8 c16t256v8
    python benchmarks/row_shapes.py layer_norm bwd --ns 10240 --shapes lib c4t128v4 --cpu   # registers only

A shape is `c<CTAs a cluster>t<threads a CTA>[r<threads a row>]v<vector elements>[w<rows walked>][b<CTAs per SM>]`
(`r` defaults to the CTA's threads: one row a CTA; `w` and `b` only for the norm forwards, whose
shape function also returns the walk and the bound; `w0` is quack's shape, norm_shapes.DIRECT,
bounded to three CTAs per SM unless `b` says otherwise; softmax's and log_softmax's shapes walk
as the library's walk functions say for them, but `w0` names the forward's "direct" kernel, as it
names cross-entropy's one row per cluster; its other shapes are CTAs reading chunks).
Each cell: the fraction of the fastest copy of the same tensor in the same process (CUPTI
medians), per run; the bytes counted are those the op must move (forward: x read, y written,
and the residual's two; backward: x (softmax's y) and dy read, dx written; cross-entropy's
forward: the logits read once). `d`: the largest difference of the
outputs from the library's, relative to their largest magnitude. `--cpu` compiles each shape for
sm_90a and prints its registers and spilled bytes a thread, no GPU needed.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

import torch

from cute_torch.kernels import cross_entropy, norms, softmax
from cute_torch.kernels.row_reduce import RowConfig, dynamic_rows, fast_memory

_SHAPE = re.compile(r"c(\d+)t(\d+)(?:r(\d+))?v(\d+)(?:w(\d+))?(?:b(\d+))?")


@dataclass(frozen=True)
class Shape:
    """A shape named on the command line: the CTA shape, and a norm forward's walk and bound."""
    cluster: int
    threads: int
    per_row: int
    vec: int
    walk: int = 1
    ctas: int | None = None

    def config(self, n: int) -> RowConfig:
        return RowConfig(n, self.vec, self.per_row, self.threads, self.cluster)


def parse_shape(text: str) -> Shape | None:
    """`lib` -> None (the library's choice); else the Shape `text` names (module docstring)."""
    if text == "lib":
        return None
    found = _SHAPE.fullmatch(text)
    if found is None:
        raise ValueError(f"shape {text!r}: expected 'lib' or c<cluster>t<threads>[r<per row>]v<vec>[w<walk>][b<ctas>]")
    cluster, threads, per_row, vec, walk, ctas = found.groups()
    threads = int(threads)
    per_row = int(per_row) if per_row else threads
    if threads % per_row:
        raise ValueError(f"shape {text!r}: {threads} threads are not a whole number of rows of {per_row}")
    return Shape(int(cluster), threads, per_row, int(vec), int(walk) if walk else 1, int(ctas) if ctas else None)


class Case:
    """One op and pass over rows of `n` columns: its inputs, the call, the library's shape
    function and how to replace it, the bytes moved per copied byte."""

    def __init__(self, op: str, direction: str, dtype: torch.dtype, n: int, params: str, residual: bool,
                 device: str, seed: int = 0):
        if op == "cross_entropy" and direction != "fwd":
            raise ValueError("cross_entropy: only its forward's shape can be replaced here")
        if op == "rms_norm" and params == "wb":
            raise ValueError("rms_norm has no bias: --params none or w")
        self.op, self.direction, self.n = op, direction, n
        self.fast_memory = False       # (softmax's named shapes: walk as on a card with fast memory)
        g = torch.Generator(device=device).manual_seed(seed)
        m = max(1, (1 << 27) // n // (2 if op == "cross_entropy" and dtype.itemsize == 2 else 1))
        if device == "cpu":
            m = 4
        rand = (lambda *shape: torch.randn(*shape, device=device, generator=g)) if device != "cpu" else \
            (lambda *shape: torch.empty(*shape))
        self.x = (rand(m, n) * 2 + 1).to(dtype)
        if op == "cross_entropy":
            self.target = torch.randint(0, n, (m,), device=device, generator=g) if device != "cpu" else \
                torch.zeros(m, dtype=torch.int64)
            self.moved = 0.5
            return
        self.log = op == "log_softmax"
        if op in SOFTMAXES:
            self.moved = 1.0
            if direction == "bwd":
                self.y = softmax.softmax(self.x, log=self.log) if device != "cpu" else self.x
                self.dy = rand(m, n).to(dtype)
                self.moved = 1.5
            return
        self.rms = op == "rms_norm"
        self.w = rand(n).to(dtype) if params in ("w", "wb") else None
        self.b = rand(n).to(dtype) if params == "wb" else None
        self.residual = rand(m, n).to(dtype) if residual else None
        if direction == "bwd":
            if residual:
                raise ValueError("--residual: the backward is the same either way")
            self.dy = rand(m, n).to(dtype)
            self.moved = 1.5
            if device != "cpu":
                _, _, self.rstd, self.mean = norms.norm_forward(self.x, self.w, self.b, eps=1e-5, rms=self.rms)
        else:
            self.moved = 2.0 if residual else 1.0

    def call(self):
        if self.op == "cross_entropy":
            return cross_entropy.cross_entropy_forward(self.x, self.target)
        if self.op in SOFTMAXES:
            return softmax.softmax(self.x, log=self.log) if self.direction == "fwd" else \
                softmax.softmax_backward(self.y, self.dy, log=self.log)
        if self.direction == "fwd":
            return norms.norm_forward(self.x, self.w, self.b, residual=self.residual, eps=1e-5, rms=self.rms)
        return norms.norm_backward(self.x, self.w, self.dy, self.rstd, self.mean, weight_grad=self.w is not None,
                                   bias_grad=self.b is not None)

    # -- the shape function replaced, and restored -------------------------------------------------

    def check(self, shape: Shape | None) -> None:
        """Refuses a walk or bound where the shape function does not return one (they are chosen
        inside the traced kernel there, which no cache key would tell apart)."""
        if shape is None:
            return
        if self.op in SOFTMAXES or self.op == "cross_entropy":
            if shape.ctas or shape.walk not in (0, 1) or (shape.walk == 0 and self.direction == "bwd"):
                raise ValueError("softmax's and cross-entropy's shapes take only w0, the forward's direct kernel")
        elif (shape.walk != 1 or shape.ctas) and (self.op == "cross_entropy" or self.direction == "bwd"):
            raise ValueError("w<walk> and b<ctas> name a norm forward's walk and bound only")

    def use(self, shape: Shape | None):
        """Replaces the library's shape function with one returning `shape` (None: restores it)."""
        self.check(shape)
        module = {"cross_entropy": cross_entropy, "softmax": softmax, "log_softmax": softmax}.get(self.op, norms)
        name = "forward_shape" if self.direction == "fwd" else "backward_shape"
        library = _LIBRARY[(module.__name__, name)]
        if shape is None:
            setattr(module, name, library)
            return
        cfg = shape.config(self.n)
        if self.op in SOFTMAXES:
            setattr(module, name, lambda args, tensors, log, device, options=None:
                    (cfg, self.softmax_walk(shape, cfg, self.fast_memory or fast_memory(device))))
        elif self.op == "cross_entropy":
            exact, direct = _tiles_exactly(self.n, cfg), shape.walk == 0
            setattr(module, name, lambda logits, smooth, fast=False: (cfg, exact and not direct, direct))
        elif self.direction == "fwd":
            setattr(module, name, lambda args, tensors, rms, device, options=None: (cfg, shape.walk, shape.ctas))
        else:
            setattr(module, name, lambda *args, **kwargs: cfg)

    def compiled(self, shape: Shape | None) -> list[dict]:
        """The kernels (registers, spills) of this case's kernel in `shape`, compiled for sm_90a
        without a GPU; `lib`: the shape the library picks for an H100-like card."""
        self.check(shape)
        options = {"arch": "sm_90a"}
        x, n = self.x, self.n
        named = shape.config(n) if shape is not None else None
        rows, stat = dynamic_rows(x), dynamic_rows(torch.empty(x.shape[0]))
        if self.op in SOFTMAXES:
            fwd = self.direction == "fwd"
            host, args = (softmax._forward, (rows, rows)) if fwd else (softmax._backward, (rows, rows, rows))
            cfg, walk = (softmax.forward_shape if fwd else softmax.backward_shape)(
                args, (x,) * len(args), self.log, -1, options) if named is None else \
                (named, self.softmax_walk(shape, named, False))
            return host.compile(*args, 1, cfg, self.log, walk, options=options).kernels
        if self.op == "cross_entropy":
            direct = shape is not None and shape.walk == 0
            cfg, exact, direct = cross_entropy.forward_shape(x, False) if named is None else \
                (named, _tiles_exactly(n, named) and not direct, direct)
            target = dynamic_rows(torch.zeros(x.shape[0], dtype=torch.int64))
            return cross_entropy._forward.compile(rows, target, stat, stat, 0.0, -100, cfg, exact, False, direct,
                                                  options=options).kernels
        if self.direction == "fwd":
            res = dynamic_rows(self.residual) if self.residual is not None else None
            args = (rows, res, self.w, self.b, rows, res, stat, None if self.rms else stat, 1e-5)
            tensors = (x, self.residual, self.w, self.b, x, self.residual)
            cfg, walk, ctas = norms.forward_shape(args, tensors, self.rms, 0, options) if named is None else \
                (named, shape.walk, shape.ctas)
            return norms._forward.compile(*args, 1, cfg, self.rms, walk, ctas, options=options).kernels
        layer, part = not self.rms, dynamic_rows(torch.empty(1, n))
        args = (rows, self.w, rows, stat, stat if layer else None, rows, part if self.w is not None else None,
                part if self.b is not None else None, self.w, self.b)
        cfg = norms.backward_shape(n, args, (x, self.w, x, x), layer, 0, options) if named is None else named
        return norms._backward.compile(*args, 1, cfg, options=options).kernels


    def softmax_walk(self, shape: Shape, cfg: RowConfig, fast: bool):
        """softmax's walk for `cfg` (the library's walk functions), "direct" for `w0`."""
        bits = 8 * self.x.element_size()
        if self.direction == "bwd":
            return softmax.backward_walk(cfg, bits, fast)
        return "direct" if shape.walk == 0 else softmax.forward_walk(cfg, bits, self.log, fast)


SOFTMAXES = ("softmax", "log_softmax")
_LIBRARY = {(m.__name__, name): getattr(m, name) for m in (cross_entropy, norms, softmax)
            for name in ("forward_shape", "backward_shape") if hasattr(m, name)}


def _tiles_exactly(n: int, cfg: RowConfig) -> bool:
    """Whether cross-entropy's chunks of `cfg` tile a row of `n` columns with no guards."""
    return n % cfg.n == 0 and cfg.padding == 0


def _largest_difference(got, ref) -> float:
    pairs = [(a, r) for a, r in zip(got, ref) if isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor)]
    return max(((a.float() - r.float()).abs().max() / (1 + r.float().abs().max())).item() for a, r in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("op", choices=["rms_norm", "layer_norm", "cross_entropy", *SOFTMAXES])
    parser.add_argument("direction", choices=["fwd", "bwd"])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--ns", nargs="+", type=int, required=True)
    parser.add_argument("--shapes", nargs="+", default=["lib"])
    parser.add_argument("--params", default="wb", choices=["none", "w", "wb"], help="the norms' weight and bias")
    parser.add_argument("--residual", action="store_true", help="the norm forwards' residual add")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cpu", action="store_true", help="compile each shape for sm_90a: registers and spills")
    parser.add_argument("--fast-memory", action="store_true",
                        help="softmax's named shapes walk as on a card with fast memory (row_reduce.fast_memory)")
    args = parser.parse_args()
    params = "w" if args.op == "rms_norm" and args.params == "wb" else args.params
    shapes = {text: parse_shape(text) for text in args.shapes}
    dtype = getattr(torch, args.dtype)
    if args.cpu:
        for n in args.ns:
            case = Case(args.op, args.direction, dtype, n, params, args.residual, "cpu")
            for text, shape in shapes.items():
                try:
                    kernels = case.compiled(shape)
                except ValueError as error:         # a shape the kernel refuses: say so, go on
                    print(f"{args.op} {args.direction} {args.dtype} {n} {text} error: {error}", flush=True)
                    continue
                cells = ", ".join(f"{k['registers']} registers, {k['spill_stores']} bytes spilled" for k in kernels)
                print(f"{args.op} {args.direction} {args.dtype} {n} {text}: {cells}", flush=True)
        return
    from timing import kernel_ms
    print(f"{torch.cuda.get_device_name()}, {args.op} {args.direction} {args.dtype} (params {params}"
          f"{', residual' if args.residual else ''}), M x N = 2^27: fraction of copy per run")
    for n in args.ns:
        case = Case(args.op, args.direction, dtype, n, params, args.residual, "cuda", seed=n)
        case.fast_memory = args.fast_memory
        out = torch.empty_like(case.x)
        copy = min(kernel_ms(lambda: out.copy_(case.x), args.repeats, copies=True) for _ in range(args.runs))
        reference, line = None, f"{n:>7}"
        for text, shape in shapes.items():
            try:
                case.use(shape)
                got = case.call()
                reference = got if reference is None else reference
                runs = "/".join(f"{case.moved * copy / kernel_ms(case.call, args.repeats):.3f}"
                                for _ in range(args.runs))
                line += f" | {text} {runs} d {_largest_difference(got, reference):.0e}"
            except Exception as error:          # a shape the kernel refuses: say so, go on
                line += f" | {text} error: {str(error)[:80]}"
            finally:
                case.use(None)
        print(line, flush=True)


if __name__ == "__main__":
    main()
