"""Kernels written in the DSL, as a user would: copy-bound ones (elementwise add, transpose), the
Hopper GEMM (gemm_sm90, gemm_tuning), and the row kernels (row_reduce, softmax, norms)."""

from .copy_kernels import elementwise_add, transpose

__all__ = ["elementwise_add", "transpose"]
