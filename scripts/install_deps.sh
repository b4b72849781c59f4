#!/usr/bin/env bash
# Installs what the build and the tests need, only what is missing (quick when all is there).
#   Debian: LLVM/MLIR 19 dev packages and tools, zstd, ninja, ccache, googletest, cmake 3.25
#   PyPI (pinned): torch 2.13.0 (the CPU build on these machines: never loosen this pin, a looser
#   one pulls gigabytes of CUDA wheels), pybind11, pytest, numpy, hypothesis, lit, nvJitLink,
#   nvdisasm (the "sass" stage where the toolkit has none; 13.2 is the oldest wheel), ruff and
#   clang-format (the code rules, scripts/check_rules.py), and without its
#   dependencies nvidia-cutlass, for `pycute` (the tests' layout reference)
# and checks the CUDA toolkit at $CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

DEBIAN_PACKAGES=(llvm-19-dev libmlir-19-dev mlir-19-tools libzstd-dev ninja-build ccache
                 googletest libgtest-dev cmake)
PYTHON=${PYTHON:-python3}
PIP_PINS=(torch==2.13.0 pybind11==3.1.0 pytest==9.0.3 numpy==2.4.6 hypothesis==6.155.2
          lit==18.1.8 nvidia-nvjitlink==13.0.88 nvidia-cuda-nvdisasm==13.5.37 ruff==0.14.5
          clang-format==19.1.7)
# Only the pure-Python pycute is used from this wheel; its dependencies (CUDA Python, ...) are not.
PIP_PINS_NO_DEPS=(nvidia-cutlass==4.2.0.0)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "install_deps: apt-get install ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# pip only for what is absent or at another version.
missing_pins() {
  "$PYTHON" - "$@" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    try:
        if version(name).split("+")[0] == wanted:  # 2.13.0+cpu is 2.13.0
            continue
    except PackageNotFoundError:
        pass
    print(pin)
PY
}
need=$(missing_pins "${PIP_PINS[@]}")
if [[ -n "$need" ]]; then
  echo "install_deps: pip install" $need
  "$PYTHON" -m pip install -q --disable-pip-version-check $need
fi
need=$(missing_pins "${PIP_PINS_NO_DEPS[@]}")
if [[ -n "$need" ]]; then
  echo "install_deps: pip install --no-deps" $need
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps $need
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x "$CUDA_HOME/bin/ptxas" || ! -f "$CUDA_HOME/include/cuda.h" ]]; then
  echo "install_deps: no CUDA toolkit at CUDA_HOME=$CUDA_HOME (need bin/ptxas and include/cuda.h);" \
       "set CUDA_HOME to the toolkit root" >&2
  exit 1
fi
echo "install_deps: ok (LLVM $(/usr/lib/llvm-19/bin/llvm-config --version), CUDA at $CUDA_HOME)"
