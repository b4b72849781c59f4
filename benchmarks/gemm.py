"""The library's Hopper GEMM (kernels/gemm_sm90.py, persistent and warp-specialized) and the
tensor-core example GEMMs (examples/gemm_sm80.py, gemm_sm90.py, gemm_sm90_ws.py) against cuBLAS,
in the same run.

    python benchmarks/gemm.py [--sections square llm fp16 fused tiles gated fp8 ampere clusters competitors
                                          sustained] [--seconds 2]
                              [--sizes 1024 2048 4096 8192]
                              [--only LABEL] [--repeats 30] [--plot gemm.png]

C = A @ B^T with A (M, K) and B (N, K) (F.linear's layout, "TN"), fp32 accumulation; FLOPs = 2 M N
K. "GPU ms" is the median over `repeats` calls of the kernels' device time (CUPTI through
torch.profiler; benchmarks/timing.py), the least of 3 such medians where sides are compared, taken
in turn with the other sides' (timing.interleaved_ms: the H200's clocks drop under load, so the side
timed second read slower), and TFLOP/s and every ratio come from it; "call ms" is the median
CUDA-event time of one call from Python, host path included (the library rows go through gemm()'s
Python host path; the `torch.ops.cute.gemm (C++ path)` row times the C++ op). cuBLAS is torch.mm
into a preallocated output, measured the same way in the same run. "first s" is our kernel's trace +
compile + first launch. Every output of ours is checked against cuBLAS's in the same run ("max err":
the largest |ours - cuBLAS| over the largest |cuBLAS|); a wrong result is printed as WRONG.

Sections: `square` (every kernel, bf16), `llm` (M = 8192 tokens and the (N, K) of LLM layers,
TN and NN, library only), `fp16` (the library in fp16), `fused` (linear + bias + GELU(tanh), linear +
bias + residual and linear + bias: ours fused against our plain GEMM, cuBLASLt's epilogue, eager
and Inductor), `tiles` (shapes
of about one wave: each tile width, 128 and 64 rows, against cuBLAS, and the one gemm() takes), `gated`
(SwiGLU from one gated GEMM against our plain GEMM, eager and Inductor; fp32 outputs), `fp8`
(e4m3 operands with a per-tensor scale in the epilogue against cuBLAS's fp8 GEMM, torch._scaled_mm,
and against bf16 cuBLAS), `ampere` (kernels/gemm_sm80: tile widths, TN and NN, a fused epilogue),
`clusters` (2-CTA clusters multicasting B against the same tiles without, square and LLM shapes),
`competitors` (ours, cuBLAS, Inductor's Triton GEMM templates under max-autotune and quack where
it imports, on the squares of --sizes and two LLM shapes), `sustained` (cuBLAS and cute::gemm each
run back to back for --seconds, twice in turn, the SM clock and board power sampled by nvidia-smi:
the power-capped steady state a training step runs in, where the GPU-time columns above time
bursts of --repeats calls).
"""

import argparse
import pathlib
import runpy
import time

import torch
from timing import interleaved_ms, interleaved_steady, kernel_ms, median_ms

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
LLM_SHAPES = [(4096, 4096), (12288, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336),
              (128256, 4096)]
HEADER = (f"{'kernel':40} {'M':>6} {'N':>6} {'K':>6} {'first s':>8} {'call ms':>8} {'GPU ms':>8} {'TFLOP/s':>8} "
          f"{'cuBLAS ms':>9} {'cuBLAS TF/s':>11} {'ratio':>6} {'max err':>8}")


def _library(schedule=None):
    """The library takes b as (K, N) like torch.mm; b.t() of the (N, K) operand is its K-major form."""
    def load():
        from cute_torch.kernels.gemm_sm90 import gemm
        return lambda a, b, c: gemm(a, b.t(), c, schedule=schedule)
    return load


