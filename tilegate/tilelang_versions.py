"""The TileLang versions the gate supports, and the compile + ISA tiers under a second one.

  0.1.15  the newest release: the gate's own environment (scripts/setup.sh, tox -e cpu)
  0.1.12  the version SGLang 0.5.23 pins: what a deployment's SGLang process lowers the kernels
          with (tox -e cpu-tl012, or .venv-tl012 from scripts/install-tilelang-venv.sh)

Both lower the same kernel programs for gfx942 through the same API (T.dynamic, the
dyn_shared_memory_buf attribute, Target({"kind": "hip", "mcpu": "gfx942"})); 0.1.12's HIP
templates also need tilelang/3rdparty/composable_kernel/include (tilegate.toolchain adds it).
The code they emit differs (VGPRs, LDS after buffer reuse), so golden ISA snapshots are kept per
TileLang version: suite/golden/gfx942/<toolchain>/tilelang-<version>/.

Driver side (the gate's python): ``venv_python``, ``missing_reason``, ``smoke_node_ids``,
``run_tiers``. The child is plain pytest in the other venv, on node ids of this checkout.
"""

from __future__ import annotations

import os
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import tilelang

from tilegate import REPO_ROOT

SUPPORTED = ("0.1.12", "0.1.15")
RUNNING = tilelang.__version__
# Versions checked from a venv of their own, beside the gate's environment.
VENVS = {"0.1.12": Path(os.environ.get("TILEGATE_TL012_VENV", REPO_ROOT / ".venv-tl012"))}
TOX_ENVS = {"0.1.12": "cpu-tl012"}  # the same tiers through tox, one venv per version
# smoke (default): the first tile config of each kernel's table, both dtypes, causal, plus the
# fp16-accumulating twin of the first prefill config; full: every case (-m "compile or isa").
SCOPE = os.environ.get("TILEGATE_TL012_SCOPE", "smoke")


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


def smoke_node_ids() -> list[str]:
    """Compile, ISA and golden tests of the smoke subset, as node ids of this checkout."""
    from tilegate.fixtures.compile_cases import cases, fp16_accum_cases

    first: dict[tuple[str, int], str] = {}  # (kernel, head_dim) -> its table's first config
    picked = []
    for case in cases("gfx942"):
        cfg = first.setdefault((case.kernel, case.shape.head_dim), case.cfg.name)
        if case.cfg.name == cfg and case.shape.causal:
            picked.append(case.name)
    twins = [c.name for c in fp16_accum_cases("gfx942") if c.cfg.name == f"{first[(c.kernel, c.shape.head_dim)]}-acc16"]
    ids = []
    for name in picked:
        ids += [f"suite/test_compile.py::test_lowers_for_gfx942[{name}]",
                f"suite/test_isa.py::test_gfx942_isa[{name}]",
                f"suite/test_isa.py::test_matches_golden_snapshot[{name}]"]
    for name in twins:
        ids += [f"suite/test_isa.py::test_fp16_accumulation_variant_is_flagged[{name}]",
                f"suite/test_isa.py::test_matches_golden_snapshot[{name}]"]
    return ids


def tier_modules() -> list[str]:
    """The suite's modules with compile or ISA tests: the child collects only these, so a module
    that imports what the venv lacks (SGLang, transformers) cannot break its collection."""
    suite = REPO_ROOT / "suite"
    return [f"suite/{f.name}" for f in sorted(suite.glob("test_*.py"))
            if f.name != "test_compat_tilelang.py" and any(f"mark.{m}" in f.read_text() for m in ("compile", "isa"))]


@dataclass
class TierResult:
    returncode: int
    wall_s: float
    log: Path
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "test id: message (its first lines)"
    skipped: list[str] = field(default_factory=list)  # "test id: reason"


def _read_junit(path: Path, result: TierResult) -> None:
    for tc in ET.parse(path).getroot().iter("testcase"):
        test = f"{tc.get('classname')}::{tc.get('name')}"
        outcome = next((child for child in tc if child.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            result.passed.append(test)
            continue
        message = [m for m in (outcome.get("message") or "").strip().splitlines() if m.strip()]
        message = [m for m in message if not m.lstrip().startswith("assert ")][:8] or [outcome.tag]
        line = f"{test}: " + "\n    ".join(message)
        (result.skipped if outcome.tag == "skipped" else result.failed).append(line)


def run_tiers(version: str, artifacts: Path, cache: Path, *, update_golden: bool = False,
              timeout: float = 3600) -> TierResult:
    """The compile + ISA tiers of this checkout under ``version``'s venv, in a subprocess: the
    smoke subset on one process, or with SCOPE full or ``update_golden`` (which re-records every
    snapshot of ``version``) all of them on two xdist workers."""
    artifacts.mkdir(parents=True, exist_ok=True)
    log, junit = artifacts / "pytest.log", artifacts / "junit.xml"
    junit.unlink(missing_ok=True)  # never read an earlier run's results
    full = SCOPE == "full" or update_golden
    select = ["-n", "2", "-m", "compile or isa", *tier_modules()] if full else ["-p", "no:xdist", *smoke_node_ids()]
    cmd = [str(venv_python(version)), "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--artifacts={artifacts}", f"--tilegate-cache={cache}", f"--junitxml={junit}",
           *(["--update-golden"] if update_golden else []), *select]
    env = {k: v for k, v in os.environ.items() if k != "TILEGATE_ARTIFACTS" and not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(REPO_ROOT)  # this checkout's tilegate, wherever the venv was made
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(cmd, check=False, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    result = TierResult(proc.returncode, time.monotonic() - start, log)
    if junit.is_file():
        _read_junit(junit, result)
    return result
