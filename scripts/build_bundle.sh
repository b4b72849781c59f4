#!/usr/bin/env bash
# Builds the self-contained compiler library for machines without LLVM/MLIR (the GPU machine):
# static MLIR/LLVM, static libstdc++/libgcc, only the C API exported, stripped; plus the public
# header. Output: bundle/{lib/libcute_compiler.so, include/cute_torch/compiler.h, BUILD_INFO}.
# Then checks that the library needs nothing beyond libc, libm, libz, libzstd and libtinfo.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bundle}
BUILD=build/bundle
scripts/install_deps.sh >/dev/null
CMAKE=${CMAKE:-$([[ -x /usr/bin/cmake ]] && echo /usr/bin/cmake || echo cmake)}

start=$(date +%s)
"$CMAKE" -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=${MLIR_DIR:-/usr/lib/llvm-19/lib/cmake/mlir} \
  -DCUTE_BUILD_PYTHON=OFF -DCUTE_BUILD_TORCH=OFF -DCUTE_BUILD_TESTS=OFF \
  -DCUTE_PACKAGE_DIR="$PWD/$BUILD/package" \
  $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
"$CMAKE" --build "$BUILD" --target cute_compiler --parallel "$(nproc)"

rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/include/cute_torch"
strip --strip-unneeded -o "$OUT/lib/libcute_compiler.so" "$BUILD/package/lib/libcute_compiler.so"
cp csrc/compiler/include/cute_torch/compiler.h "$OUT/include/cute_torch/"
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "llvm: $(/usr/lib/llvm-19/bin/llvm-config --version)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$OUT/BUILD_INFO"

# Only these (and glibc's loader, ld-linux) may be needed at load time (the GPU machine has them; it has no LLVM, no z3).
allowed='^(libc|libm|libz|libzstd|libtinfo)\.so|^ld-linux'
deps=$(readelf -d "$OUT/lib/libcute_compiler.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
bad=$(echo "$deps" | grep -Ev "$allowed" || true)
if [[ -n "$bad" ]]; then
  echo "build_bundle: libcute_compiler.so needs more than libc/libm/libz/libzstd/libtinfo: $bad" >&2
  exit 1
fi
exported=$(nm -D --defined-only "$OUT/lib/libcute_compiler.so" | awk '{print $3}' | grep -v '^cute_' || true)
if [[ -n "$exported" ]]; then
  echo "build_bundle: symbols beyond the C API are exported: $(echo $exported | head -c 300)" >&2
  exit 1
fi
size=$(du -m "$OUT/lib/libcute_compiler.so" | cut -f1)
echo "build_bundle: $OUT/lib/libcute_compiler.so (${size} MB; needs: $(echo $deps)) in $(( $(date +%s) - start )) s"
