# Next session's first device run (branch quack-shape checked out; carry [".qk"] made by scripts/pack_quack.sh):
# quack's forward shape against ours and quack (qshape_probe.py). Then probes/s52b.sh (warm machine).
set -o pipefail
tar -C /tmp -xJf .qk/qsite.tar.xz && tar -xJf .qk/bundle.tar.xz || exit 1
source probes/b.sh || exit 1
export PYTHONPATH=$PWD:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/python_packages
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 420 python3 probes/qshape_probe.py 2>&1 | grep -v Warn | tee $OUT/qshape.txt | grep -v "^round"
