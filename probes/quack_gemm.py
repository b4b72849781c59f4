# quack's GEMM (0.2.2) beside ours and cuBLAS, bf16 TN: its default config (128 x 192, clusters of 2,
# ping-pong) on every shape, autotuned on the squares; GPU ms by interleaved medians; outputs checked.
import sys
import time
import torch
sys.path.insert(0, "benchmarks")
from timing import interleaved_ms
from cute_torch.kernels.gemm_sm90 import gemm
from quack.gemm_interface import gemm as quack_gemm

print(torch.cuda.get_device_name())
shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (8192, 12288, 4096), (8192, 11008, 4096),
          (8192, 4096, 11008), (8192, 14336, 4096), (8192, 4096, 14336), (4096, 2752, 1024), (8192, 2752, 1024)]
print("| M | N | K | cuBLAS / ours | cuBLAS / quack (default) | cuBLAS / quack (tuned) | ours TFLOP/s | tune s | err ours, quack |")
for m, n, k in shapes:
    a, w = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
    ref = a.float() @ w.float().t()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm(a, w.t(), c)
    qd = quack_gemm(a, w.t(), tuned=False)
    def e(t):
        return ((t.float() - ref).abs().max() / ref.abs().max()).item()
    sides = [lambda: torch.mm(a, w.t()), lambda: gemm(a, w.t(), c), lambda: quack_gemm(a, w.t(), tuned=False)]
    tune = float("nan")
    if m == n == k:
        t0 = time.perf_counter()
        quack_gemm(a, w.t(), tuned=True)
        torch.cuda.synchronize()
        tune = time.perf_counter() - t0
        sides.append(lambda: quack_gemm(a, w.t(), tuned=True))
    ms = interleaved_ms(sides, 30)
    tuned = f"{ms[0] / ms[3]:.3f}" if len(ms) > 3 else "-"
    print(f"| {m} | {n} | {k} | {ms[0] / ms[1]:.3f} | {ms[0] / ms[2]:.3f} | {tuned} | {2 * m * n * k / ms[1] / 1e9:.0f} | "
          f"{tune:.0f} | {e(c):.1e}, {e(qd):.1e} |", flush=True)