def _ampere(tile_n=None):
    def load():
        from cute_torch.kernels.gemm_sm80 import gemm
        return lambda a, b, c: gemm(a, b.t(), c, tile_n=tile_n)
    return load


def _example(name):
    return lambda: runpy.run_path(str(EXAMPLES / f"{name}.py"))["gemm"]


def _op():
    """torch.ops.cute.gemm through cute_torch.ops (C++ keying and launch; it allocates its output)."""
    import cute_torch.ops as cops
    return lambda a, b, c: cops.gemm(a, b.t())


KERNELS = [("kernels/gemm_sm90 (persistent WS)", _library(), None, (9, 0)),
           ("torch.ops.cute.gemm (C++ path)", _op, None, (9, 0)),
           ("kernels/gemm_sm90 ping-pong", _library("pingpong"), None, (9, 0)),
           ("example gemm_sm90 (TMA + wgmma)", _example("gemm_sm90"), None, (9, 0)),
           ("example gemm_sm90_ws", _example("gemm_sm90_ws"), None, (9, 0)),
           ("kernels/gemm_sm80 (cp.async + mma.sync)", _ampere(), None, (8, 0)),
           ("example gemm_sm80 (cp.async + ldmatrix)", _example("gemm_sm80"), torch.float32, (8, 0))]


def _runs_here(needs) -> bool:
    capability = torch.cuda.get_device_capability()
    return capability >= needs and (needs != (9, 0) or capability == (9, 0))


def _error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours.float() - reference.float()).abs().max() / reference.float().abs().max()).item()


def _row(label, m, n, k, gemm, a, b, c, cublas_call, reference, repeats) -> dict:
    """Times gemm(a, b, c) (b as (N, K)) and cuBLAS's call `cublas_call` in turn (interleaved_ms),
    checks its result (the returned tensor, else c) against the reference, prints one row."""
    start = time.perf_counter()
    out = gemm(a, b, c)
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    call = median_ms(lambda: gemm(a, b, c), repeats)
    cublas_ms, ours = interleaved_ms((cublas_call, lambda: gemm(a, b, c)), repeats)
    err = _error(out if isinstance(out, torch.Tensor) else c, reference)   # an op returns its output
    tflop = 2 * m * n * k / 1e9
    flag = "  WRONG" if err > 2e-2 else ""
    print(f"{label:40} {m:6} {n:6} {k:6} {first:8.2f} {call:8.3f} {ours:8.3f} {tflop / ours:8.0f} {cublas_ms:9.3f} "
          f"{tflop / cublas_ms:11.0f} {cublas_ms / ours:6.2f} {err:8.1e}{flag}", flush=True)
    return {"label": label, "size": (m, n, k), "tflops": tflop / ours, "cublas_tflops": tflop / cublas_ms}


def _cublas(a, b, dtype):
    """(the call, its output) of torch.mm(a, b.t()) into a preallocated output, called once."""
    out = torch.empty(a.shape[0], b.shape[0], device="cuda", dtype=dtype)
    call = lambda: torch.mm(a, b.t(), out=out)  # noqa: E731
    call()
    return call, out


def square(args, dtype=torch.bfloat16, kernels=KERNELS, suffix: str = "") -> list:
    rows = []
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda").to(dtype)
        b = torch.randn(size, size, device="cuda").to(dtype)
        cublas_call, reference = _cublas(a, b, dtype)
        for label, load, out_dtype, needs in kernels:
            if not _runs_here(needs) or args.only not in label:
                continue
            c = torch.empty(size, size, device="cuda", dtype=out_dtype or dtype)
            rows.append(_row(label + suffix, size, size, size, load(), a, b, c, cublas_call, reference, args.repeats))
    return rows


