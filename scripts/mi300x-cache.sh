#!/usr/bin/env bash
# The MI300X job's compile cache, per trust level (the workflow's TRUST):
#
#   scripts/mi300x-cache.sh setup main|pr      makes it and prints its folder
#   scripts/mi300x-cache.sh cleanup main|pr    removes what this run made
#
# main (pushes to main, the schedule, dispatches on main): $HOME/.cache/tilegate/main, kept between
# runs. pr (pull requests): a copy of main's, made fresh in $RUNNER_TEMP for this run and removed
# at its end, so that no entry a pull request writes (a lowered kernel, a code object under a valid
# key) is ever read by a trusted run. TileLang's JIT cache lives in the checkout (.tilelang-cache,
# scripts/mi300x-container.sh) and is removed at the end of every run.
set -euo pipefail
[ $# -eq 2 ] && [[ $1 =~ ^(setup|cleanup)$ ]] && [[ $2 =~ ^(main|pr)$ ]] || { echo "usage: $0 setup|cleanup main|pr" >&2; exit 2; }
main_cache=${HOME:?}/.cache/tilegate/main
pr_cache=${RUNNER_TEMP:-/tmp}/tilegate-cache-${GITHUB_RUN_ID:-local}-${GITHUB_JOB:-job}-${SHARD:-0}
case "$1-$2" in
  setup-main) mkdir -p "$main_cache"; echo "$main_cache" ;;
  setup-pr)
    rm -rf "$pr_cache"; mkdir -p "$pr_cache"
    if [ -d "$main_cache" ]; then cp -a "$main_cache/." "$pr_cache/"; fi
    echo "$pr_cache" ;;
  cleanup-pr) rm -rf "$pr_cache" ;;
  cleanup-main) ;;
esac
