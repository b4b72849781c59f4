#!/usr/bin/env bash
# Packs quack (Dao-AILab's CuTe DSL kernels, the issues' anchor) for the GPU machine, which has no
# network and takes 64 MiB of files a call: quack-kernels 0.2.2 with the CuTe DSL it pins
# (nvidia-cutlass-dsl 4.2.1) and cuda-python 12.9, installed for that machine's Python 3.12 into
# one folder, stripped of the sources and headers nothing imports, xz-packed (about 46 MB), and
# the compiler bundle beside it xz-packed (about 13 MB; 52 MB unpacked would not fit beside quack).
#   scripts/pack_quack.sh            -> .qk/qsite.tar.xz, .qk/bundle.tar.xz (.qk/ is git-ignored)
# There (carry [".qk"]; docs/gpu.md):
#   tar -C /tmp -xJf .qk/qsite.tar.xz && tar -xJf .qk/bundle.tar.xz
#   export PYTHONPATH=$PWD:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/python_packages
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f bundle/lib/libcute_compiler.so ]] || { echo "pack_quack: no bundle/; run scripts/build_bundle.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$work/wheels" quack-kernels==0.2.2 nvidia-cutlass-dsl==4.2.1 cuda-python==12.9.0 \
  cuda-bindings==12.9.0
python3 -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" --target "$work/qsite" "$work"/wheels/*.whl
find "$work/qsite" \( -name "*.cpp" -o -name "*.pyx" -o -name "*.pxd" -o -name "*.pxi" -o -name "*.h" \
  -o -name __pycache__ \) -prune -exec rm -rf {} +
mkdir -p .qk
tar -C "$work" -cf - qsite | xz -T0 -9 > .qk/qsite.tar.xz
tar -cf - bundle | xz -T0 -6 > .qk/bundle.tar.xz
ls -l .qk