def llm(args, dtype=torch.bfloat16, label="kernels/gemm_sm90") -> list:
    """M = 8192 tokens through LLM layers' (N, K): TN (b as (N, K), F.linear's weight) and NN."""
    from cute_torch.kernels.gemm_sm90 import gemm
    rows, m = [], 8192
    for n, k in LLM_SHAPES:
        a = torch.randn(m, k, device="cuda").to(dtype)
        w = torch.randn(n, k, device="cuda").to(dtype)
        cublas_call, reference = _cublas(a, w, dtype)
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        rows.append(_row(f"{label} TN", m, n, k, lambda a, b, c: gemm(a, b.t(), c), a, w, c, cublas_call, reference,
                         args.repeats))
        if n >= 4 * m:                                  # N much larger than M: groups along N too
            rows.append(_row(f"{label} TN raster n", m, n, k, lambda a, b, c: gemm(a, b.t(), c, raster="n"), a, w,
                             c, cublas_call, reference, args.repeats))
        b_nn = w.t().contiguous()                       # (K, N) row-major: B is MN-major
        cublas_nn = lambda: torch.mm(a, b_nn, out=c)  # noqa: E731
        rows.append(_row(f"{label} NN", m, n, k, lambda a, b, c: gemm(a, b_nn, c), a, w, c, cublas_nn, reference,
                         args.repeats))
        a = w = b_nn = c = reference = None            # the next shape's tensors need the memory
    return rows


def fp16(args) -> list:
    """The library's square GEMMs in fp16 (the kernels' and cuBLAS's outputs fp16 too)."""
    return square(args, torch.half, KERNELS[:1], " fp16")


FUSED_SHAPES = [(8192, 8192, 2048), (8192, 8192, 4096), (8192, 2048, 8192)]


def fused(args) -> None:
    """linear + bias + GELU(tanh), linear + bias + residual and linear + bias, bf16: ours (one
    GEMM, the epilogue fused, the schedule gemm() chooses) against our best plain GEMM
    (cooperative or ping-pong), cuBLASLt's own bias + GELU epilogue (torch._addmm_activation),
    eager and Inductor, all checked against eager."""
    from cute_torch.kernels.gemm_sm90 import gemm
    F = torch.nn.functional
    print(f"\nfused epilogues, bf16; GPU ms (all kernels of a call), least of 3 medians of {args.repeats} taken in "
          "turn; 'vs plain': ours "
          "fused over our faster plain GEMM (cooperative or ping-pong)")
    print(f"{'case':24} {'M':>5} {'N':>5} {'K':>5} {'ours fused':>10} {'ours plain':>10} {'cuBLASLt':>9} "
          f"{'eager':>8} {'Inductor':>9} {'vs plain':>9} {'vs cuBLASLt':>11} {'vs Inductor':>11} {'max err':>8}")
    for m, n, k in FUSED_SHAPES:
        x = torch.randn(m, k, device="cuda").bfloat16()
        w = torch.randn(n, k, device="cuda").bfloat16() / k ** 0.5
        bias = torch.randn(n, device="cuda").bfloat16()
        residual = torch.randn(m, n, device="cuda").bfloat16()
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        cases = [("linear+bias+gelu_tanh", "gelu_tanh(acc + x0)", (bias,),
                  lambda x, w, bias, r: F.gelu(F.linear(x, w, bias), approximate="tanh"),
                  lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True)),
                 ("linear+bias+residual", "acc + x0 + x1", (bias, residual),
                  lambda x, w, bias, r: F.linear(x, w, bias) + r, None),
                 ("linear+bias", "acc + x0", (bias,), lambda x, w, bias, r: F.linear(x, w, bias),
                  lambda: F.linear(x, w, bias))]
        for name, expr, inputs, eager, cublaslt in cases:
            reference = eager(x, w, bias, residual)
            compiled = torch.compile(eager)
            compiled(x, w, bias, residual)
            try:
                cublaslt and cublaslt()
            except RuntimeError:              # a torch build without cuBLASLt's epilogue
                cublaslt = None
            c.fill_(float("nan"))
            gemm(x, w.t(), c, expr, inputs)
            err = _error(c, reference)
            sides = [lambda: gemm(x, w.t(), c, expr, inputs), lambda: eager(x, w, bias, residual),
                     lambda: compiled(x, w, bias, residual)]
            sides += [lambda s=s: gemm(x, w.t(), c, schedule=s) for s in ("cooperative", "pingpong")]
            ours, eager_ms, inductor, *plains = interleaved_ms(sides + ([cublaslt] if cublaslt else []),
                                                               args.repeats)
            plain, lt = min(plains[:2]), (plains[2] if cublaslt else float("nan"))
            print(f"{name:24} {m:5} {n:5} {k:5} {ours:10.3f} {plain:10.3f} {lt:9.3f} {eager_ms:8.3f} {inductor:9.3f} "
                  f"{ours / plain:9.3f} {lt / ours:11.2f} {inductor / ours:11.2f} {err:8.1e}"
                  f"{'  WRONG' if err > 2e-2 else ''}", flush=True)


