#!/usr/bin/env bash
# Time the README's compile + ISA tier: RUNS times from an empty compile cache, each followed by a
# warm run over the cache it filled. Prints one line per run and the verdict line of each pytest.
#
#   scripts/time-cpu-tier.sh [RUNS] [pytest args...]      (default: 3 runs; -n 2 -m "compile or isa")
#
# Every run gets its own temporary cache (TILEGATE_CACHE) and artifacts folder; nothing in the
# checkout's .cache/ is read or written. Quote the figures with the machine's core count.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-n 2 -m "compile or isa")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

timed() {  # timed LABEL CACHE: run the tier, print "LABEL <seconds> s: <pytest verdict>"
  local label=$1 cache=$2 start end verdict
  start=$EPOCHREALTIME
  if TILEGATE_CACHE=$cache TILEGATE_ARTIFACTS=$work/artifacts python3 -m pytest -q -p no:cacheprovider \
      "${args[@]}" >"$work/$label.log" 2>&1; then :; else echo "$label: pytest failed, log below" >&2; tail -n 40 "$work/$label.log" >&2; fi
  end=$EPOCHREALTIME
  verdict=$(grep -E '^[0-9]+ (passed|failed)|[0-9]+ passed' "$work/$label.log" | tail -n 1)
  printf '%-8s %7.1f s  %s\n' "$label" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$verdict"
}

echo "$(nproc) CPUs; pytest ${args[*]}"
for i in $(seq 1 "$runs"); do
  cache=$work/cache-$i
  timed "cold-$i" "$cache"
  timed "warm-$i" "$cache"
done
