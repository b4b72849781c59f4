"""`cutlass.cute.runtime`: tensors from DLPack producers."""

from cute_torch import from_dlpack  # noqa: F401

__all__ = ["from_dlpack"]