TILE_SHAPES = [(1024, 1024, 1024), (1024, 4096, 4096), (1536, 1536, 1536), (1536, 1536, 4096),
               (3072, 3072, 3072), (2560, 2560, 2560), (1536, 3072, 2048),
               (3072, 1536, 1536), (2048, 2048, 2048), (4096, 2048, 1024), (4096, 4096, 4096), (8192, 4096, 4096)]


def tiles(args) -> None:
    """Each tile width on shapes where the last wave decides (bf16, TN), 128-row tiles (the
    cooperative schedule) and 64-row ones (ping-pong, `m64 x`), against cuBLAS; `chosen` is what
    gemm() takes."""
    from cute_torch.kernels.gemm_sm90 import SHORT_TILE_WIDTHS, gemm, host_arguments, transposes
    widths = (256, 240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64)
    variants = [(w, 128) for w in widths] + [(w, 64) for w in SHORT_TILE_WIDTHS]
    names = [f"{w}" if rows == 128 else f"m64x{w}" for w, rows in variants]
    print(f"\ntile widths, bf16 TN; GPU ms, median of {args.repeats}")
    print(f"{'M':>6} {'N':>6} {'K':>6} {'cuBLAS':>8} " + " ".join(f"{name:>8}" for name in names)
          + f" {'chosen':>9} {'ratio':>6} {'max err':>8}")
    for m, n, k in TILE_SHAPES:
        a, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
        cublas_call, reference = _cublas(a, w, torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        times = [kernel_ms(lambda: gemm(a, w.t(), c, tile_n=t, tile_m=rows), args.repeats) for t, rows in variants]
        swapped = transposes(a, w.t(), (c,), None, (), (None, None, None, None, False))
        config = host_arguments(w, a.t(), c.t())[3] if swapped else host_arguments(a, w.t(), c)[3]  # gemm()'s
        chosen = f"{'t:' if swapped else ''}{config.tile_m}x{config.tile_n}{'p' if config.pingpong else 'c'}"
        cublas, ours = interleaved_ms((cublas_call, lambda: gemm(a, w.t(), c)), args.repeats)
        c.fill_(float("nan"))
        gemm(a, w.t(), c)
        err = _error(c, reference)
        print(f"{m:6} {n:6} {k:6} {cublas:8.4f} " + " ".join(f"{t:8.4f}" for t in times)
              + f" {chosen:>9} {cublas / ours:6.2f} {err:8.1e}{'  WRONG' if err > 2e-2 else ''}", flush=True)


def gated(args) -> None:
    """SwiGLU silu(x @ wg) * (x @ wu) from one gated GEMM over interleave_gated(wg, wu), against
    our plain GEMM writing all 2N columns, eager and Inductor; then fp32 against bf16 outputs."""
    from cute_torch.kernels.gemm_common import interleave_gated
    from cute_torch.kernels.gemm_sm90 import gemm
    F = torch.nn.functional
    print(f"\ngated (SwiGLU), bf16; GPU ms, median of {args.repeats}")
    print(f"{'M':>6} {'N out':>6} {'K':>6} {'ours':>8} {'plain 2N':>8} {'eager':>8} {'Inductor':>9} {'vs eager':>9} "
          f"{'vs Inductor':>11} {'max err':>8}")
    for m, n, k in ((8192, 5632, 2048), (8192, 11008, 4096)):
        x = torch.randn(m, k, device="cuda").bfloat16()
        wg, wu = ((torch.randn(k, n, device="cuda") / k ** 0.5).bfloat16() for _ in range(2))
        b = interleave_gated(wg, wu)
        out, plain = (torch.empty(m, width, device="cuda", dtype=torch.bfloat16) for width in (n, 2 * n))
        ours = kernel_ms(lambda: gemm(x, b, out, "silu(gate) * up"), args.repeats)
        base = kernel_ms(lambda: gemm(x, b, plain), args.repeats)

        def eager():
            return F.silu(x @ wg) * (x @ wu)
        eager_ms = kernel_ms(eager, args.repeats)
        compiled = torch.compile(eager)
        compiled()
        inductor = kernel_ms(compiled, args.repeats)
        out.fill_(float("nan"))
        gemm(x, b, out, "silu(gate) * up")
        reference = F.silu((x.float() @ wg.float())) * (x.float() @ wu.float())   # fp32 gate and up, as ours
        err = _error(out, reference)
        print(f"{m:6} {n:6} {k:6} {ours:8.3f} {base:8.3f} {eager_ms:8.3f} {inductor:9.3f} {eager_ms / ours:9.2f} "
              f"{inductor / ours:11.2f} {err:8.1e}{'  WRONG' if err > 2e-2 else ''}", flush=True)
    print(f"\nfp32 outputs; GPU ms, median of {args.repeats}")
    print(f"{'M':>6} {'N':>6} {'K':>6} {'fp32 out':>8} {'bf16 out':>8} {'cuBLAS':>8} {'max err':>8}")
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 4096)):
        a, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
        c16, c32 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16), torch.empty(m, n, device="cuda")
        t32 = kernel_ms(lambda: gemm(a, w.t(), c32), args.repeats)
        t16 = kernel_ms(lambda: gemm(a, w.t(), c16), args.repeats)
        cublas = kernel_ms(lambda: torch.mm(a, w.t(), out=c16), args.repeats)
        err = _error(c32, a.float() @ w.float().t())
        print(f"{m:6} {n:6} {k:6} {t32:8.3f} {t16:8.3f} {cublas:8.3f} {err:8.1e}", flush=True)


