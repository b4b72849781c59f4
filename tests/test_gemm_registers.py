"""The Hopper GEMM compiles for sm_90a without spills in every variant its rules pick
(host_arguments: choose_tile_n, choose_schedule, short_tile_n, staged_inputs) for shapes that
reach each rule and the epilogues the backend fuses. CPU tier: ptxas reports the spills; a
spilling variant is a performance bug the GPU tests would not catch."""

import warnings

import torch

import cute_torch as cute
from cute_torch.kernels.gemm_sm90 import _gemm_host, host_arguments

# Shapes that reach every rule: 64-row tiles of 128 / 192 / 256 columns, one full wave of 144-wide
# tiles, 208-wide ones, 128 x 256 cooperative and (with a fused epilogue) ping-pong, few rows,
# ping-pong over 128 x 192 tiles (wide_pingpong: plain, K <= 2048).
SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 1536, 1536), (1536, 1536, 1536), (2560, 2560, 2560),
          (4096, 4096, 4096), (4096, 4096, 1024), (8192, 2048, 8192), (16, 4096, 4096), (8192, 2752, 1024)]
# name: (epilogue, how many inputs (a bias, then a residual), outputs; -1: one Float32 output)
EPILOGUES = {"plain": (None, 0, 1), "bias + gelu_tanh": ("gelu_tanh(acc + x0)", 1, 1),
             "pre-activation and gelu_tanh": (("acc + x0", "gelu_tanh(acc + x0)"), 1, 2),
             "bias + residual": ("acc + x0 + x1", 2, 1), "fp32 output": (None, 0, -1)}


def _arguments(m, n, k, k_major_b, epilogue, inputs, outputs):
    a = torch.empty(m, k, dtype=torch.bfloat16)
    b = torch.empty(n, k, dtype=torch.bfloat16).t() if k_major_b else torch.empty(k, n, dtype=torch.bfloat16)
    extra = (torch.empty(n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16))[:inputs]
    c = torch.empty(m, n, dtype=torch.float32 if outputs == -1 else torch.bfloat16)
    return host_arguments(a, b, (c, torch.empty_like(c)) if outputs == 2 else c, epilogue, extra)


def test_every_variant_the_rules_pick_compiles_without_spills():
    spills, families, wide = {}, set(), False
    for m, n, k in SHAPES:
        for k_major_b in (True, False):
            for name, (epilogue, inputs, outputs) in EPILOGUES.items():
                args = _arguments(m, n, k, k_major_b, epilogue, inputs, outputs)
                config = args[3]
                key = (config, k_major_b, name)
                if key in spills:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", cute.SpillWarning)     # counted below
                    kernel = cute.compile(_gemm_host, *args, options={"arch": "sm_90a"})
                spills[key] = kernel.metadata["kernels"][0]["spill_stores"]
                families.add((config.tile_m, config.pingpong, bool(config.staged)))
                wide = wide or (config.pingpong and config.tile_m == 128 and config.tile_n == 192)
    assert not {key: s for key, s in spills.items() if s}, "variants that spill (config, K-major B, epilogue): bytes"
    # The shapes reached 64-row ping-pong, 128-row ping-pong with a staged residual, and the
    # cooperative schedule with and without one.
    assert {(64, True, False), (128, True, True), (128, False, False), (128, False, True)} <= families, families
    assert wide
