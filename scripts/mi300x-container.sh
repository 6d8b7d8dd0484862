#!/usr/bin/env bash
# The MI300X gate's pinned ROCm container, the boundary around the code under test. Run on the
# runner's host, from main's checkout (trusted/). Its uses:
#
#   scripts/mi300x-container.sh wheels WHEELS
#       networked, no code under test mounted: pip downloads the wheels main's lock names
#       (scripts/mi300x-wheels.txt, every file by sha256) into WHEELS, in the image's own Python.
#   scripts/mi300x-container.sh gate TREE RUN CACHE WHEELS -- COMMAND [ARG ...]
#       offline: COMMAND runs in the tree under test through scripts/mi300x-inside.sh.
#   scripts/mi300x-container.sh collect RUN RECORDS
#       main's scripts/collect_records.py, in the image, copies plain files from RUN's /out into
#       RECORDS (new), under its caps.
#   scripts/mi300x-container.sh stop            ends every gate container (a cancel, a timeout)
#   scripts/mi300x-container.sh release [RUN]   removes RUN's /out (every run's without RUN)
#
# What the gate run sees (nothing else of the host):
#   TREE    -> /gate     read-only: the export of the commit (scripts/mi300x-export.sh), no .git
#   RUN-out -> /out      the records (artifacts/, baselines/, .test_durations): a new tmpfs volume
#                        of TILEGATE_OUT_SIZE, kept by a holder container that only sleeps until
#                        `collect` has read it and `release` removes both
#   CACHE   -> /cache    main's compile cache: writable for main's runs (TRUST=main); any other run
#                        gets a size-limited tmpfs filled from a read-only mount of it
#                        (/cache-seed), so nothing it writes is ever read by main
#   tmpfs   -> /scratch  home, the writable copy of the tree, tox's envs, TileLang's JIT cache;
#                        and /tmp. The root filesystem is read-only.
#   WHEELS  -> /wheels   read-only: what pip may install (no index: the network is off)
# Every writable place (main's own cache aside) is a tmpfs of a fixed size made by the daemon for
# this run: a full one fails the run, never the host's disks (the runner's step scripts live
# there), and nothing in one outlives the run or needs the host's permissions to remove.
# and as whom: the runner's own non-root uid with the GPU device nodes' groups, no capabilities,
# no new privileges, the runtime's default seccomp profile, no network, a private /dev/shm,
# memory and process limits. The host runs nothing from any of these folders.
#
# The image is the first line of .github/mi300x-image that is not a comment:
# NAME@sha256:<64 hex digits>, pinned by digest, never a bare tag (a ROCm stack that drifts under
# TileLang makes its code fault with illegal instructions).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: $0 wheels WHEELS | $0 gate TREE RUN CACHE WHEELS -- COMMAND [ARG ...] | $0 collect RUN RECORDS | $0 stop | $0 release [RUN]" >&2
  exit 2
}
# every container this script starts carries this label: `stop` ends any a cancel or a timeout left
# running (the daemon owns it, not the step's shell); it needs no image, so it comes first
label=tilegate.mi300x-gate
# /out's volume and its holder carry this one: `stop` leaves them for `collect`
out_label=tilegate.mi300x-out
run_name() {  # the workflow's TILEGATE_RUN: a docker name, and nothing else
  [[ $1 =~ ^tilegate-[A-Za-z0-9_-]{1,100}$ ]] || { echo "mi300x-container: '$1' is not a run's name" >&2; exit 2; }
}
case ${1:-} in
  stop)
    [ $# -eq 1 ] || usage
    docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null
    exit 0 ;;
  release)
    [ $# -le 2 ] || usage
    only=()
    if [ $# -eq 2 ]; then run_name "$2"; only=(--filter "name=^$2-out\$"); fi
    docker ps -aq --filter "label=$out_label" "${only[@]}" | xargs -r docker rm -f >/dev/null
    docker volume ls -q --filter "label=$out_label" "${only[@]}" | xargs -r docker volume rm >/dev/null
    exit 0 ;;
esac
pin_file=$here/.github/mi300x-image
image=$(grep -v '^[[:space:]]*#' "$pin_file" | grep -v '^[[:space:]]*$' | head -n 1 || true)
if ! [[ $image =~ ^[^[:space:]@]+@sha256:[0-9a-f]{64}$ ]]; then
  echo "mi300x-container: $pin_file holds no image pinned by digest (got '${image:-nothing}')." >&2
  echo "  A maintainer pins it: docker buildx imagetools inspect NAME:TAG, then commit NAME@sha256:<digest>." >&2
  exit 1
fi
uid=$(id -u); gid=$(id -g)
if [ "$uid" = 0 ]; then
  echo "mi300x-container: the runner runs as root; the container's user would be root too." >&2
  echo "  Run the runner as an unprivileged user (docs/runner.md)." >&2
  exit 1
fi
# --log-driver=none: the daemon keeps no copy of the output on its disk (the attached client still
# gets it); no capabilities, no setuid gain, the default seccomp profile (no --security-opt seccomp=...)
unprivileged=(--rm --init --entrypoint= --log-driver=none --user "$uid:$gid" --cap-drop=ALL --security-opt=no-new-privileges
              --pids-limit="${TILEGATE_CONTAINER_PIDS:-16384}"
              --memory="${TILEGATE_CONTAINER_MEMORY:-256g}" --memory-swap="${TILEGATE_CONTAINER_MEMORY:-256g}")
hardened=(--label "$label" "${unprivileged[@]}")
# first_bytes N: copies the first N bytes of its input, reads the rest to the end (the writer is
# never cut off) and says how many bytes it dropped
first_bytes() {
  head -c "$1"
  local dropped
  dropped=$(wc -c)
  if [ "$dropped" -gt 0 ]; then
    echo
    echo "mi300x-container: the container's output past $1 bytes was dropped ($dropped bytes)"
  fi
}
inside=/opt/tilegate/inside.sh
lock=/opt/tilegate/wheels.txt

case ${1:-} in
  wheels)
    [ $# -eq 2 ] || usage
    wheels=$2
    mkdir -p "$wheels"
    exec docker run "${hardened[@]}" -e HOME=/tmp \
      -v "$here/scripts/mi300x-wheels.txt:$lock:ro" -v "$wheels:/wheels" \
      "$image" python3 -m pip download --no-cache-dir --quiet --require-hashes --no-deps --only-binary=:all: \
        -r "$lock" -d /wheels ;;
  collect)
    [ $# -eq 3 ] || usage
    run_name "$2"; out_volume=$2-out; records=$3
    [ ! -e "$records" ] || { echo "mi300x-container: $records exists; the records go into a new folder" >&2; exit 1; }
    if ! docker volume inspect "$out_volume" >/dev/null 2>&1; then
      mkdir -p "$records"  # the gate never started: no records, the summary says so
      exit 0
    fi
    dest=$(dirname "$records")
    mkdir -p "$dest"
    exec docker run "${hardened[@]}" --network=none --read-only -v "$out_volume:/out:ro" -v "$dest:/dest" \
      -v "$here/scripts/collect_records.py:/opt/tilegate/collect_records.py:ro" \
      "$image" python3 /opt/tilegate/collect_records.py /out "/dest/$(basename "$records")" ;;
  gate)
    [ $# -ge 7 ] && [ "$6" = "--" ] || usage
    tree=$2; run_name "$3"; out_volume=$3-out; cache=$4; wheels=$5; shift 6
    [ -d "$tree" ] && [ ! -e "$tree/.git" ] || { echo "mi300x-container: $tree is no exported tree (missing, or has .git)" >&2; exit 1; }
    mkdir -p "$cache" "$wheels"
    # nr_inodes: empty files cost the kernel memory but no tmpfs blocks, so their count is bounded
    # too (a million where tox, caches and TileLang build; /out's where collect takes 50,000)
    tmpfs_opts="rw,exec,nosuid,nodev,mode=0700,uid=$uid,gid=$gid,nr_inodes=1m"
    # /out: a tmpfs volume, new (`volume create` would take an existing one as it is), which lives
    # while a container has it mounted: the holder keeps it for `collect`
    if docker volume inspect "$out_volume" >/dev/null 2>&1; then
      echo "mi300x-container: volume $out_volume exists; the records go into a new one" >&2
      exit 1
    fi
    docker volume create --label "$out_label" --driver local --opt type=tmpfs --opt device=tmpfs \
      --opt "o=size=${TILEGATE_OUT_SIZE:-8g},nr_inodes=100k,uid=$uid,gid=$gid,mode=0700,nodev,nosuid,noexec" \
      "$out_volume" >/dev/null
    docker run -d --name "$out_volume" --label "$out_label" "${unprivileged[@]}" --network=none --read-only \
      -v "$out_volume:/out:ro" "$image" sleep infinity >/dev/null
    writable=(--read-only
              --tmpfs "/tmp:$tmpfs_opts,size=${TILEGATE_TMP_SIZE:-8g}"
              --tmpfs "/scratch:$tmpfs_opts,size=${TILEGATE_SCRATCH_SIZE:-64g}")
    if [ "${TRUST:-}" = main ]; then
      writable+=(-v "$cache:/cache")
    else  # a copy of main's, in memory of this container's only
      writable+=(--tmpfs "/cache:$tmpfs_opts,size=${TILEGATE_CACHE_SIZE:-16g}" -v "$cache:/cache-seed:ro"
                 -e TILEGATE_CACHE_SEED=/cache-seed)
    fi
    # the GPUs: KFD and the render nodes, with the groups that own them on this host (by number: the
    # image's group names need not match the host's)
    gpu=()
    for node in ${TILEGATE_GPU_DEVICES:-/dev/kfd /dev/dri}; do
      gpu+=(--device="$node")
      while read -r g; do gpu+=(--group-add "$g"); done < <(find "$node" \( -type c -o -type b \) -printf '%G\n' | sort -u | grep -vx 0)
    done
    model=()  # a local Meta-Llama-3 for the llama3 tests, read-only: main's runs only (its weights are
    # not the public's, and a pull request's records are uploaded)
    if [ -n "${TILEGATE_LLAMA3_PATH:-}" ] && [ "${TRUST:-}" = main ]; then
      model=(-v "$TILEGATE_LLAMA3_PATH:$TILEGATE_LLAMA3_PATH:ro")
    fi
    # --network=none: loopback only (SGLang's engines talk over it); --ipc=private: a /dev/shm of
    # its own, sized for the engines' processes (ROCm's container instructions ask for 16g)
    # the container's output is the job's log: no line of it may be a workflow command (a forged
    # annotation, ::add-mask::), so commands stay off behind a token it cannot know
    # one stream (stderr): the runner reads stdout and stderr apart, so a window opened on one would
    # not cover lines of the other
    exec 1>&2
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    echo "::stop-commands::$token"
    # the job's log is the runner's disk too: the first TILEGATE_LOG_MAX bytes, then a count
    log_max=${TILEGATE_LOG_MAX:-$((64 * 2**20))}
    rc=0
    docker run "${hardened[@]}" "${gpu[@]}" \
      --network=none --ipc=private --shm-size="${TILEGATE_CONTAINER_SHM:-16g}" \
      -v "$tree:/gate:ro" -v "$out_volume:/out" "${writable[@]}" -v "$wheels:/wheels:ro" \
      -v "$here/scripts/mi300x-inside.sh:$inside:ro" -v "$here/scripts/mi300x-wheels.txt:$lock:ro" "${model[@]}" \
      -w /scratch \
      -e HOME=/scratch/home -e TILEGATE_CACHE=/cache -e TILELANG_CACHE_DIR=/scratch/tilelang-cache \
      -e TILEGATE_ARTIFACTS=/out/artifacts -e PIP_NO_INDEX=1 -e PIP_FIND_LINKS=/wheels -e HF_HUB_OFFLINE=1 \
      -e TILEGATE_SUMMARY_TITLE -e TILEGATE_LLAMA3_PATH \
      "$image" bash "$inside" "$@" 2>&1 | first_bytes "$log_max" || rc=$?
    # on a line of its own: output that ends without a newline would swallow the resume
    printf '\n::%s::\n' "$token"
    exit "$rc" ;;
  *) usage ;;
esac
