#!/usr/bin/env bash
# A real container runtime for the runner-boundary tests (suite/library/test_runner_boundary.py, marker
# container): Debian's docker.io with its daemon running, the test image (scripts/test-container-image.sh)
# and the wheels of scripts/mi300x-wheels.txt, downloaded by hash into .cache/mi300x-wheels as the
# MI300X job's wheels step takes them. Safe to run again: what is there stays.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v dockerd >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io
fi
if ! docker info >/dev/null 2>&1; then
  # no init system to start it: by hand, in the background. A pid file left by a daemon that died
  # with its machine would stop the new one.
  pidfile=/var/run/docker.pid
  if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then rm -f "$pidfile"; fi
  nohup dockerd >/var/log/tilegate-dockerd.log 2>&1 &
  for _ in $(seq 1 300); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
  docker info >/dev/null || { tail -n 20 /var/log/tilegate-dockerd.log >&2; exit 1; }
fi
bash scripts/test-container-image.sh >/dev/null
python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -r scripts/mi300x-wheels.txt \
  -d .cache/mi300x-wheels
echo "container runtime: $(docker version --format '{{.Server.Version}}'), image tilegate-test-image:1, wheels in .cache/mi300x-wheels"
