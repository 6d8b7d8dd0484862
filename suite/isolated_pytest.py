"""A pytest run on files a test generates, outside this project's configuration: its argv prefix
and its environment (several library tests start one; no test module imports another)."""

from __future__ import annotations

import os
import sys

import tomllib

from tilegate.gate.paths import REPO_ROOT
from tilegate.testing.run_records import PARENT_ENV


def _plugins_the_project_turns_off() -> list[str]:
    """pyproject.toml's ``-p no:NAME`` addopts: -c os.devnull leaves addopts out, so they are
    repeated here (read, not copied, so the two cannot drift)."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    addopts = pyproject["tool"]["pytest"]["ini_options"]["addopts"].split()
    return [
        arg
        for flag, name in zip(addopts, addopts[1:])
        if flag == "-p"
        for arg in ("-p", name)
        if name.startswith("no:")
    ]


# no cache folder in the generated project, no ini of ours
PYTEST_WITHOUT_INI = (
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    *_plugins_the_project_turns_off(),
    "-c",
    os.devnull,
)


def environment_of_a_first_run() -> dict[str, str]:
    """This process's environment less what names a run's records folder (an explicit one, or
    the enclosing gate run's): the run started with it decides its own, as a developer's would."""
    return {k: v for k, v in os.environ.items() if k not in ("TILEGATE_ARTIFACTS", PARENT_ENV)}
