"""The compile + ISA tiers of this checkout under another TileLang's venv, in a subprocess.

The child is plain pytest in that venv (tilegate.gate.tilelang_versions names the venvs) selecting
the tiers by their markers, ``-m "compile or isa"``, in the modules that hold them. Which modules
those are, this environment's pytest says (it has every dependency the suite imports; the venv has
TileLang, torch and pytest only, so a module that imports yaml, SGLang or transformers must not be
collected there). The smoke scope keeps, of those tests, the ones of the smoke cases: this module
is the child's plugin (``-p``) for that and for listing the modules. The child's JUnit XML comes
back as a TierResult of tilegate.artifacts.records Outcomes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tilegate.artifacts.records import ERROR, FAILED, PASSED, SKIPPED, Outcome, read_junit
from tilegate.gate.paths import REPO_ROOT
from tilegate.gate.tilelang_versions import venv_python

if TYPE_CHECKING:
    from tilegate.gate.registry import KernelCase

TIERS = "compile or isa"  # the marker expression of the tiers
# smoke (default): the smoke cases' tests (smoke_cases); full: every test of the tiers
SCOPE = os.environ.get("TILEGATE_TL012_SCOPE", "smoke")
PLUGIN = __name__
SMOKE_OPTION, MODULES_OPTION = "--tilegate-smoke-cases", "--tilegate-list-modules"


def smoke_cases() -> list[KernelCase]:
    """The first tile config of each kernel's table, per head_dim, both dtypes, causal; and the
    fp16-accumulating twin of each such config that has one (tilegate.fixtures.compile_cases)."""
    # lowers nothing, but imports TileLang
    from tilegate.fixtures.compile_cases import cases, fp16_accum_cases

    first: dict[tuple[str, int], str] = {}  # (kernel, head_dim) -> its table's first config
    picked = []
    for case in cases("gfx942"):
        cfg = first.setdefault((case.kernel, case.shape.head_dim), case.cfg.name)
        if case.cfg.name == cfg and case.shape.causal:
            picked.append(case)
    return picked + [
        c
        for c in fp16_accum_cases("gfx942")
        if c.cfg.name == f"{first[(c.kernel, c.shape.head_dim)]}-acc16"
    ]


def of_cases(items: list, names: set[str]) -> tuple[list, list]:
    """(kept, dropped): a test is kept when its ``case`` parameter is one of ``names``."""
    kept: list = []
    dropped: list = []
    for item in items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        (kept if getattr(case, "name", None) in names else dropped).append(item)
    return kept, dropped


# --- the plugin, in the pytest processes run_tiers starts ----------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        SMOKE_OPTION, action="store_true", help="run only the tests of the smoke cases"
    )
    parser.addoption(
        MODULES_OPTION, metavar="FILE", help="write the selected tests' modules to FILE (JSON)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption(SMOKE_OPTION):
        kept, dropped = of_cases(items, {c.name for c in smoke_cases()})
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)


def pytest_collection_finish(session: pytest.Session) -> None:
    if out := session.config.getoption(MODULES_OPTION):
        modules = {str(item.path.relative_to(session.config.rootpath)) for item in session.items}
        Path(out).write_text(json.dumps(sorted(modules)))


# --- the driver ----------------------------------------------------------------------------


@dataclass
class TierResult:
    returncode: int
    wall_s: float
    log: Path
    outcomes: list[Outcome] = field(default_factory=list)  # the child's JUnit XML

    def of(self, *kinds: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind in kinds]

    @property
    def passed(self) -> list[Outcome]:
        return self.of(PASSED)

    @property
    def failed(self) -> list[Outcome]:
        return self.of(FAILED, ERROR)

    @property
    def skipped(self) -> list[Outcome]:
        return self.of(SKIPPED)


def _env(first: tuple[Path, ...] = ()) -> dict[str, str]:
    """This environment's, less the outer run's pytest and artifacts settings; PYTHONPATH is
    ``first`` (folders that shadow the venv's own packages), then this checkout's tilegate,
    wherever the venv was made."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "TILEGATE_ARTIFACTS" and not k.startswith("PYTEST_")
    }
    env["PYTHONPATH"] = os.pathsep.join([*map(str, first), str(REPO_ROOT)])
    return env


def run_child_pytest(
    python: Path, args: list[str], artifacts: Path, timeout: float, first: tuple[Path, ...] = ()
) -> TierResult:
    """``python -m pytest args`` from the checkout, its output in ``artifacts``/pytest.log, its
    JUnit XML (``artifacts``/junit.xml, never an earlier run's) read back."""
    artifacts.mkdir(parents=True, exist_ok=True)
    log, junit = artifacts / "pytest.log", artifacts / "junit.xml"
    junit.unlink(missing_ok=True)
    cmd = [
        str(python),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--artifacts={artifacts}",
        f"--junitxml={junit}",
        *args,
    ]
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=REPO_ROOT,
            env=_env(first),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    return TierResult(
        proc.returncode, time.monotonic() - start, log, read_junit(junit) if junit.is_file() else []
    )


def tier_modules(timeout: float = 600) -> list[str]:
    """The suite's modules with tests of the tiers, as this environment's pytest collects them."""
    with tempfile.TemporaryDirectory(prefix="tilegate-tiers-") as scratch:
        listing = Path(scratch) / "modules.json"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            "-p",
            PLUGIN,
            f"{MODULES_OPTION}={listing}",
            f"--artifacts={scratch}",
            "--keep-artifacts",
            "-m",
            TIERS,
            "suite",
        ]
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=REPO_ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0 or not listing.is_file():
            raise RuntimeError(
                f"collecting the {TIERS} tests failed (pytest exited {proc.returncode}):\n"
                f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            )
        return json.loads(listing.read_text())


def run_tiers(
    version: str,
    artifacts: Path,
    cache: Path,
    *,
    update_golden: bool = False,
    golden_reason: str | None = None,
    timeout: float = 3600,
) -> TierResult:
    """The compile + ISA tiers of this checkout under ``version``'s venv, in a subprocess: the
    smoke cases' tests on one process, or with SCOPE full or ``update_golden`` (which re-records
    every snapshot of ``version``) all of them on two xdist workers."""
    full = SCOPE == "full" or update_golden
    # the kernel tiers' folder stays out: SGLang's kernels under 0.1.12 are .venv-sglang's run
    # (suite/families/test_kernels_venv.py), and this venv has no SGLang, so their tiers would
    # only skip here; the adapters' machinery is judged under the TileLang the gate pins
    select = (
        ["-n", "2", "--deselect=suite/families/"]
        if full
        else ["-n", "0", "-p", PLUGIN, SMOKE_OPTION]
    )
    args = [
        f"--tilegate-cache={cache}",
        *(["--update-golden", f"--golden-reason={golden_reason or ''}"] if update_golden else []),
        *select,
        "-m",
        TIERS,
        *tier_modules(),
    ]
    return run_child_pytest(venv_python(version), args, artifacts, timeout)
