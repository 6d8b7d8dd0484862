#!/usr/bin/env bash
# One-time set-up of a machine for the gate: Python packages, then the gfx942 cross toolchain.
# Safe to run again: what is installed stays.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
# torch first, so nothing below pulls a multi-GB CUDA build: a machine without torch
# gets the CPU build (2.13.0); a GPU runner keeps the ROCm or CUDA torch it has.
"$py" -c "import torch" 2>/dev/null || "$py" -m pip install -q "torch==2.13.0"
"$py" -m pip install -q -e ".[test]"
bash scripts/install-gfx942-toolchain.sh
# TileLang 0.1.12 (SGLang 0.5.23's pin) in .venv-tl012: the compile + ISA tiers run under it too.
bash scripts/install-tilelang-venv.sh 0.1.12
# SGLang 0.5.23 on the CPU in .venv-sglang: the tilelang backend against SGLang's real engine.
bash scripts/install-sglang-cpu.sh
