"""Where the CUDA toolkit pieces are, and which GPU architecture to compile for."""

from __future__ import annotations

import functools
import glob
import os
import sysconfig

from . import _C
from .env import knobs

SUPPORTED_ARCHS = tuple(_C.compiler_archs().split(","))  # the compiler's list
# The most dynamic shared memory one block may opt into, per arch (CUDA's
# sharedMemPerBlockOptin: 163 KB on A100, 99 KB on sm_86/sm_89, 227 KB on H100).
# CUDA caps a kernel's static shared memory at 48 KB; more must be dynamic (launch smem=).
MAX_STATIC_SMEM = 48 * 1024
MAX_DYNAMIC_SMEM = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448, "sm_90a": 232448}


def nvjitlink_path() -> str | None:
    """libnvJitLink from CUTE_TORCH_NVJITLINK, the toolkit, or the nvidia-nvjitlink wheel."""
    k = knobs()
    return k.nvjitlink or _find_nvjitlink(k.cuda_home)


@functools.lru_cache(maxsize=None)
def _find_nvjitlink(cuda_home: str) -> str | None:
    # Searched once per toolkit root: compile_mlir asks on every compile.
    candidates = sorted(glob.glob(os.path.join(cuda_home, "lib64", "libnvJitLink.so*")))
    site = sysconfig.get_paths()["purelib"]
    candidates += sorted(glob.glob(os.path.join(site, "nvidia", "cu1*", "lib", "libnvJitLink.so*")))
    candidates += sorted(glob.glob(os.path.join(site, "nvidia", "nvjitlink", "lib", "libnvJitLink.so*")))
    return candidates[0] if candidates else None


def nvdisasm_path() -> str | None:
    """nvdisasm for the "sass" stage: CUTE_TORCH_NVDISASM, the toolkit's, or the
    nvidia-cuda-nvdisasm wheel's (machines without a full toolkit; scripts/install_deps.sh)."""
    k = knobs()
    return k.nvdisasm or _find_nvdisasm(k.cuda_home)


@functools.lru_cache(maxsize=None)
def _find_nvdisasm(cuda_home: str) -> str | None:
    site = sysconfig.get_paths()["purelib"]
    candidates = [os.path.join(cuda_home, "bin", "nvdisasm")]
    candidates += sorted(glob.glob(os.path.join(site, "nvidia", "cu1*", "bin", "nvdisasm")), reverse=True)
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def gpu_available() -> bool:
    ok, _ = _C.driver_available()
    return ok and _C.device_count() > 0


def target_arch(explicit: str | None = None, device: int | None = None) -> str:
    """The architecture to compile for: explicit, else CUTE_TORCH_ARCH, else the device's,
    else sm_90a (the project's main target)."""
    arch = explicit or knobs().arch
    if arch is None and gpu_available():
        arch = _C.device_arch(device or 0)
    arch = arch or "sm_90a"
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"unsupported arch {arch!r}; supported: {', '.join(SUPPORTED_ARCHS)}")
    return arch
