"""The TileLang versions the gate supports, and the compile + ISA tiers under a second one.

  0.1.15  the newest release: the gate's own environment (scripts/setup.sh, tox -e cpu)
  0.1.12  the version SGLang 0.5.23 pins: what a deployment's SGLang process lowers the kernels
          with (tox -e cpu-tl012, or .venv-tl012 from scripts/install-tilelang-venv.sh)

Both lower the same kernel programs for gfx942 through the same API (T.dynamic, the
dyn_shared_memory_buf attribute, Target({"kind": "hip", "mcpu": "gfx942"})); 0.1.12's HIP
templates also need tilelang/3rdparty/composable_kernel/include (tilegate.gfx942.toolchain adds it).
The code they emit differs (VGPRs, LDS after buffer reuse), so golden ISA snapshots are kept per
TileLang version: suite/golden/gfx942/<toolchain>/tilelang-<version>/.

The tiers' runner under the other version's venv is tilegate.harness.tilelang_venv.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT

SUPPORTED = ("0.1.12", "0.1.15")
RUNNING = version("tilelang")  # from its metadata: importing tilelang (and torch) takes seconds
# Versions checked from a venv of their own, beside the gate's environment.
VENVS = {"0.1.12": Path(os.environ.get("TILEGATE_TL012_VENV", REPO_ROOT / ".venv-tl012"))}
TOX_ENVS = {"0.1.12": "cpu-tl012"}  # the same tiers through tox, one venv per version


def install_hint(version: str) -> str:
    return f"run scripts/install-tilelang-venv.sh {version} (or tox -e {TOX_ENVS[version]})"


def venv_python(version: str) -> Path:
    return VENVS[version] / "bin" / "python"


def missing_reason(version: str) -> str | None:
    """One line naming what is missing, or None. Only an absent venv, or a run that already is
    this version, skips; a venv that is there but broken fails the test."""
    if RUNNING == version:
        return f"this run is TileLang {version} itself"
    if not venv_python(version).exists():
        return f"TileLang {version} venv missing ({VENVS[version]}): {install_hint(version)}"
    return None
