#!/usr/bin/env bash
# A venv with the other supported TileLang (0.1.12, the version SGLang 0.5.23 pins) for the gate's
# compile + ISA tiers: suite/compat/test_compat_tilelang.py runs them there in a subprocess, so one
# `pytest` checks both versions. Holds CPU torch 2.13.0 (TileLang imports torch; lowering and the
# gfx942 cross build need no GPU), pytest, pytest-xdist, and this checkout (editable, --no-deps).
# Safe to run again: a venv that already has this TileLang is only refreshed for this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-0.1.12}
case "$version" in
    0.1.12) venv=${TILEGATE_TL012_VENV:-.venv-tl012} ;;
    *) echo "no side venv for TileLang $version: the gate supports 0.1.15 (its own env) and 0.1.12" >&2; exit 2 ;;
esac
base=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$base" -m venv "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install -q --no-compile --disable-pip-version-check)  # --no-compile: scripts/install-sglang-cpu.sh says why
if ! "$py" -c "import sys, tilelang; sys.exit(tilelang.__version__ != '$version')" 2>/dev/null; then
    "${pip[@]}" "torch==2.13.0" "tilelang==$version" "pytest>=8" "pytest-xdist>=3" numpy
fi
"${pip[@]}" --no-deps -e .
echo "TileLang $("$py" -c 'import tilelang; print(tilelang.__version__)') ready in $venv"
