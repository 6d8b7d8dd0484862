"""A kernel repository that is not the gate, gated by plain ``pytest``: suite/external_kernel is
a package of its own (pyproject, one TileLang kernel, its adapter, a ``tilegate.kernels`` entry
point). In a fresh venv it is installed next to a plain, non-editable install of the gate (the
runtime and tilegate-testing); run in a copy of its folder, ``pytest`` collects no test of its
own, and the plugin adds the kernel tiers: provenance, capabilities, gfx942 compile and
ISA pass; and a second adapter with a config over the LDS budget makes the same run fail, naming
the budget."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kernel_package import install_in_fresh_venv, outside_env, plain_pytest

from tilegate.artifacts.records import FAILED, PASSED, SKIPPED, run_folder
from tilegate.gate.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "suite" / "external_kernel"

pytestmark = [
    pytest.mark.nested,  # fresh venvs and wheel builds: minutes of CPU
    # one worker: the module's venv is built once (and each pip build of the gate's source tree
    # holds kernel_package.gate_build_lock: two at once empty each other's build/lib)
    pytest.mark.xdist_group("external-kernel-package"),
]


@pytest.fixture(scope="module")
def kernel_repo(tmp_path_factory) -> tuple[Path, Path]:
    """(python of a fresh venv with the gate and the package installed, a copy of its folder)."""
    return install_in_fresh_venv(PACKAGE, tmp_path_factory.mktemp("kernel-repo"))


def test_plain_pytest_gates_the_packages_kernel(kernel_repo, tmp_path):
    python, repo = kernel_repo
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import json, tilegate.families, example_kernel; print(json.dumps("
            "[tilegate.families.__file__, example_kernel.__file__]))",
        ],
        cwd=tmp_path,
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert all(Path(f).is_relative_to(python.parent.parent) for f in json.loads(where.stdout)), (
        where.stdout + where.stderr
    )
    code, outcomes, log = plain_pytest(python, repo, tmp_path)
    assert code == 0, log
    passed = {o.test.rsplit("::", 1)[-1] for o in outcomes if o.kind == PASSED}
    for test in (
        "test_kernel_provenance[example-scores]",
        "test_kernel_compile[example-scores-d128-bf16-m64n64]",
        "test_kernel_isa[example-scores-d128-bf16-m64n64]",
        "test_kernel_capabilities[example-scores-dtype-bfloat16]",
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
    code, outcomes, log = plain_pytest(
        python,
        repo,
        tmp_path,
        "--tilegate-kernels=example_kernel.adapter:OVER_BUDGET",
        "-m",
        "compile",
    )
    failed = {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == FAILED}
    assert code == 1, log
    assert list(failed) == ["test_kernel_compile[example-scores-too-big-d128-bf16-m256n256]"], log
    assert "lowered 131072 B of LDS > 65536 per workgroup" in next(iter(failed.values()))


def test_an_edit_in_the_repository_is_built_without_a_reinstall(kernel_repo, tmp_path):
    # Symptom: an edit in the kernel's repository that raised its LDS stayed green with the old
    # figure until the package was reinstalled: the key hashed the installed copy, pytest imported
    # the repository's. Fix: the key hashes the module's file as the test process imports it.
    python, installed = kernel_repo
    repo = tmp_path / "repo"
    shutil.copytree(installed, repo, ignore=shutil.ignore_patterns("artifacts"))
    selected = ("-m", "compile", "-k", "compile")
    code, outcomes, log = plain_pytest(python, repo, tmp_path, *selected)
    assert code == 0, log
    kernels = repo / "example_kernel" / "kernels.py"
    line = '    m, n = T.dynamic("m"), T.dynamic("n")\n'
    # a key block four times as tall: LDS 32768 -> 81920 B, the adapter's estimate stays 32768
    kernels.write_text(kernels.read_text().replace(line, "    block_n = 4 * block_n\n" + line))
    code, outcomes, log = plain_pytest(python, repo, tmp_path, *selected)
    failed = {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == FAILED}
    assert code == 1, log
    reason = failed.get("test_kernel_compile[example-scores-d128-bf16-m64n64]", "")
    assert "lowered 81920 B of LDS > 65536 per workgroup" in reason, log
