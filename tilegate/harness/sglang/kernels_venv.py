"""The kernel tiers on SGLang's TileLang kernels, in .venv-sglang (SGLang 0.5.23 and its
dependencies; the gate's environment has neither), under either TileLang the gate supports:

  0.1.12  the venv's own: the version SGLang pins, what a deployment lowers these kernels with
  0.1.15  the gate's: an overlay folder (pip --target, scripts/install-sglang-cpu.sh) put first on
          PYTHONPATH, so the same SGLang and torch import the other TileLang

The child is plain pytest in that venv over suite/families/test_kernels.py, ``-m "compile
or isa"``; its JUnit XML comes back as a tilelang_venv.TierResult."""

from __future__ import annotations

from pathlib import Path

from tilegate.harness.sglang.protocol import VENV, venv_python
from tilegate.harness.tilelang_venv import TIERS, TierResult, run_child_pytest

MODULE = "suite/families/test_kernels.py"
OVERLAYS = {"0.1.15": VENV / "tilelang-0.1.15"}  # version -> folder; 0.1.12 is the venv's own


def missing_reason(version: str) -> str | None:
    overlay = OVERLAYS.get(version)
    if overlay is not None and not (overlay / "tilelang").is_dir():
        return f"TileLang {version} overlay missing ({overlay}): run scripts/install-sglang-cpu.sh"
    return None


def run_tiers(version: str, artifacts: Path, cache: Path, timeout: float = 1800) -> TierResult:
    overlay = (OVERLAYS[version],) if version in OVERLAYS else ()
    return run_child_pytest(
        venv_python(),
        ["-n", "2", f"--tilegate-cache={cache}", "-m", TIERS, MODULE],
        artifacts,
        timeout,
        first=overlay,
    )
