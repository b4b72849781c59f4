"""Loads the torch extension (TORCH_LIBRARY(cute)) so `torch.ops.cute.*` exist."""

from __future__ import annotations

import os

_loaded = False


def load() -> None:
    global _loaded
    if _loaded:
        return
    import torch

    torch.ops.load_library(os.path.join(os.path.dirname(__file__), "lib", "libcute_torch_ops.so"))
    _loaded = True
