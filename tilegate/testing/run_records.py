"""Where a run's records go, decided once by the run's first process.

- ``--artifacts=DIR`` (or TILEGATE_ARTIFACTS): DIR is the run's folder, as tox, CI and the MI300X
  container ask. A run clears the records an earlier one left there, unless ``--keep-artifacts``
  says it is a later command of the same gate run (tox -e rocm).
- Otherwise (a developer's run): a new folder ``artifacts/runs/<time>-<pid>/`` under pytest's
  rootdir, and the link ``artifacts/latest`` moved to it once the folder exists. Earlier runs stay,
  the newest ``KEPT_RUNS`` of them; ``--keep-artifacts`` adds to the folder ``latest`` names.
- A pytest run started by a gate run (a nested run, its environment names the parent's folder)
  that names no folder writes under the parent's ``nested/``, and never moves ``latest``.
- ``--collect-only`` touches nothing: an IDE's test discovery leaves every record as it was.

xdist workers write where their controller decided (``pytest_configure_node`` hands it over); no
environment variable carries it, so a nested run cannot inherit it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tilegate.artifacts.records import LATEST, RUN_NAME, RUNS, latest_run
from tilegate.artifacts.writer import clear_run_artifacts

NESTED = "nested"
KEPT_RUNS = 5
PARENT_ENV = "TILEGATE_PARENT_RUN"  # set by a run for the pytest runs it starts
WORKER_KEY = "tilegate_artifacts"


def decide(config: pytest.Config, explicit: str | None) -> Path:
    """The folder this run's records go to; made (and an explicit one cleared) unless collecting."""
    touch = not config.option.collectonly
    keep = config.getoption("--keep-artifacts")
    if explicit:
        folder = Path(explicit)
        if touch:
            if not keep:
                clear_run_artifacts(folder)
            folder.mkdir(parents=True, exist_ok=True)
        return folder
    parent = os.environ.get(PARENT_ENV)
    root = Path(parent) / NESTED if parent else config.rootpath / "artifacts"
    if keep and (latest := latest_run(root)) is not None:
        return latest
    folder = root / RUNS / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    if touch:
        folder.mkdir(parents=True)
        if not parent:
            _point_latest(root, folder)
            _prune(root / RUNS, keep=folder)
    return folder


def _point_latest(root: Path, folder: Path) -> None:
    staged = root / f".{LATEST}-{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(f"{RUNS}/{folder.name}")
    os.replace(staged, root / LATEST)  # atomic: a reader sees the old run or the new one


def _prune(runs: Path, keep: Path) -> None:
    earlier = sorted(p for p in runs.iterdir() if p != keep and RUN_NAME.fullmatch(p.name))
    for old in earlier[: max(0, len(earlier) - (KEPT_RUNS - 1))]:
        shutil.rmtree(old, ignore_errors=True)
