"""A kernel repository that is not the gate, as its author runs it: a copy of an example package's
folder (suite/external_kernel, suite/dense_kernel), installed in a fresh venv beside a plain,
non-editable install of the gate, and plain ``pytest`` run in that copy with nothing of this run's
environment that points at the gate's checkout. The package tests of suite/families share it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from filelock import FileLock

from tilegate.artifacts.records import read_junit
from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.toolchain import cross_prefix


def gate_build_lock() -> FileLock:
    """Held around every pip build of the gate's own source tree in this checkout: setup.py's
    build_py empties build/lib first, so two builds at once (two xdist workers) delete each
    other's files. A lock file outside the tree, one per checkout."""
    checkout = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:16]
    return FileLock(str(Path(tempfile.gettempdir()) / f"tilegate-build-{checkout}.lock"))


def install_in_fresh_venv(package: Path, root: Path) -> tuple[Path, Path]:
    """(python of a fresh venv under ``root`` with the gate and ``package`` installed, the copy of
    the package's folder)."""
    venv, repo = root / "venv", root / "repo"
    shutil.copytree(package, repo, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    with gate_build_lock():
        pip = subprocess.run(
            [
                *(str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile"),
                "--no-build-isolation",
                *(str(REPO_ROOT), str(REPO_ROOT / "testing"), str(repo)),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert pip.returncode == 0, pip.stderr[-3000:]
    shutil.rmtree(repo / "build", ignore_errors=True)
    return python, repo


def outside_env() -> dict[str, str]:
    """This run's environment without what points at the gate's checkout (PYTHONPATH: a worktree
    run sets it) or at this run (PYTEST_*, TILEGATE_*)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "TILEGATE_")) and k != "PYTHONPATH"
    }


def plain_pytest(python: Path, repo: Path, tmp: Path, *args: str) -> tuple[int, list, str]:
    """(exit code, outcomes from its JUnit XML, the log's tail) of ``python -m pytest args`` in
    ``repo``, with the gate's toolchain and a compile cache of its own under ``tmp``."""
    junit = tmp / "junit.xml"
    env = outside_env()
    env |= {"TILEGATE_TOOLCHAIN": str(cross_prefix()), "TILEGATE_CACHE": str(tmp / "cache")}
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    outcomes = read_junit(junit) if junit.is_file() else []
    return proc.returncode, outcomes, proc.stdout[-4000:] + proc.stderr[-2000:]