def ampere(args) -> list:
    """The library's Ampere GEMM (mma.sync; on Hopper it runs without wgmma or TMA): each tile
    width, TN and NN, and linear + bias + GELU(tanh) fused against its plain GEMM."""
    from cute_torch.kernels.gemm_sm80 import gemm
    rows = []
    for size in args.sizes:
        a, w = (torch.randn(size, size, device="cuda").bfloat16() for _ in range(2))
        cublas_call, reference = _cublas(a, w, torch.bfloat16)
        c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
        for tile_n in (None, 128, 256):
            label = f"kernels/gemm_sm80 TN {'auto' if tile_n is None else f'tile {tile_n}'}"
            rows.append(_row(label, size, size, size, lambda a, b, c, t=tile_n: gemm(a, b.t(), c, tile_n=t), a, w, c,
                             cublas_call, reference, args.repeats))
        b_nn = w.t().contiguous()
        cublas_nn = lambda: torch.mm(a, b_nn, out=c)  # noqa: E731
        rows.append(_row("kernels/gemm_sm80 NN", size, size, size, lambda a, b, c: gemm(a, b_nn, c), a, w, c,
                         cublas_nn, reference, args.repeats))
    m, n, k = 8192, 8192, 4096
    x, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
    bias = torch.randn(n, device="cuda").bfloat16()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    plain = kernel_ms(lambda: gemm(x, w.t(), c), args.repeats)
    fused_ms = kernel_ms(lambda: gemm(x, w.t(), c, "gelu_tanh(acc + x0)", (bias,)), args.repeats)
    want = torch.nn.functional.gelu(x.float() @ w.float().t() + bias.float(), approximate="tanh")
    print(f"gemm_sm80 {m}x{n}x{k}: plain {plain:.3f} ms, + bias + GELU fused {fused_ms:.3f} ms "
          f"({fused_ms / plain - 1:+.1%}), max err {_error(c, want):.1e}", flush=True)
    return rows


