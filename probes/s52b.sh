# Next session, after s52.sh on the warm machine (branch quack-shape; carry [".qk"]): the CE forward's early
# target (files swapped, A B A B), then quack's GEMM beside ours and cuBLAS.
set -o pipefail
[[ -d /tmp/qsite ]] || tar -C /tmp -xJf .qk/qsite.tar.xz || exit 1
[[ -d bundle ]] || tar -xJf .qk/bundle.tar.xz || exit 1
source probes/b.sh || exit 1
export PYTHONPATH=$PWD:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/python_packages
cp kernels/cross_entropy.py /tmp/ce_keep.py
for v in main early main early; do
  cp probes/cross_entropy_$v.py kernels/cross_entropy.py
  (cd benchmarks && CUTE_TORCH_NO_CACHE=1 timeout 60 python3 reductions.py --dtypes bfloat16 float32 \
     --ns 1024 4096 8192 32768 --ops cross_entropy --no-inductor --repeats 20) > $OUT/ce_$v.txt 2>&1
  echo "== CE $v"; grep -E "^cross_entropy .* fwd|checked" $OUT/ce_$v.txt
done
cp /tmp/ce_keep.py kernels/cross_entropy.py
timeout 200 python3 probes/quack_gemm.py 2>&1 | grep -v Warn | tee $OUT/qgemm.txt
timeout 200 python3 probes/qshape_probe.py float32 65536 131072 2>&1 | grep -v Warn | tee $OUT/qshape_f32.txt | grep -v "^round"
