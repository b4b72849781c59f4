#!/usr/bin/env bash
# The main job: build, compile the examples (MLIR -> PTX -> CUBIN + host JIT) and, when a GPU is
# present, run them and check their results.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${CUTE_TORCH_PREBUILT_COMPILER:-}" ]]; then
  scripts/install_deps.sh
fi
scripts/build.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # the package is built in place
for example in examples/*.py; do
  echo "== $example"
  ${PYTHON:-python3} "$example"
done
