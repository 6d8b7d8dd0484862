"""``--require-gpu`` (tilegate/testing/pytest_plugin.py): a GPU runner's run in which no GPU test
passed fails, and a collection (CI collects the MI300X envs' commands, scripts/check-rocm-envs.sh)
fails when its selection holds no GPU test. This machine has no GPU, so the GPU test skips."""

import subprocess
from pathlib import Path

from isolated_pytest import PYTEST_WITHOUT_INI, environment_of_a_first_run

TESTS = """
import pytest

def test_on_the_cpu():
    pass

@pytest.mark.gpu
def test_on_the_gpu():
    pass
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_tiers.py").write_text(TESTS)
    command = [
        *PYTEST_WITHOUT_INI,
        "-p",
        "tilegate.testing.pytest_plugin",
        "--rootdir",
        str(root),
        f"--artifacts={tmp_path / 'artifacts'}",
        *args,
        "tests",
    ]
    return subprocess.run(
        command,
        cwd=root,
        env=environment_of_a_first_run(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_where_no_gpu_test_passed_fails(tmp_path):
    proc = _run(tmp_path, "--require-gpu")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 passed, 1 skipped" in proc.stdout
    assert "FAILED: --require-gpu set, but no GPU test passed on" in proc.stdout


def test_the_same_run_without_the_option_passes(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_a_collection_with_gpu_tests_passes(tmp_path):
    proc = _run(tmp_path, "--require-gpu", "--collect-only")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "2 tests collected" in proc.stdout


def test_a_collection_without_gpu_tests_fails(tmp_path):
    proc = _run(tmp_path, "--require-gpu", "--collect-only", "-k", "cpu")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "FAILED: --require-gpu set, but this selection holds no GPU test" in proc.stdout
