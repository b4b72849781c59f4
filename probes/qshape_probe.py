# Forwards at long bf16 rows (M x N = 2^27): our shapes (main) against quack's shape (256-thread CTAs of
# 64 values, one row per cluster, no walk; registers or staged by cp.async) and quack itself; fraction of
# the fastest copy of the run, two rounds. Every output checked against float32.
import importlib
import sys
import torch
import torch.nn.functional as F
sys.path.insert(0, "benchmarks")
from timing import kernel_ms
from kernels import norms, softmax
from kernels.row_reduce import RowConfig
try:
    qs, qr, ql = (importlib.import_module(f"quack.{m}") for m in ("softmax", "rmsnorm", "layernorm"))
except Exception as e:  # noqa: BLE001
    print("quack:", e)
    qs = qr = ql = None

sm_shape, nm_shape = softmax.forward_shape, norms.forward_shape
DTYPE = getattr(torch, sys.argv[1]) if len(sys.argv) > 1 else torch.bfloat16
NS = [int(a) for a in sys.argv[2:]] or [32768, 65536, 131072]
def q(n):
    return RowConfig(n, 16 // torch.empty((), dtype=DTYPE).element_size(), 256, 256, n // 16384)
def sm_variant(kind):
    return {"main": sm_shape, "q-reg": lambda a, t, log, d, o=None: (q(t[0].shape[-1]), None),
            "q-staged": lambda a, t, log, d, o=None: (q(t[0].shape[-1]), "staged"),
            "q-staged3": lambda a, t, log, d, o=None: (q(t[0].shape[-1]), "staged3"),
            "main-staged": lambda a, t, log, d, o=None: (sm_shape(a, t, log, d, o)[0], "staged"),
            "q-direct": lambda a, t, log, d, o=None: (q(t[0].shape[-1]), "direct"),
            "q-direct3": lambda a, t, log, d, o=None: (q(t[0].shape[-1]), "direct3")}[kind]
def nm_variant(kind):
    return {"main": nm_shape, "q-reg": lambda a, t, rms, d, o=None: (q(t[0].shape[-1]), 1),
            "q-staged": lambda a, t, rms, d, o=None: (q(t[0].shape[-1]), -1),
            "q-staged3": lambda a, t, rms, d, o=None: (q(t[0].shape[-1]), -3),
            "q-direct3": lambda a, t, rms, d, o=None: (q(t[0].shape[-1]), -5)}[kind]
def copy_tbs(x):
    out = torch.empty_like(x)
    return 2 * x.numel() * x.element_size() / kernel_ms(lambda: out.copy_(x), 20) / 1e9
def err(got, ref):
    return ((got.float() - ref).abs().max() / ref.abs().max()).item()

print(torch.cuda.get_device_name(), DTYPE, NS)
ceiling = copy_tbs(torch.randn(1 << 27, device="cuda").to(DTYPE))
res, errs = {}, {}
for rnd in range(2):
    for n in NS:
        g = torch.Generator(device="cuda").manual_seed(n + rnd)
        x = (torch.randn((1 << 27) // n, n, device="cuda", generator=g) * 3).to(DTYPE)
        w = torch.randn(n, device="cuda", generator=g).to(DTYPE)
        b = torch.randn(n, device="cuda", generator=g).to(DTYPE)
        ceiling = max(ceiling, copy_tbs(x))
        bytes_ = 2 * x.numel() * x.element_size()
        xf = x.float()
        cases = []
        for log in (False, True):
            ref = torch.log_softmax(xf, -1) if log else torch.softmax(xf, -1)
            for kind in ("main", "q-reg", "q-staged", "q-staged3") + \
                    (() if log else ("main-staged", "q-direct", "q-direct3")):
                def call(kind=kind, log=log):
                    softmax.forward_shape = sm_variant(kind)
                    try:
                        return softmax.softmax(x, log=log)
                    finally:
                        softmax.forward_shape = sm_shape
                cases.append((("log_softmax" if log else "softmax"), kind, call, ref, 0))
        if qs:
            cases.append(("softmax", "QUACK", lambda: qs.softmax_fwd(x), torch.softmax(xf, -1), 0))
        for rms in (True, False):
            ref = F.rms_norm(xf, (n,), w.float(), 1e-6) if rms else F.layer_norm(xf, (n,), w.float(), b.float(), 1e-6)
            for kind in ("main", "q-reg", "q-staged", "q-staged3") + (("q-direct3",) if DTYPE != torch.float32 or rms
                                                                       else ()):
                def call(kind=kind, rms=rms):
                    norms.forward_shape = nm_variant(kind)
                    try:
                        return norms.norm_forward(x, w, None if rms else b, eps=1e-6, rms=rms)[0]
                    finally:
                        norms.forward_shape = nm_shape
                cases.append(("rms_norm" if rms else "layer_norm", kind, call, ref, 0))
        if qr:
            cases.append(("rms_norm", "QUACK", lambda: qr.rmsnorm_fwd(x, w, eps=1e-6, store_rstd=True)[0],
                          F.rms_norm(xf, (n,), w.float(), 1e-6), 0))
            w32 = w.float()
            cases.append(("layer_norm", "QUACK(no b)",
                          lambda: ql.layernorm(x, w32, eps=1e-6, return_rstd=True, return_mean=True)[0],
                          F.layer_norm(xf, (n,), w.float(), None, 1e-6), 0))
        for op, kind, call, ref, _ in cases:
            try:
                e = err(call(), ref)
                tbs = bytes_ / kernel_ms(call, 20) / 1e9
            except Exception as ex:  # noqa: BLE001
                print(f"{op} {n} {kind}: {type(ex).__name__}: {str(ex)[:200]}", flush=True)
                continue
            res.setdefault((op, n, kind), []).append(tbs)
            errs[(op, n, kind)] = max(errs.get((op, n, kind), 0), e)
            print(f"round {rnd} {op:11} {n:7} {kind:12} {tbs:.2f} TB/s err {e:.1e}", flush=True)
print(f"copy ceiling {ceiling:.2f} TB/s")
for (op, n, kind), v in sorted(res.items()):
    print(f"{op:11} {n:7} {kind:12} " + " / ".join(f"{t / ceiling:.3f}" for t in v) + f"  err {errs[(op, n, kind)]:.0e}")
