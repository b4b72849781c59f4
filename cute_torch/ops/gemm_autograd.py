"""Autograd of cute::gemm and cute::gemm.multi for any epilogue: the derivative expressions.
The Autograd kernel itself is C++ (csrc/torch/GemmAutograd.cpp, like cute::pointwise's and the
row ops'); it asks gradient_table once per epilogues.

With out_k = e_k(acc, x0..xN) and acc = a @ b, the backward is
    dacc  = sum_k  g_k * d e_k / d acc          (one cute::pointwise kernel per output)
    da    = dacc @ b^T,   db = a^T @ dacc       (cute::gemm, transposes read in place)
    dx_i  = sum_k  g_k * d e_k / d x_i, summed down to x_i's shape (fp32, then x_i's dtype)
with the derivative expressions from cute_torch.pointwise.grad (torch's derivatives.yaml).
`acc` is recomputed by one more GEMM only when a derivative needs it (an epilogue linear in
acc, such as a bias or a residual, needs none). cute_torch.ops.linear saves the pre-activation
in its forward instead; this is the general path. A gated GEMM's epilogues read `gate` and
`up` instead of `acc`: each has its own derivative, and dacc interleaves dgate and dup the way
the accumulator columns are (kernels/gemm_common.interleave_gated).
"""

from __future__ import annotations

from ..pointwise.grad import gradient


def gradient_table(epilogues: str, n: int) -> str:
    """What csrc/torch/GemmAutograd.cpp asks on its first backward of these epilogues (joined by
    gemm_build.SEPARATOR) over n inputs: "1" (acc) or "2" (gate and up), then per epilogue its
    derivative expressions, each `g * d e / d name` over x0..x{n-1}, the accumulators as x{n}
    (and x{n+1}) and g last, for the accumulators first and then each input, "" where zero:
    the epilogues joined by SEPARATOR, an epilogue's derivatives by UNIT."""
    from cute_torch.kernels.gemm_common import accumulators_as_inputs, is_gated
    from .gemm_build import SEPARATOR
    exprs = epilogues.split(SEPARATOR)
    gated = is_gated(exprs)
    names = n + 2 if gated else n + 1                  # the inputs, then acc (or gate and up)
    table = []
    for e in exprs:
        e = accumulators_as_inputs(e, n)
        order = list(range(n, names)) + list(range(n))
        table.append(UNIT.join(gradient(e, names, i) or "" for i in order))
    return ("2" if gated else "1") + SEPARATOR.join(table)


UNIT = "\x1f"          # between one epilogue's derivatives (GemmAutograd.cpp's kUnit)