def fp8(args) -> None:
    """e4m3 A (M, K) and B (N, K), both K-major (wgmma reads 8-bit operands so), bf16 output
    scaled by a per-tensor scale in the epilogue; cuBLAS's fp8 GEMM (torch._scaled_mm, the same
    scale) and bf16 cuBLAS in the same run."""
    from cute_torch.kernels.gemm_sm90 import gemm
    print(f"\nfp8 (e4m3) operands, bf16 output, acc * x0 with a per-tensor scale; GPU ms, median of {args.repeats}")
    print(f"{'M':>6} {'N':>6} {'K':>6} {'ours':>8} {'TFLOP/s':>8} {'cuBLAS fp8':>10} {'TFLOP/s':>8} {'ratio':>6} "
          f"{'bf16 cuBLAS':>11} {'max err':>8}")
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 14336), (8192, 14336, 4096)):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        scale = torch.tensor(0.5, device="cuda")
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ours = kernel_ms(lambda: gemm(a, w.t(), out, "acc * x0", inputs=(scale,)), args.repeats)
        one = torch.tensor(1.0, device="cuda")
        cublas = kernel_ms(lambda: torch._scaled_mm(a, w.t(), scale_a=scale, scale_b=one, out_dtype=torch.bfloat16),
                           args.repeats)
        a16, w16 = a.bfloat16(), w.bfloat16()
        bf16 = kernel_ms(lambda: torch.mm(a16, w16.t()), args.repeats)
        out.fill_(float("nan"))
        gemm(a, w.t(), out, "acc * x0", inputs=(scale,))
        err = _error(out, (a16.float() @ w16.float().t()) * 0.5)
        tf = 2 * m * n * k / 1e9
        print(f"{m:6} {n:6} {k:6} {ours:8.3f} {tf / ours:8.0f} {cublas:10.3f} {tf / cublas:8.0f} {cublas / ours:6.2f} "
              f"{bf16:11.3f} {err:8.1e}{'  WRONG' if err > 2e-2 else ''}", flush=True)


