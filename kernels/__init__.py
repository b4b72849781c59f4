"""Kernels written in the DSL: copy-bound ones (elementwise add, transpose) for now."""

from .copy_kernels import elementwise_add, transpose

__all__ = ["elementwise_add", "transpose"]
