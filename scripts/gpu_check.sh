#!/usr/bin/env bash
# On the GPU machine (no LLVM/MLIR there): builds the runtime, cute_torch._C and the torch
# extension against the carried compiler bundle, runs the whole test suite (GPU tier included)
# and the benchmarks, and prints a short summary. Logs go to $OUT when it is set.
#   scripts/gpu_check.sh [bundle-dir] [all|tests|tests-a|tests-b|tests-c|bench|sanitize]   (see docs/gpu.md)
# `tests` runs the build and the test suite, `tests-a` / `tests-b` / `tests-c` the build and the
# GPU tier of the test files test_a* to test_m* / test_n* to test_z* but test_row_kernels.py /
# test_row_kernels.py (the whole GPU tier outgrew one device command on a cold machine; test_n*
# to test_z* together took 599 of its 600 s on a cold H200), `bench` the build, benchmarks and examples,
# `sanitize` the build and the compute-sanitizer tier (scripts/sanitize.py: four tools over every
# kernel family and a planted bug each): each fits one device command (10 minutes) where `all`
# may not.
set -uo pipefail
cd "$(dirname "$0")/.."
export CUTE_TORCH_PREBUILT_COMPILER=${1:-bundle}
PART=${2:-all}
export CUTE_TORCH_BUILD_DIR=build/gpu
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
LOG=${OUT:-/tmp}
PYTHON=${PYTHON:-python3}

[[ -f "$CUTE_TORCH_PREBUILT_COMPILER/lib/libcute_compiler.so" ]] || {
  echo "gpu_check: no bundle at $CUTE_TORCH_PREBUILT_COMPILER; run scripts/build_bundle.sh on the build machine" >&2
  exit 1
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

start=$(date +%s)
"$PYTHON" setup.py -q build_ext --inplace >"$LOG/build.log" 2>&1 || { tail -40 "$LOG/build.log"; exit 1; }
"$PYTHON" setup.py -q egg_info >>"$LOG/build.log" 2>&1  # the torch_dynamo_backends entry point
echo "build: ok in $(( $(date +%s) - start )) s"

if [[ $PART == sanitize ]]; then
  "$PYTHON" scripts/sanitize.py 2>"$LOG/sanitize.log"
  exit $?
fi

if [[ $PART == tests-a || $PART == tests-b || $PART == tests-c ]]; then
  files=(tests/test_[a-m]*.py)
  if [[ $PART == tests-b ]]; then
    files=()
    for f in tests/test_[n-z]*.py; do [[ $f == tests/test_row_kernels.py ]] || files+=("$f"); done
  fi
  [[ $PART == tests-c ]] && files=(tests/test_row_kernels.py)
  "$PYTHON" -m pytest "${files[@]}" -q -rs -m gpu -p no:cacheprovider 2>&1 | tee "$LOG/pytest_gpu.log" | tail -25
  rc=${PIPESTATUS[0]}
  echo "gpu tier ($PART): $(tail -1 "$LOG/pytest_gpu.log")"
  exit $rc
fi

tests_rc=0
if [[ $PART != bench ]]; then
  # The two tiers run apart (not twice) so the GPU tier's summary line stands on its own.
  "$PYTHON" -m pytest tests -q -rs -m gpu -p no:cacheprovider 2>&1 | tee "$LOG/pytest_gpu.log" | tail -25
  tests_rc=${PIPESTATUS[0]}
  "$PYTHON" -m pytest tests -q -m "not gpu" -p no:cacheprovider >"$LOG/pytest_cpu.log" 2>&1 || tests_rc=1
  echo "gpu tier: $(tail -1 "$LOG/pytest_gpu.log")"
  echo "other tiers: $(tail -1 "$LOG/pytest_cpu.log")"
fi
[[ $PART == tests ]] && exit $tests_rc

for bench in benchmarks/pointwise.py benchmarks/copy_kernels.py benchmarks/compile_latency.py benchmarks/launch_overhead.py \
             benchmarks/backend.py benchmarks/gemm.py benchmarks/reductions.py benchmarks/training.py; do
  echo "== $bench"
  args=()
  [[ $bench == */reductions.py ]] && args=(--dtypes bfloat16 --ns 1024 8192 131072)   # a subset that fits
  "$PYTHON" "$bench" "${args[@]}" 2>&1 | tee -a "$LOG/benchmarks.log"
done
for example in examples/*.py; do
  echo "== $example"
  case $example in   # the training example at a size that fits beside the rest
    */transformer_block.py) "$PYTHON" "$example" --steps 30 --d-model 1024 2>&1 | tail -6 ;;
    *) "$PYTHON" "$example" 2>&1 | tail -5 ;;
  esac
done
exit $tests_rc
