"""How the row kernels' configuration was chosen: the norms and softmax at long rows under
hand-made configurations (values per thread, hence CTAs per cluster), as a fraction of copy
bandwidth. The shipped choices are kernels/norm_shapes.forward_plan / backward_config and
kernels/softmax.values_per_thread; benchmarks/RESULTS.md has the measured sweep.

    python benchmarks/row_configs.py [--ns 8192 16384 32768 65536 131072] [--repeats 10]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch
from timing import kernel_ms

from cute_torch.kernels import norm_shapes, norms, softmax
from cute_torch.kernels.row_reduce import (MAX_CLUSTER, MAX_N, dynamic_rows, fast_memory, persistent_groups,
                                           resident_groups, row_config)


def _label(cfg) -> str:
    return f"c{cfg.cluster}/t{cfg.threads}/v{cfg.vectors * cfg.vec}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ns", nargs="+", type=int, default=[8192, 16384, 32768, 65536, 131072])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    total = 1 << 27
    print(f"{torch.cuda.get_device_name()}, bf16, M x N = 2^27; fraction of copy bandwidth per configuration "
          "(c: CTAs per cluster, t: threads per CTA, v: row values per thread)")
    for n in args.ns:
        m = total // n
        x = torch.randn(m, n, device="cuda").bfloat16()
        dy, w, out = torch.randn_like(x), torch.randn(n, device="cuda").bfloat16(), torch.empty_like(x)
        copy = 2 * x.numel() * 2 / kernel_ms(lambda: out.copy_(x), args.repeats, copies=True) / 1e9

        def fraction(call, bytes_per_element):
            return bytes_per_element * x.numel() * 2 / kernel_ms(call, args.repeats) / 1e9 / copy

        def configs(values):
            for v in values:
                cfg = row_config(n, 2, max_values=v, max_cluster=MAX_CLUSTER)
                if cfg.vectors * cfg.vec <= MAX_N // 512:
                    yield cfg
        y = softmax.softmax(x)
        line = f"softmax  N={n:6}"
        for cfg in configs((32, 64)):
            walk = softmax.forward_walk(cfg, 16, False, fast_memory(0))
            forward = softmax._forward.compile(dynamic_rows(x), dynamic_rows(out), 1, cfg, False, walk)
            groups = persistent_groups(m, cfg, resident_groups(forward, cfg, 0)) if walk == "persistent" else 1
            fwd = fraction(lambda: forward(dynamic_rows(x), dynamic_rows(out), groups, cfg, False, walk), 2)
            walk = softmax.backward_walk(cfg, 16, fast_memory(0))
            back = (dynamic_rows(y), dynamic_rows(dy), dynamic_rows(out))
            backward = softmax._backward.compile(*back, 1, cfg, False, walk)
            groups = persistent_groups(m, cfg, resident_groups(backward, cfg, 0)) if walk else 1
            bwd = fraction(lambda: backward(*back, groups, cfg, False, walk), 3)
            line += f"  {_label(cfg)}: fwd {fwd:.2f} bwd {bwd:.2f}"
        print(line, flush=True)
        for rms in (True, False):
            b = None if rms else w
            _, _, rstd, mean = norms.norm_forward(x, w, b, eps=1e-6, rms=rms)
            rows = [dynamic_rows(t) for t in (x, dy, out, rstd, mean, torch.empty(m, device="cuda"),
                                              None if rms else torch.empty(m, device="cuda"))]
            xr, dyr, outr, rstdr, meanr, stat, stat2 = rows
            line = f"{'rms_norm' if rms else 'layer_norm':10} N={n:6}"
            for cfg in configs((16, 32, 64)):
                fwd = fraction(lambda: norms._forward(xr, None, w, b, outr, None, stat, stat2, 1e-6, 1, cfg, rms, 1), 2)
                line += f"  fwd {_label(cfg)}: {fwd:.2f}"
            for cfg in configs((16, 32, 64)):
                # The backward's base CTA (backward_config departs from it at many widths).
                cfg = replace(cfg, threads=512)
                probe = dynamic_rows(torch.empty(1, n, device="cuda"))
                dw, db = torch.empty_like(w), None if rms else torch.empty_like(w)
                compiled = norms._backward.compile(xr, w, dyr, rstdr, meanr, outr, probe, None if rms else probe, dw,
                                                   db, 1, cfg)
                smem = norm_shapes.backward_ring(cfg, 2, 2, 2)[1]
                groups = persistent_groups(m, cfg, resident_groups(compiled, cfg, 0, smem))
                part = torch.empty(groups, n, device="cuda")
                dw_r, db_r = dynamic_rows(part), None if rms else dynamic_rows(torch.empty_like(part))
                bwd = fraction(lambda: compiled(xr, w, dyr, rstdr, meanr, outr, dw_r, db_r, dw, db, groups, cfg), 3)
                line += f"  bwd {_label(cfg)}: {bwd:.2f}"
            print(line, flush=True)

if __name__ == "__main__":
    main()
