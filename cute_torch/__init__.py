"""cute_torch: a Python DSL for GPU kernels in the style of CuTe DSL, compiled by a C++
MLIR/LLVM pipeline, run inside PyTorch.

This is the foundation: `compile_mlir` turns MLIR (host functions + gpu.modules) into CUBINs and
JIT-compiled host entries that launch on the current torch stream. The DSL front end
(`@cute.jit`, `@cute.kernel`) is built on it.
"""

from . import env
from ._C import CudaError, compiler_version
from .compiler import CompiledModule, HostFunction, compile_mlir
from .errors import CompileError, Diagnostic, PtxasError, ToolkitError
from .toolkit import SUPPORTED_ARCHS, gpu_available, target_arch

__version__ = "0.1.0"

__all__ = [
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
