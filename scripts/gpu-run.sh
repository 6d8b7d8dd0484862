#!/usr/bin/env bash
# The GPU tiers on a GPU machine with no network (the H200 machine here, or any CUDA/ROCm box).
#
# On a machine with network, first pack TileLang for the GPU machine's Python:
#   ../shared/device/make-site.sh .dev        (-> .dev/site312.tar.xz, Python 3.12 wheels)
# Then, on the GPU machine, from the checkout:
#   scripts/gpu-run.sh [pytest args]          (default: -m "numerics or drift", unless the args
#                                             select: -m, -k, a path or node id)
# The machine needs torch with a GPU, pytest, pytest-xdist, matplotlib (the H200 image has them).
# The SGLang GPU tier (-m "sglang and gpu") and the serving benchmark also need SGLang's GPU build:
# on the H200, source .dev/sglkit/env.sh .dev/sglkit first (../shared/device/sglang-h200 builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
site_tarball=${TILEGATE_SITE:-.dev/site312.tar.xz}
if [ -f "$site_tarball" ]; then
  mkdir -p /tmp/tilegate-site && tar -C /tmp/tilegate-site -xJf "$site_tarball"
  export PYTHONPATH=/tmp/tilegate-site:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
# Every kernel the selected tests declare (their builds mark) is compiled before the first test, one
# process per CPU (tilegate/testing/precompile.py); the tests of one kernel form one xdist group.
# -n auto: TILEGATE_WORKERS_PER_GPU (default 8) workers on each visible GPU, each worker pinned to
# one (tilegate/testing/gpu_workers.py); TILEGATE_WORKERS overrides the total.
# The default selection stands unless the arguments make one (-m, -k, a test path or node id):
# options alone (-rfE, --artifacts=..., -p no:randomly) keep it.
args=("$@")
selects=0
for arg in "$@"; do
  case $arg in
    -m | -m?* | --markexpr | --markexpr=* | -k | -k?* | *::*) selects=1 ;;
    -*) ;;
    *) if [ -e "$arg" ]; then selects=1; fi ;;
  esac
done
[ "$selects" = 1 ] || args=(-m "numerics or drift" "${args[@]}")
# --tilegate-kernels: the dense worked example (suite/dense_kernel, on pytest's pythonpath) is gated
# by every GPU run, its numerics, NaN and determinism cases beside the gate's own.
exec python3 -m pytest -p xdist -n "${TILEGATE_WORKERS:-auto}" --dist loadgroup --require-gpu \
  --tilegate-kernels=dense_example.adapter "${args[@]}"
