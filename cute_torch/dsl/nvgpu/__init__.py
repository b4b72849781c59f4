"""`cute.nvgpu`: the operations of NVIDIA's tensor cores and copy engines, under CuTe DSL's
names. `warp` holds the Ampere-style warp MMA (mma.sync), `warpgroup` Hopper's warpgroup MMA
(wgmma.mma_async) with its fences, `cpasync` the TMA copies."""

from ..tiled_copy import CopyUniversalOp
from . import cpasync, warp, warpgroup
from .cpasync import CacheEvictionPriority

__all__ = ["CacheEvictionPriority", "CopyUniversalOp", "cpasync", "warp", "warpgroup"]
