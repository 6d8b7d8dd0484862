"""A kernel repository that is not the gate, gated by plain ``pytest``: suite/external_kernel is
a package of its own (pyproject, one TileLang kernel, its adapter, a ``tilegate.kernels`` entry
point). In a fresh venv it is installed next to a plain, non-editable install of the gate (the
runtime and tilegate-testing); run in a copy of its folder, ``pytest`` collects no test of its
own, and the plugin adds the foreign-kernel tiers: provenance, capabilities, gfx942 compile and
ISA pass; and a second adapter with a config over the LDS budget makes the same run fail, naming
the budget."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.artifacts.records import FAILED, PASSED, SKIPPED, read_junit, run_folder
from tilegate.gfx942.toolchain import cross_prefix
from tilegate.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "suite" / "external_kernel"

pytestmark = [
    pytest.mark.nested,  # fresh venvs and wheel builds: minutes of CPU
    # one worker: the module's venv is built once, and two pip builds of the gate in its source
    # tree at once collide in its build/ folder
    pytest.mark.xdist_group("external-kernel-package"),
]


@pytest.fixture(scope="module")
def kernel_repo(tmp_path_factory) -> tuple[Path, Path]:
    """(python of a fresh venv with the gate and the package installed, a copy of the package's
    folder)."""
    root = tmp_path_factory.mktemp("kernel-repo")
    venv, repo = root / "venv", root / "repo"
    shutil.copytree(PACKAGE, repo, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--no-build-isolation",
            str(REPO_ROOT),
            str(REPO_ROOT / "testing"),
            str(repo),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    shutil.rmtree(repo / "build", ignore_errors=True)
    return python, repo


def _outside_env() -> dict[str, str]:
    """This run's environment without what points at the gate's checkout (PYTHONPATH: a worktree
    run sets it) or at this run (PYTEST_*, TILEGATE_*)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "TILEGATE_")) and k != "PYTHONPATH"
    }


def _pytest(python: Path, repo: Path, tmp: Path, *args: str) -> tuple[int, list, str]:
    junit = tmp / "junit.xml"
    env = _outside_env()
    env |= {"TILEGATE_TOOLCHAIN": str(cross_prefix()), "TILEGATE_CACHE": str(tmp / "cache")}
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return (
        proc.returncode,
        read_junit(junit) if junit.is_file() else [],
        proc.stdout[-4000:] + proc.stderr[-2000:],
    )


def test_plain_pytest_gates_the_packages_kernel(kernel_repo, tmp_path):
    python, repo = kernel_repo
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import json, tilegate.foreign, example_kernel; print(json.dumps("
            "[tilegate.foreign.__file__, example_kernel.__file__]))",
        ],
        cwd=tmp_path,
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert all(Path(f).is_relative_to(python.parent.parent) for f in json.loads(where.stdout)), (
        where.stdout + where.stderr
    )
    code, outcomes, log = _pytest(python, repo, tmp_path)
    assert code == 0, log
    passed = {o.test.rsplit("::", 1)[-1] for o in outcomes if o.kind == PASSED}
    for test in (
        "test_foreign_provenance[example-scores]",
        "test_foreign_compile[example-scores-d128-bf16-m64n64]",
        "test_foreign_isa[example-scores-d128-bf16-m64n64]",
        "test_foreign_capabilities[example-scores-dtype-bfloat16]",
    ):
        assert test in passed, f"{test} did not pass:\n{log}"
    skips = [o.reason for o in outcomes if o.kind == SKIPPED]
    assert any("example-scores: its capabilities leave out dtype 'float16'" in r for r in skips), (
        skips
    )
    record = run_folder(repo / "artifacts") / "isa" / "example-scores-d128-bf16-m64n64.json"
    assert record.is_file(), "records go to the repo's artifacts/ (its latest run)"


def test_the_same_run_fails_a_config_over_the_lds_budget(kernel_repo, tmp_path):
    python, repo = kernel_repo
    code, outcomes, log = _pytest(
        python,
        repo,
        tmp_path,
        "--tilegate-kernels=example_kernel.adapter:OVER_BUDGET",
        "-m",
        "compile",
    )
    failed = {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == FAILED}
    assert code == 1, log
    assert list(failed) == ["test_foreign_compile[example-scores-too-big-d128-bf16-m256n256]"], log
    assert "lowered 131072 B of LDS > 65536 per workgroup" in next(iter(failed.values()))


def test_an_edit_in_the_repository_is_built_without_a_reinstall(kernel_repo, tmp_path):
    # Symptom: an edit in the kernel's repository that raised its LDS stayed green with the old
    # figure until the package was reinstalled: the key hashed the installed copy, pytest imported
    # the repository's. Fix: the key hashes the module's file as the test process imports it.
    python, installed = kernel_repo
    repo = tmp_path / "repo"
    shutil.copytree(installed, repo, ignore=shutil.ignore_patterns("artifacts"))
    selected = ("-m", "compile", "-k", "compile")
    code, outcomes, log = _pytest(python, repo, tmp_path, *selected)
    assert code == 0, log
    kernels = repo / "example_kernel" / "kernels.py"
    line = '    m, n = T.dynamic("m"), T.dynamic("n")\n'
    # a key block four times as tall: LDS 32768 -> 81920 B, the adapter's estimate stays 32768
    kernels.write_text(kernels.read_text().replace(line, "    block_n = 4 * block_n\n" + line))
    code, outcomes, log = _pytest(python, repo, tmp_path, *selected)
    failed = {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == FAILED}
    assert code == 1, log
    reason = failed.get("test_foreign_compile[example-scores-d128-bf16-m64n64]", "")
    assert "lowered 81920 B of LDS > 65536 per workgroup" in reason, log
