"""The compile + ISA tiers of this checkout under another TileLang's venv, in a subprocess.

The child is plain pytest in that venv (tilegate.tilelang_versions names the venvs), on node ids
of this checkout; its JUnit XML comes back as a TierResult.
"""

from __future__ import annotations

import os
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from tilegate.fixtures.compile_cases import cases, fp16_accum_cases
from tilegate.paths import REPO_ROOT
from tilegate.tilelang_versions import venv_python

# smoke (default): the first tile config of each kernel's table, both dtypes, causal, plus the
# fp16-accumulating twin of the first prefill config; full: every case (-m "compile or isa").
SCOPE = os.environ.get("TILEGATE_TL012_SCOPE", "smoke")


def smoke_node_ids() -> list[str]:
    """Compile, ISA and golden tests of the smoke subset, as node ids of this checkout."""

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
    select = ["-n", "2", "-m", "compile or isa", *tier_modules()] if full else ["-n", "0", *smoke_node_ids()]
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
