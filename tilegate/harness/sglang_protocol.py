"""The files and variables through which the SGLang driver (the gate's pytest process) and its
child (``python -m tilegate.harness.sglang_child`` in SGLang's python) talk. One place for names.

In the run's work folder:
  spec.json      what to serve (driver -> child; tilegate.harness.sglang_child.main says its keys)
  result.json    generations, reference, errors, markers (child -> driver)
  exit-code      the child's exit status, written by the ``sh`` that runs it
  child.log      the child's output
  markers/       one file per SGLang process the instrumented plugin ran in
  started        when and as which process group the child was launched
  start.lock     taken by whichever xdist worker launches it
"""

from __future__ import annotations

import os
from pathlib import Path

from tilegate.paths import REPO_ROOT

SPEC, RESULT, EXIT_CODE, LOG = "spec.json", "result.json", "exit-code", "child.log"
MARKERS, STARTED, START_LOCK = "markers", "started", "start.lock"

# Set in the child's environment: the instrumented plugin (tilegate.harness.sglang_instrumented)
# acts only when MARKER_DIR_ENV names a folder, and SGLANG_PLUGINS lets only it load.
MARKER_DIR_ENV = "TILEGATE_SGLANG_MARKER_DIR"
HARNESS_PLUGIN = "tilelang-harness"

VENV = Path(os.environ.get("TILEGATE_SGLANG_VENV", REPO_ROOT / ".venv-sglang"))
INSTALL_HINT = "run scripts/install-sglang-cpu.sh"


def venv_python() -> Path:
    return VENV / "bin" / "python"


def missing_reason() -> str | None:
    """One line naming what is missing, or None when the SGLang CPU venv is there. Only the
    venv's absence is a reason to skip: a venv that is there but broken fails the tests."""
    if not venv_python().exists():
        return f"SGLang CPU venv missing: {INSTALL_HINT}"
    return None


def child_env(marker_dir: Path, *, cpu: bool = True) -> dict:
    """The child's environment: SGLang's CPU engine (this machine) or its GPU engine (the MI300X
    runner), with the instrumented plugin as the only plugin SGLang loads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEGATE_SGLANG_", "SGLANG_"))}
    env |= {
        "HF_HUB_OFFLINE": "1",  # never the hub: the model is built locally or is a local checkpoint
        "TRANSFORMERS_OFFLINE": "1",
        MARKER_DIR_ENV: str(marker_dir),
        "SGLANG_PLUGINS": HARNESS_PLUGIN,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if cpu:
        env |= {
            "SGLANG_USE_CPU_ENGINE": "1",  # SGLang's CPU platform (torch sees no GPU here)
            # One intra-op thread per process: on the 2-core CI machine torch's thread pool makes each
            # tiny matmul take ~8 ms instead of ~5 us (the reference backend's decode went from 13 s to
            # 0.4 s), and the engine's processes and the other xdist worker share those cores anyway.
            "OMP_NUM_THREADS": "1",
        }
        env.pop("PYTHONPATH", None)  # the venv's editable install provides tilegate
    return env
