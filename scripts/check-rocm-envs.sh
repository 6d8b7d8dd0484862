#!/usr/bin/env bash
# tox -e rocm and tox -e rocm-deep (the MI300X runner's envs), made on a machine without a GPU as
# far as such a machine goes, so that a broken step fails CI rather than the runner's first run:
#   1. each env is created and installed from the project's files (tox --notest);
#   2. each env's commands_pre runs and refuses this machine, naming why (no gfx942 device), and
#      no command after it runs;
#   3. each env's own pytest commands (tox.ini's, with their -m selections and options) collect,
#      with commands_pre left out and --collect-only added: a command that cannot collect, that
#      selects nothing (pytest exits 5) or, with --require-gpu, whose selection holds no GPU test,
#      fails here.
# What only the runner has: ROCm's torch (the envs take torch from the system site-packages, here
# the CPU build) and a gfx942 device; no test runs here.
set -euo pipefail
cd "$(dirname "$0")/.."
envs=(rocm rocm-deep)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the collections' JUnit XML goes to a folder of their own, not the gate run's artifacts
export TILEGATE_ARTIFACTS="$work/artifacts"

python3 -m tox -e "$(IFS=,; echo "${envs[*]}")" --notest

refusal='no gfx942 device visible to torch'
for env in "${envs[@]}"; do
  if python3 -m tox -e "$env" > "$work/$env.log" 2>&1; then
    echo "check-rocm-envs: tox -e $env passed on a machine with no gfx942 device" >&2
    exit 1
  fi
  if ! grep -qx "$refusal" "$work/$env.log" || grep -q "^$env: commands\[" "$work/$env.log"; then
    echo "check-rocm-envs: tox -e $env did not stop at commands_pre with '$refusal':" >&2
    tail -n 20 "$work/$env.log" >&2
    exit 1
  fi
  echo "check-rocm-envs: $env: commands_pre refused this machine ($refusal)"
done

overrides=()
for env in "${envs[@]}"; do overrides+=(-x "testenv:$env.commands_pre="); done
python3 -m tox -e "$(IFS=,; echo "${envs[*]}")" "${overrides[@]}" -- --collect-only -q \
  > "$work/collect.log" 2>&1 || {
  echo "check-rocm-envs: collecting the envs' commands failed:" >&2
  grep -v '^suite/' "$work/collect.log" | tail -n 40 >&2
  exit 1
}
grep -E '^(rocm|rocm-deep): commands\[|tests? collected' "$work/collect.log"
echo "check-rocm-envs: not here: ROCm's torch and a gfx942 device (torch $(python3 -c 'import torch; print(torch.__version__)'))"
