"""cute_torch: a Python DSL for GPU kernels in the style of CuTe DSL, compiled by a C++
MLIR/LLVM pipeline, run inside PyTorch.

    import cute_torch as cute

    @cute.kernel
    def add(a, b, c):
        i = cute.arch.block_idx()[0] * 256 + cute.arch.thread_idx()[0]
        if i < cute.size(a):
            c[i] = a[i] + b[i]

    @cute.jit
    def vector_add(a, b, c):
        add(a, b, c).launch(grid=((cute.size(a) + 255) // 256, 1, 1), block=(256, 1, 1))

`compile_mlir` is the low-level entry underneath: MLIR text in, CUBINs and host entries out.
"""

from . import _source_tree, env

_source_tree.install()  # `cute_torch.kernels` from a source checkout's kernels/ folder
from ._C import CudaError, compiler_version
from .compiler import CompiledModule, HostFunction, compile_mlir
from .errors import CompileError, Diagnostic, PtxasError, ToolkitError
from .toolkit import SUPPORTED_ARCHS, gpu_available, target_arch

# The DSL, under CuTe DSL's names.
from .dsl import arch, math
from .dsl.control import const_expr, range, range_constexpr
from .dsl.diagnostics import DSLError, SpillWarning
from .dsl.jit import CompiledFunction, Constexpr, compile, jit, kernel
from .dsl.numeric import (BFloat16, Boolean, Float, Float8E4M3FN, Float8E5M2, Float16, Float32, Float64, Int8, Int16,
                          Int32, Int64, Integer, Numeric, Uint8, Uint16, Uint32, Uint64, assume, full_like, where)
from .dsl.printing import printf
from .dsl.layout import (ComposedLayout, Layout, Swizzle, append, blocked_product, ceil_div, coalesce, complement,
                         composition, cosize, depth, filter, filter_zeros, flat_divide, flat_product,
                         flatten, format_layout, get, group_modes, size_in_bytes,
                         idx2crd, left_inverse, local_partition, local_tile, logical_divide, logical_product,
                         make_composed_layout, make_identity_layout, make_layout, make_layout_tv,
                         make_ordered_layout, make_swizzle, max_common_layout, max_common_vector, prepend,
                         print_layout, raked_product, rank, recast_layout, right_inverse, select, shape, shape_div,
                         size, slice_, tile_to_shape, tiled_divide, tiled_product, zipped_divide, zipped_product)
from .dsl.tensor import (Tensor, TensorArg, domain_offset, from_dlpack, make_fragment, make_fragment_like,
                         make_rmem_tensor, make_rmem_tensor_like, make_tensor)
from .dsl.tensor_ssa import ReductionOp, TensorSSA
from .dsl.pointer import Pointer, recast_ptr
from .dsl.identity import elem_less, make_identity_tensor
from .dsl.smem import SmemAllocator, struct
from .dsl.copy import autovec_copy, copy, prefetch
from .dsl import nvgpu, pipeline
from .dsl.mma import ThrMma, TiledMma, gemm, make_tiled_mma
from .dsl.tiled_copy import (ThrCopy, TiledCopy, make_copy_atom, make_tiled_copy_A, make_tiled_copy_B,
                             make_tiled_copy_C, make_tiled_copy_tv)


def crd2idx(coord, layout):
    """The offset of `coord` in `layout` (CuTe's crd2idx(coord, shape, stride))."""
    return layout(coord)

__version__ = "0.1.0"

__all__ = [
    "BFloat16", "Boolean", "CompiledFunction", "Constexpr", "DSLError", "Float", "Float16", "Float32", "Float64",
    "Float8E4M3FN", "Float8E5M2", "Int16", "Int32", "Int64", "Int8", "Integer", "Layout", "Numeric", "Tensor",
    "TensorArg", "Uint16", "Uint32", "Uint64", "Uint8", "arch", "compile", "const_expr", "from_dlpack",
    "assume",
    "full_like", "jit", "kernel", "make_layout", "math", "printf", "range", "range_constexpr", "size", "where",
    # layouts, tensors, TensorSSA
    "ComposedLayout", "ReductionOp", "Swizzle", "TensorSSA", "append", "autovec_copy", "blocked_product", "coalesce",
    "complement", "composition", "copy", "cosize", "crd2idx", "depth", "filter", "filter_zeros", "flat_divide",
    "flat_product", "flatten", "format_layout", "get", "idx2crd", "left_inverse", "local_partition", "local_tile",
    "logical_divide", "logical_product", "make_composed_layout", "make_fragment", "make_fragment_like",
    "make_identity_layout", "make_layout_tv", "make_ordered_layout", "make_rmem_tensor", "make_rmem_tensor_like",
    "make_swizzle", "make_tensor", "max_common_layout", "max_common_vector", "prepend", "print_layout",
    "raked_product", "rank", "recast_layout", "right_inverse", "select", "shape", "shape_div", "slice_",
    "tile_to_shape", "tiled_divide", "tiled_product", "zipped_divide", "zipped_product", "ceil_div", "group_modes",
    "size_in_bytes", "domain_offset", "Pointer", "recast_ptr", "make_identity_tensor", "elem_less",
    "SmemAllocator", "struct", "SpillWarning", "prefetch",
    # the tensor-core layer
    "nvgpu", "pipeline", "ThrMma", "TiledMma", "gemm", "make_tiled_mma", "ThrCopy", "TiledCopy", "make_copy_atom",
    "make_tiled_copy_tv", "make_tiled_copy_A", "make_tiled_copy_B",
    "make_tiled_copy_C",
    "CompileError",
    "CompiledModule",
    "CudaError",
    "Diagnostic",
    "HostFunction",
    "PtxasError",
    "SUPPORTED_ARCHS",
    "ToolkitError",
    "compile_mlir",
    "compiler_version",
    "env",
    "gpu_available",
    "target_arch",
]
