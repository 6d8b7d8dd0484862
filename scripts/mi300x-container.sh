#!/usr/bin/env bash
# Runs a command in the MI300X gate's pinned ROCm container, with the GPUs passed in.
#
#   scripts/mi300x-container.sh CHECKOUT CACHE -- COMMAND [ARG ...]
#
# CHECKOUT is mounted at /gate (the command's working folder), CACHE at /cache (TILEGATE_CACHE);
# TileLang's JIT cache goes to /gate/.tilelang-cache, inside the job's own folder, which the workflow
# removes at the end. The image is the one line of .github/mi300x-image beside this script's
# checkout: NAME@sha256:<64 hex digits>, pinned by digest, never a bare tag (a ROCm stack that
# drifts under TileLang makes its code fault with illegal instructions). Nothing else of the host
# is mounted: the runner's home and its other caches stay out of reach of the code under test.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 4 ] && [ "$3" = "--" ] || { echo "usage: $0 CHECKOUT CACHE -- COMMAND [ARG ...]" >&2; exit 2; }
checkout=$(cd "$1" && pwd); cache=$2; shift 3
pin_file=$here/.github/mi300x-image
image=$(grep -v '^[[:space:]]*#' "$pin_file" | grep -v '^[[:space:]]*$' | head -n 1 || true)
if ! [[ $image =~ ^[^[:space:]@]+@sha256:[0-9a-f]{64}$ ]]; then
  echo "mi300x-container: $pin_file holds no image pinned by digest (got '${image:-nothing}')." >&2
  echo "  A maintainer pins it: docker buildx imagetools inspect NAME:TAG, then commit NAME@sha256:<digest>." >&2
  exit 1
fi
mkdir -p "$cache"
model=()  # a local Meta-Llama-3 for the llama3 tests: read-only, at the same path
[ -n "${TILEGATE_LLAMA3_PATH:-}" ] && model=(-v "$TILEGATE_LLAMA3_PATH:$TILEGATE_LLAMA3_PATH:ro")
# --device: the GPUs (KFD and the render nodes); video/render: the groups that own them; the rest
# is what ROCm's own container instructions ask for (shared memory for the engines' processes).
exec docker run --rm --init \
  --device=/dev/kfd --device=/dev/dri --group-add video --group-add render \
  --ipc=host --shm-size=16g --security-opt seccomp=unconfined \
  -v "$checkout:/gate" -w /gate -v "$cache:/cache" "${model[@]}" \
  -e TILEGATE_CACHE=/cache -e TILELANG_CACHE_DIR=/gate/.tilelang-cache -e TILEGATE_ARTIFACTS=/gate/artifacts \
  -e TILEGATE_SUMMARY_TITLE -e TILEGATE_LLAMA3_PATH -e HOME=/gate/.home \
  "$image" "$@"
