"""Every CUTE_TORCH_* knob, typed, in one place. Read at call time, so tests can set them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

def _list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Knobs:
    cuda_home: str = "/usr/local/cuda"  # CUDA_HOME: toolkit root (ptxas, libdevice, nvJitLink)
    arch: str | None = None  # CUTE_TORCH_ARCH: target when none is given (e.g. sm_90a)
    keep: list[str] = field(default_factory=list)  # CUTE_TORCH_KEEP=ptx,sass: stages to keep
    dump_dir: str | None = None  # CUTE_TORCH_DUMP_DIR: write kept stages there
    cubin_backend: str = "auto"  # CUTE_TORCH_CUBIN_BACKEND: auto | ptxas | nvjitlink
    nvjitlink: str | None = None  # CUTE_TORCH_NVJITLINK: path of libnvJitLink.so
    nvdisasm: str | None = None  # CUTE_TORCH_NVDISASM: the disassembler of the "sass" stage
    opt_level: int = 3  # CUTE_TORCH_OPT_LEVEL: LLVM and ptxas optimization level
    fmad: bool = False  # CUTE_TORCH_FMAD=1: float multiplies and adds may contract to fma (nvcc's --fmad)
    ptxas_options: list[str] = field(default_factory=list)  # CUTE_TORCH_PTXAS_OPTIONS=a,b
    line_info: bool = False  # CUTE_TORCH_LINE_INFO=1 (or CUTE_TORCH_LINEINFO=1): Python lines in PTX/SASS
    cache_dir: str = ""  # CUTE_TORCH_CACHE_DIR: disk cache root (default ~/.cache/cute_torch)
    no_cache: bool = False  # CUTE_TORCH_NO_CACHE=1: never read or write the disk cache
    memory_cache_size: int = 512  # CUTE_TORCH_MEMORY_CACHE_SIZE: specializations kept per function
    print_after_preprocess: bool = False  # CUTE_TORCH_PRINT_AFTER_PREPROCESS=1: rewritten source
    print_ir: bool = False  # CUTE_TORCH_PRINT_IR=1: the traced IR of each compile
    log_graphs: bool = False  # CUTE_TORCH_LOG_GRAPHS=1: the cute backend prints its graphs and regions
    gemm_kernel: str = "auto"  # CUTE_TORCH_GEMM_KERNEL: auto | sm80 (cute::gemm on the Ampere kernels on Hopper too)


def knobs() -> Knobs:
    keep = _list("CUTE_TORCH_KEEP")  # checked against the compiler's stages by compile_mlir
    opt = os.environ.get("CUTE_TORCH_OPT_LEVEL", "3")
    if opt not in ("0", "1", "2", "3"):
        raise ValueError(f"CUTE_TORCH_OPT_LEVEL must be 0..3, got {opt!r}")
    size = os.environ.get("CUTE_TORCH_MEMORY_CACHE_SIZE", "512")
    if not size.isdigit() or int(size) < 1:
        raise ValueError(f"CUTE_TORCH_MEMORY_CACHE_SIZE must be a positive integer, got {size!r}")
    gemm_kernel = os.environ.get("CUTE_TORCH_GEMM_KERNEL") or "auto"
    if gemm_kernel not in ("auto", "sm80"):
        raise ValueError(f"CUTE_TORCH_GEMM_KERNEL must be auto or sm80, got {gemm_kernel!r}")
    return Knobs(
        cuda_home=os.environ.get("CUDA_HOME") or "/usr/local/cuda",
        arch=os.environ.get("CUTE_TORCH_ARCH") or None,
        keep=keep,
        dump_dir=os.environ.get("CUTE_TORCH_DUMP_DIR") or None,
        cubin_backend=os.environ.get("CUTE_TORCH_CUBIN_BACKEND") or "auto",
        nvjitlink=os.environ.get("CUTE_TORCH_NVJITLINK") or None,
        nvdisasm=os.environ.get("CUTE_TORCH_NVDISASM") or None,
        opt_level=int(opt),
        fmad=_flag("CUTE_TORCH_FMAD"),
        ptxas_options=_list("CUTE_TORCH_PTXAS_OPTIONS"),
        line_info=_flag("CUTE_TORCH_LINE_INFO") or _flag("CUTE_TORCH_LINEINFO"),
        cache_dir=os.environ.get("CUTE_TORCH_CACHE_DIR")
        or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cute_torch"),
        no_cache=_flag("CUTE_TORCH_NO_CACHE"),
        memory_cache_size=int(size),
        print_after_preprocess=_flag("CUTE_TORCH_PRINT_AFTER_PREPROCESS"),
        print_ir=_flag("CUTE_TORCH_PRINT_IR"),
        log_graphs=os.environ.get("CUTE_TORCH_LOG_GRAPHS", "") not in ("", "0"),
        gemm_kernel=gemm_kernel,
    )
