#!/usr/bin/env bash
# One-time set-up of a machine for the gate: Python packages, then the gfx942 cross toolchain.
# Safe to run again: what is installed stays.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
# torch first, so nothing below pulls a multi-GB CUDA build: a machine without torch
# gets the CPU build (2.13.0); a GPU runner keeps the ROCm or CUDA torch it has.
# --no-compile: scripts/install-sglang-cpu.sh says why
"$py" -c "import torch" 2>/dev/null || "$py" -m pip install -q --no-compile "torch==2.13.0"
# Both distributions editable: the runtime (.) and the gate (testing/: harness, fixtures, the pytest
# plugin and the test dependencies). `pip install ".[test]"` installs the same pair, not editable.
"$py" -m pip install -q --no-compile -e . -e ./testing

# The rest is three independent installs, mostly downloads: run them side by side.
#   the gfx942 cross toolchain (.toolchain/gfx942);
#   TileLang 0.1.12 (SGLang 0.5.23's pin) in .venv-tl012: the compile + ISA tiers run under it too;
#   SGLang 0.5.23 on the CPU in .venv-sglang: the tilelang backend against SGLang's real engine.
# Then docker, a small test image and the MI300X job's wheels: the runner boundary's container tests.
logs=$(mktemp -d)
declare -A pids=()
start() {  # start NAME CMD...: run CMD in the background, its output in $logs/NAME.log
  local name=$1; shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}
start toolchain bash scripts/install-gfx942-toolchain.sh
start tilelang-0.1.12 bash scripts/install-tilelang-venv.sh 0.1.12
start sglang bash scripts/install-sglang-cpu.sh
failed=()
for name in "${!pids[@]}"; do
  if ! wait "${pids[$name]}"; then
    failed+=("$name")
    echo "setup: $name failed; the end of its log ($logs/$name.log):" >&2
    tail -n 30 "$logs/$name.log" >&2
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "setup: failed: ${failed[*]}" >&2; exit 1; }
# after the others: it may apt-get install, and two apt-gets at once fail on dpkg's lock
bash scripts/install-container-runtime.sh
bash scripts/install-artifact-unpack.sh  # node and npm: suite/library/test_artifact_unpacking.py
cat "$logs"/*.log
rm -rf "$logs"