def clusters(args) -> None:
    """2-CTA clusters sharing B tiles by multicast against the same kernel without, bf16 TN."""
    from cute_torch.kernels.gemm_sm90 import choose_tile_n, gemm
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("\nclusters: GPU ms (TFLOP/s)")
    print("| M | N | K | tile | cuBLAS | ours | ours, clusters of 2 | cuBLAS / ours | cuBLAS / clusters | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    shapes = [(s, s, s) for s in args.sizes] + [(8192, n, k) for n, k in LLM_SHAPES]
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda").bfloat16()
        w = torch.randn(n, k, device="cuda").bfloat16()
        cublas_call, reference = _cublas(a, w, torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        tile = choose_tile_n(m, n, 1, sms)
        cublas, plain, clustered = interleaved_ms(
            (cublas_call, lambda: gemm(a, w.t(), c, tile_n=tile), lambda: gemm(a, w.t(), c, tile_n=tile, cluster=True)),
            args.repeats)
        c.fill_(float("nan"))
        gemm(a, w.t(), c, tile_n=tile, cluster=True)
        err = _error(c, reference)
        tf = 2 * m * n * k / 1e9
        print(f"| {m} | {n} | {k} | {tile} | {cublas:.3f} | {plain:.3f} ({tf / plain:.0f}) | {clustered:.3f} "
              f"({tf / clustered:.0f}) | {cublas / plain:.2f} | {cublas / clustered:.2f} | {err:.1e}"
              f"{'  WRONG' if not err <= 2e-2 else ''} |", flush=True)


def sustained(args) -> None:
    """cuBLAS and cute::gemm (the C++ op: the GPU never waits on the host) run back to back in
    turn, bf16 TN: call time, clocks, power and energy per call in the power-capped steady state."""
    import cute_torch.ops  # noqa: F401 - torch.ops.cute
    print(f"\nsustained: each side {args.seconds:.0f} s back to back, twice in turn (us per call, SM MHz, W, mJ)")
    print("| M | N | K | cuBLAS us | ours us | cuBLAS / ours | cuBLAS MHz / W / mJ | ours MHz / W / mJ | max err |")
    print("|---|---|---|---|---|---|---|---|---|")
    shapes = [(s, s, s) for s in args.sizes] + [(8192, 2048, 2048), (8192, 6144, 2048), (8192, 8192, 2048),
                                                 (8192, 2048, 8192)]
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda").bfloat16()
        w = torch.randn(n, k, device="cuda").bfloat16()
        cublas_call, reference = _cublas(a, w, torch.bfloat16)
        err = _error(torch.ops.cute.gemm(a, w.t(), "acc", [], None), reference)
        sides = interleaved_steady([cublas_call, lambda: torch.ops.cute.gemm(a, w.t(), "acc", [], None)],
                                   args.seconds)
        best = dict(zip(("cuBLAS", "ours"), sides))
        cells = {side: f"{clock:.0f} / {watts:.0f} / {watts * ms:.1f}" for side, (ms, clock, watts) in best.items()}
        print(f"| {m} | {n} | {k} | {best['cuBLAS'][0] * 1e3:.1f} | {best['ours'][0] * 1e3:.1f} | "
              f"{best['cuBLAS'][0] / best['ours'][0]:.3f} | {cells['cuBLAS']} | {cells['ours']} | {err:.1e}"
              f"{'  WRONG' if not err <= 2e-2 else ''} |", flush=True)


def _triton(m, n, k):
    """Inductor's Triton GEMM templates alone (max-autotune-no-cudagraphs, GEMM backends TRITON)
    for x @ w.t() of these sizes: (GPU ms function, seconds the first call took to autotune)."""
    import torch._inductor.config as inductor
    torch._dynamo.reset()
    with inductor.patch(max_autotune_gemm_backends="TRITON"):
        compiled = torch.compile(lambda x, w: x @ w.t(), mode="max-autotune-no-cudagraphs", dynamic=False)
        x, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
        start = time.perf_counter()
        compiled(x, w)
        torch.cuda.synchronize()
    return compiled, time.perf_counter() - start


def _quack():
    """quack's GEMM (CuTe DSL), where installed: (a, b) -> a @ b, else None. Its entry as of
    quack-kernels 0.2.2, autotuned on each shape's first call."""
    try:
        from quack.gemm_interface import gemm as quack_gemm
    except Exception:   # not installed, or another version's interface
        return None
    return lambda a, b: quack_gemm(a, b, tuned=True)


def competitors(args) -> None:
    """Ours against cuBLAS, Inductor's Triton templates (max-autotune) and quack where it
    imports, bf16 TN, on squares of --sizes and two LLM shapes; every result checked against
    cuBLAS's."""
    from cute_torch.kernels.gemm_sm90 import gemm
    quack = _quack()
    print(f"\ncompetitors, bf16 TN; GPU ms (TFLOP/s), least of 3 medians of {args.repeats} taken in turn; quack "
          f"{'imported' if quack else 'not importable here'}")
    print("| M | N | K | ours | cuBLAS | Triton (max-autotune) | quack | cuBLAS / ours | Triton / ours | "
          "Triton tuning s | max err (ours, Triton) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    shapes = [(s, s, s) for s in args.sizes] + [(8192, 4096, 4096), (8192, 11008, 4096)]
    for m, n, k in shapes:
        a, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
        cublas_call, reference = _cublas(a, w, torch.bfloat16)
        c = torch.full_like(reference, float("nan"))
        gemm(a, w.t(), c)
        err = _error(c, reference)
        triton, tuning = _triton(m, n, k)
        triton_err = _error(triton(a, w), reference)
        sides = [cublas_call, lambda: gemm(a, w.t(), c), lambda: triton(a, w)]
        if quack:
            sides.append(lambda: quack(a, w.t()))
        cublas, ours, triton_ms, *quack_ms = interleaved_ms(sides, args.repeats)
        quack_ms = quack_ms[0] if quack else float("nan")
        tf = 2 * m * n * k / 1e9

        def cell(ms):
            return f"{ms:.3f} ({tf / ms:.0f})" if ms == ms else "-"
        flag = "  WRONG" if not (err <= 2e-2 and triton_err <= 2e-2) else ""
        print(f"| {m} | {n} | {k} | {cell(ours)} | {cell(cublas)} | {cell(triton_ms)} | {cell(quack_ms)} | "
              f"{cublas / ours:.2f} | {triton_ms / ours:.2f} | {tuning:.0f} | {err:.1e}, {triton_err:.1e}{flag} |",
              flush=True)


def plot(rows: list, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {path} not written)")
        return
    lib = [r for r in rows if r["label"] == KERNELS[0][0]]
    pingpong = [r for r in rows if r["label"] == "kernels/gemm_sm90 ping-pong"]
    if not lib:
        return
    sizes = [r["size"][0] for r in lib]
    plt.figure(figsize=(6, 4))
    plt.plot(sizes, [r["tflops"] for r in lib], "o-", label="cute_torch kernels/gemm_sm90")
    if len(pingpong) == len(lib):
        plt.plot(sizes, [r["tflops"] for r in pingpong], "^-", label="cute_torch, ping-pong schedule")
    plt.plot(sizes, [r["cublas_tflops"] for r in lib], "s--", label="cuBLAS (torch.mm)")
    plt.xscale("log", base=2)
    plt.xlabel("M = N = K")
    plt.ylabel("TFLOP/s (bf16, GPU time)")
    plt.title(torch.cuda.get_device_name())
    plt.legend()
    plt.grid(alpha=0.3)
    plt.tight_layout()
    plt.savefig(path, dpi=120)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sections", nargs="+", default=["square", "llm", "fp16", "fused"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--only", default="", help="in the square section, the kernels whose label contains this")
    parser.add_argument("--plot", default="", help="write TFLOP/s against size (square section) to this PNG")
    parser.add_argument("--seconds", type=float, default=2.0, help="each side's run in the sustained section")
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, median of {args.repeats}")
    print(HEADER)
    rows = []
    if "square" in args.sections:
        rows += square(args)
    if "llm" in args.sections and _runs_here((9, 0)):
        rows += llm(args)
    if "fp16" in args.sections and _runs_here((9, 0)):
        rows += fp16(args)
    if "fused" in args.sections and _runs_here((9, 0)):
        fused(args)
    if "tiles" in args.sections and _runs_here((9, 0)):
        tiles(args)
    if "gated" in args.sections and _runs_here((9, 0)):
        gated(args)
    if "ampere" in args.sections and _runs_here((8, 0)):
        rows += ampere(args)
    if "fp8" in args.sections and _runs_here((9, 0)):
        fp8(args)
    if "clusters" in args.sections and _runs_here((9, 0)):
        clusters(args)
    if "competitors" in args.sections and _runs_here((9, 0)):
        competitors(args)
    if "sustained" in args.sections and _runs_here((9, 0)):
        sustained(args)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
