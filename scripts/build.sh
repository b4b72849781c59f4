#!/usr/bin/env bash
# Builds everything native in place: the compiler library, cute-opt, cute-compile, the C++ unit
# tests, the runtime, cute_torch._C and the torch extension (see setup.py for the knobs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
${PYTHON:-python3} setup.py -q build_ext --inplace
# Package metadata next to the sources: the torch_dynamo_backends entry point ("cute") is found
# by any process with the repository on its path.
${PYTHON:-python3} setup.py -q egg_info > /dev/null
