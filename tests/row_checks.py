"""Checks the row-kernel tests share: poisoned outputs, seeded inputs, element-wise comparison
against a float64 reference with a tolerance per dtype (GPU tier); how many CTAs of a compiled
kernel an SM's registers fit (CPU tier); the norm backward's kernel arguments (CPU tier)."""

import torch

from cute_torch.kernels.row_reduce import dynamic_rows, register_ctas


def poison_allocator():
    """Fills free blocks of both of the caching allocator's pools with NaN."""
    blocks = [torch.full((64 << 20,), float("nan"), device="cuda")]
    blocks += [torch.full((1 << 18,), float("nan"), device="cuda") for _ in range(8)]
    torch.cuda.synchronize()
    del blocks


def rand_rows(shape, seed, dtype, scale=1.0):
    """Seeded normal values (times `scale`) of `shape` in `dtype`, on the GPU."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype).cuda()


def check_close(got, want, dtype, what):
    """Every element of `got` finite and close to `want` (float64) within `dtype`'s tolerance."""
    tol = {torch.float32: 2e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}[dtype]
    got = got.double().cpu()
    assert torch.isfinite(got).all(), f"{what}: non-finite outputs (poison left?)"
    torch.testing.assert_close(got, want.cpu(), rtol=tol, atol=tol * max(1.0, want.abs().max().item()) * 0.5,
                               msg=lambda m: f"{what}: {m}")


def ctas_per_sm(kernel: dict) -> int:
    """CTAs of a compiled kernel (its metadata: registers, block_dims) that an SM's registers fit
    (row_reduce.register_ctas)."""
    threads = kernel["block_dims"][0] * kernel["block_dims"][1] * kernel["block_dims"][2]
    return register_ctas(threads, kernel["registers"])


def norm_backward_args(x, w, layer: bool, bias: bool) -> tuple:
    """norms._backward's arguments over rows like `x` with weight `w` (rstd, mean and the
    gradients' partial rows placeholders, as norms.norm_backward passes them): the weight's
    gradient, the bias's where `bias`, the mean where `layer`."""
    n = x.shape[1]
    stat, part = dynamic_rows(torch.empty(x.shape[0])), dynamic_rows(torch.empty(1, n))
    return (dynamic_rows(x), w, dynamic_rows(x), stat, stat if layer else None, dynamic_rows(x), part,
            part if bias else None, w, w if bias else None)
