"""The files and variables through which the SGLang driver (the gate's pytest process) and its
child (``python -m tilegate.harness.sglang.child`` in SGLang's python) talk. One place for names.

In the run's work folder:
  spec.json      what to serve (driver -> child; tilegate.harness.sglang.child.main says its keys)
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

from tilegate.gate.paths import REPO_ROOT

SPEC, RESULT, EXIT_CODE, LOG = "spec.json", "result.json", "exit-code", "child.log"
MARKERS, STARTED, START_LOCK = "markers", "started", "start.lock"

# Set in the child's environment: the instrumented plugin (tilegate.harness.sglang.registration)
# acts only when MARKER_DIR_ENV names a folder, and SGLANG_PLUGINS lets only it load.
MARKER_DIR_ENV = "TILEGATE_SGLANG_MARKER_DIR"
HARNESS_PLUGIN = "tilelang-harness"

VENV = Path(os.environ.get("TILEGATE_SGLANG_VENV", REPO_ROOT / ".venv-sglang"))
INSTALL_HINT = "run scripts/install-sglang-cpu.sh"
# tilegate.serving.sglang_plugin: the harness plugin registers it, observed
PRODUCTION_PLUGIN = "tilelang"


def venv_python() -> Path:
    return VENV / "bin" / "python"


def missing_reason() -> str | None:
    """One line naming what is missing, or None when the SGLang CPU venv is there. Only the
    venv's absence is a reason to skip: a venv that is there but broken fails the tests."""
    if not venv_python().exists():
        return f"SGLang CPU venv missing: {INSTALL_HINT}"
    return None


def gpu_missing_reason(python: str, on_mi300x: bool) -> str | None:
    """For the GPU tier, which serves from the gate's own python: one line when that python has no
    SGLang, else None. On the MI300X runner SGLang's ROCm build is part of the runner (its
    container), so there a missing SGLang is no reason to skip: the tests fail and say so."""
    import importlib.util

    if on_mi300x or importlib.util.find_spec("sglang") is not None:
        return None
    return (
        f"no SGLang GPU build importable from {python}: install SGLang's CUDA/ROCm build "
        "(on the H200 here: ../shared/device/sglang-h200)"
    )


def gpu_plugins(configured: str | None) -> str:
    """SGLANG_PLUGINS for a GPU child: the caller's allow-list (an environment such as the H200's
    kit adds plugins of its own), with the production plugin swapped for the harness plugin, which
    registers it observed; loaded after it, the production plugin would replace the observed one."""
    names = [
        n
        for n in (configured or "").split(",")
        if n and n not in (PRODUCTION_PLUGIN, HARNESS_PLUGIN)
    ]
    return ",".join([HARNESS_PLUGIN, *names])


def production_plugins(configured: str | None, *, cpu: bool) -> str:
    """SGLANG_PLUGINS that serve ``tilelang`` as users do: the production plugin and, on a GPU, the
    environment's own plugins, never the harness plugin (its observed backend records each replayed
    batch, a read back to the host that a benchmark must not pay)."""
    names = [] if cpu else [n for n in (configured or "").split(",") if n]
    return ",".join(
        [PRODUCTION_PLUGIN, *(n for n in names if n not in (PRODUCTION_PLUGIN, HARNESS_PLUGIN))]
    )


def child_env(marker_dir: Path, *, cpu: bool = True, observed: bool = True) -> dict:
    """The child's environment, with the instrumented plugin loaded in place of the production one
    (``observed=False``: the production plugin, for the serving benchmark). CPU (.venv-sglang):
    SGLang's CPU engine, nothing of the caller's SGLANG_* or PYTHONPATH. GPU (the gate's own
    python): the caller's SGLANG_* and PYTHONPATH pass through, since that is how an SGLang GPU
    environment is set up (the MI300X container, the H200's kit)."""
    keep_sglang = not cpu
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TILEGATE_SGLANG_") and (keep_sglang or not k.startswith("SGLANG_"))
    }
    env |= {
        "HF_HUB_OFFLINE": "1",  # never the hub: the model is built locally or is a local checkpoint
        "TRANSFORMERS_OFFLINE": "1",
        MARKER_DIR_ENV: str(marker_dir),
        "SGLANG_PLUGINS": (
            (HARNESS_PLUGIN if cpu else gpu_plugins(os.environ.get("SGLANG_PLUGINS")))
            if observed
            else production_plugins(os.environ.get("SGLANG_PLUGINS"), cpu=cpu)
        ),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if cpu:
        env |= {
            "SGLANG_USE_CPU_ENGINE": "1",  # SGLang's CPU platform (torch sees no GPU here)
            # One intra-op thread per process: on the 2-core CI machine torch's thread pool makes
            # each tiny matmul take ~8 ms instead of ~5 us (the reference backend's decode went from
            # 13 s to 0.4 s), and the engine's processes and the other xdist worker share those
            # cores anyway.
            "OMP_NUM_THREADS": "1",
        }
        env.pop("PYTHONPATH", None)  # the venv's editable install provides tilegate
    return env
