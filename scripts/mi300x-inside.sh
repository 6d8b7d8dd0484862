#!/usr/bin/env bash
# Inside the MI300X gate's container (scripts/mi300x-container.sh mounts this file, main's copy):
# makes the read-only tree under test writable in /scratch, installs the tools from main's lock
# offline, runs COMMAND there, and hands the records back as data in /out.
#
#   bash /opt/tilegate/inside.sh COMMAND [ARG ...]     (working folder: the tree's copy)
#
# Everything here runs beside the code under test, so nothing here is trusted by the host: the
# host only copies plain files out of /out afterwards (scripts/collect_records.py).
set -euo pipefail
# tox and the editable installs write into the project (.tox/, *.egg-info), so the gate runs in a
# copy; /gate itself stays read-only
rm -rf /scratch/gate
cp -a /gate /scratch/gate
# a pull request's cache: main's, copied into this container's own tmpfs (mi300x-container.sh)
if [ -n "${TILEGATE_CACHE_SEED:-}" ]; then cp -a "$TILEGATE_CACHE_SEED/." /cache/; fi
mkdir -p "$HOME" /out/artifacts
cd /scratch/gate
# tox, pytest and their dependencies, every file by its sha256 (pip: no index, PIP_FIND_LINKS);
# the image has torch, SGLang and the rest
# (a Python built without ensurepip has no venv with pip: then the user site under the scratch home)
if python3 -m venv --system-site-packages /scratch/tools; then
  /scratch/tools/bin/python -m pip install --quiet --require-hashes --no-deps -r /opt/tilegate/wheels.txt
  export PATH=/scratch/tools/bin:$PATH
else
  python3 -m pip install --quiet --user --require-hashes --no-deps -r /opt/tilegate/wheels.txt
  export PATH=$HOME/.local/bin:$PATH
fi
rc=0
"$@" || rc=$?
# what a recording run changed (dispatch with record_baselines): the maintainer commits these
if [ -d suite/baselines ]; then mkdir -p /out/baselines && cp -r suite/baselines/. /out/baselines/; fi
[ ! -f .test_durations ] || cp .test_durations /out/.test_durations
exit "$rc"
