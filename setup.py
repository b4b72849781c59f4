"""Builds cute_torch's native parts with CMake (see CMakeLists.txt):

  libcute_compiler   MLIR/LLVM inside, C API outside   (skipped with CUTE_TORCH_PREBUILT_COMPILER)
  libcute_runtime    CUDA driver through dlopen
  cute_torch._C      pybind11 module: compiler + runtime
  libcute_torch_ops  torch extension, TORCH_LIBRARY(cute)   (CUTE_TORCH_BUILD_TORCH=0 skips it)

    python setup.py build_ext --inplace      # what scripts/build.sh runs

Environment: CUTE_TORCH_PREBUILT_COMPILER=<bundle dir>, MLIR_DIR, CUDA_HOME, CMAKE (the cmake
binary; Debian's /usr/bin/cmake is preferred because LLVM 19's CMake files predate CMake 4),
CUTE_TORCH_BUILD_DIR (default build/), CUTE_TORCH_BUILD_TYPE (default Release).
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_binary() -> str:
    if os.environ.get("CMAKE"):
        return os.environ["CMAKE"]
    return "/usr/bin/cmake" if os.path.exists("/usr/bin/cmake") else "cmake"


def torch_site() -> str | None:
    """Where this interpreter's torch is installed when an isolated build (plain `pip install .`)
    cannot import it: the extension must build against the torch it will run with, so CMake's
    torch probe puts that directory on its sys.path (CUTE_TORCH_SITE). None when torch imports."""
    try:
        import torch  # noqa: F401
        return None
    except ImportError:
        pass
    candidates = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    candidates += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    for path in candidates:
        if os.path.isdir(os.path.join(path, "torch")):
            return path
    return None


class CMakeBuild(build_ext):
    def run(self):
        build_dir = os.environ.get("CUTE_TORCH_BUILD_DIR", os.path.join(ROOT, "build"))
        prebuilt = os.environ.get("CUTE_TORCH_PREBUILT_COMPILER", "")
        args = [
            f"-DCMAKE_BUILD_TYPE={os.environ.get('CUTE_TORCH_BUILD_TYPE', 'Release')}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCUDA_HOME={os.environ.get('CUDA_HOME') or '/usr/local/cuda'}",
            f"-DCUTE_BUILD_TORCH={'OFF' if os.environ.get('CUTE_TORCH_BUILD_TORCH') == '0' else 'ON'}",
            f"-DCUTE_PREBUILT_COMPILER={os.path.abspath(prebuilt) if prebuilt else ''}",
            f"-DMLIR_DIR={os.environ.get('MLIR_DIR', '/usr/lib/llvm-19/lib/cmake/mlir')}",
        ]
        if shutil.which("ninja"):
            args.append("-GNinja")
        if shutil.which("ccache"):
            args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        os.makedirs(build_dir, exist_ok=True)
        cmake = cmake_binary()
        site_dir = torch_site() if os.environ.get("CUTE_TORCH_BUILD_TORCH") != "0" else None
        if site_dir:
            args.append(f"-DCUTE_TORCH_SITE={site_dir}")
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) or prebuilt:
            subprocess.check_call([cmake, ROOT, *args], cwd=build_dir)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.check_call([cmake, "--build", ".", "--parallel", jobs], cwd=build_dir)
        if not self.inplace:
            # CMake writes into the source package; a wheel build copies from there.
            target = os.path.join(self.build_lib, "cute_torch")
            os.makedirs(os.path.join(target, "lib"), exist_ok=True)
            for path in glob.glob(os.path.join(ROOT, "cute_torch", "_C*.so")):
                shutil.copy2(path, target)
            for path in glob.glob(os.path.join(ROOT, "cute_torch", "lib", "*.so")):
                shutil.copy2(path, os.path.join(target, "lib"))


setup(
    name="cute_torch",
    version="0.1.0",
    description="A CuTe-style Python DSL for GPU kernels, compiled with MLIR, run in PyTorch",
    # The kernel library is the top-level kernels/ folder, installed as cute_torch.kernels.
    packages=find_packages(include=["cute_torch", "cute_torch.*"]) + ["cute_torch.kernels"],
    package_dir={"cute_torch.kernels": "kernels"},
    package_data={"cute_torch.backend": ["gemm_routes.json"]},   # backend/gemm_routes.py's table
    ext_modules=[Extension("cute_torch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # torch.compile(backend="cute") without importing cute_torch first.
    entry_points={"torch_dynamo_backends": ["cute = cute_torch.backend:cute_backend"]},
    python_requires=">=3.10",
)
