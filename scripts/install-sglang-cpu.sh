#!/usr/bin/env bash
# SGLang 0.5.23 on the CPU, in its own venv (.venv-sglang), for the end-to-end contract tests
# (suite/test_sglang_*.py). Those tests drive this venv's python in a subprocess: SGLang pins
# torch 2.14.1, the gate's own environment keeps torch 2.13 (CPU build).
#
# - torch 2.14.1 / torchvision 0.29.1 come from the local wheel mirror (they are CUDA builds and
#   bring their nvidia-* libraries, which torch links at import; no GPU is used).
# - sglang itself is installed --no-deps: its metadata pins CUDA-only packages (sglang-kernel,
#   flashinfer, flash-attn-4, ...). The plain dependencies the CPU engine imports are listed below.
# - sgl_kernel: PyPI has no CPU build. SGLang's CPU path imports a few of its names at import
#   time and never calls them for a dense Llama, so when no real sgl_kernel imports, an
#   import-only stand-in (scripts/sgl_kernel_stub, raises on any call, refuses to import where
#   a GPU is present) goes into this venv only.
# - this checkout, editable and --no-deps, so SGLang's plugin loader sees the entry points
#   sglang.srt.plugins -> tilelang (pyproject.toml) and tilelang-harness (testing/pyproject.toml).
# Safe to run again: a venv whose sglang already imports is only refreshed for this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${TILEGATE_SGLANG_VENV:-.venv-sglang}
base=${PYTHON:-python3}
# A venv this script finished for this checkout and these install files has a stamp naming them:
# then nothing is imported or installed again (tox -e cpu runs this script after setup.sh did).
stamp="$venv/.tilegate-ready"
# (rm the stamp to force a full check)
sources=$(cat scripts/install-sglang-cpu.sh pyproject.toml testing/pyproject.toml scripts/sgl_kernel_stub/pyproject.toml \
    scripts/sgl_kernel_stub/sgl_kernel/*.py | sha256sum | cut -d' ' -f1)
want="$sources $(pwd -P)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "SGLang 0.5.23 ready in $venv (stamp $stamp)"
    exit 0
fi
rm -f "$stamp"
[ -x "$venv/bin/python" ] || "$base" -m venv "$venv"
py="$venv/bin/python"
# pip -q, less two kinds of expected noise: the local mirror's "Location ... is ignored" notes and
# the resolver's list of sglang's CUDA-only requirements that --no-deps leaves out on purpose.
# --no-compile: no .pyc for every file of torch and friends at install (a third of torch's 91 s
# install on 2 CPUs); Python writes one for each module the first time it imports it.
pip_install() {
    "$py" -m pip install -q --no-compile --disable-pip-version-check "$@" 2> >(grep -v -e "is ignored: it is neither" \
        -e "^sglang 0.5.23 requires" -e "dependency resolver does not currently take" >&2)
}

if ! "$py" -c "import sglang, torch; assert sglang.__version__ == '0.5.23' and torch.__version__.startswith('2.14.1')" 2>/dev/null; then
    pip_install "torch==2.14.1" "torchvision==0.29.1"
    pip_install --no-deps "sglang==0.5.23"
    # What SGLang's CPU engine imports for a dense Llama (pins as in sglang 0.5.23's metadata).
    pip_install \
        "transformers==5.19.0" "tokenizers==0.23.2" "xgrammar==0.2.7" "openai==2.8.0" \
        "compressed-tensors==0.18.0" \
        safetensors huggingface-hub fastapi "uvicorn>=0.51" uvloop "pyzmq>=25.1.2" orjson msgspec \
        psutil requests aiohttp pydantic pillow setproctitle pybase64 partial_json_parser \
        interegular einops "prometheus-client>=0.20.0" python-multipart xxhash zstandard \
        pyyaml regex tqdm packaging numpy scipy sentencepiece tiktoken gguf blobfile dill \
        IPython python-dateutil watchfiles
fi
# SGLang's own TileLang kernels (suite/families/test_kernels_venv.py): its pinned TileLang (0.1.12, with
# its apache-tvm-ffi pin) and pytest in this venv; the gate's TileLang 0.1.15 (and the tvm-ffi it
# takes) as an overlay folder that the harness puts first on PYTHONPATH (tilegate/harness/sglang/kernels_venv.py).
if ! "$py" -c "import tilelang, pytest, xdist; assert tilelang.__version__ == '0.1.12'" 2>/dev/null; then
    pip_install "tilelang==0.1.12" "apache-tvm-ffi==0.1.11" "pytest>=8" "pytest-xdist>=3" pytest-split
fi
overlay="$venv/tilelang-0.1.15"
if ! PYTHONPATH="$overlay" "$py" -c "import tilelang; assert tilelang.__version__ == '0.1.15'" 2>/dev/null; then
    pip_install --no-deps --target "$overlay" "tilelang==0.1.15" "apache-tvm-ffi==0.1.12"
fi
if ! "$py" -c "import sgl_kernel" 2>/dev/null; then
    pip_install --no-deps ./scripts/sgl_kernel_stub
fi
pip_install --no-deps -e . -e ./testing
"$py" - <<'PY'
from importlib.metadata import entry_points
import sglang, torch
names = [ep.value for ep in entry_points(group="sglang.srt.plugins")]
assert {"tilegate.serving.sglang_plugin:register", "tilegate.harness.sglang.registration:register"} <= set(names), names
print(f"SGLang {sglang.__version__} (torch {torch.__version__}) ready; sglang.srt.plugins: {names}")
PY
echo "$want" > "$stamp"
