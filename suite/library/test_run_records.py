"""Where a run's records go (tilegate/testing/run_records.py): collecting touches nothing, each run
has its own folder and its JUnit XML, ``latest`` names the newest, a nested run never moves it, and
a reader follows no ``latest`` that points out of the runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

from isolated_pytest import PYTEST_WITHOUT_INI, environment_of_a_first_run

from tilegate.artifacts.records import LATEST, RUNS, latest_run, run_folder
from tilegate.gate.paths import REPO_ROOT
from tilegate.testing.run_records import PARENT_ENV

TESTS = """
import json, os, subprocess, sys

def test_writes_a_record(artifacts_dir):
    (artifacts_dir / "mine.txt").write_text(str(os.getpid()))

def test_also_writes(artifacts_dir):
    (artifacts_dir / "also.txt").write_text("ok")
"""


def project(tmp_path: Path) -> Path:
    """A kernel repository in miniature: two tests that write records, and no conftest."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_records.py").write_text(TESTS)
    return root


def gate_pytest(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = environment_of_a_first_run()
    command = [
        *PYTEST_WITHOUT_INI,
        "-p",
        "tilegate.testing.pytest_plugin",
        "--rootdir",
        str(root),
        *args,
        "tests",
    ]
    proc = subprocess.run(
        command, cwd=root, env=base | (env or {}), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_collecting_touches_no_records(tmp_path):
    root = project(tmp_path)
    gate_pytest(root, "--collect-only")
    assert not (root / "artifacts").exists()
    explicit = tmp_path / "explicit"
    (explicit / "isa").mkdir(parents=True)
    (explicit / "isa" / "earlier.log").write_text("from an earlier run")
    gate_pytest(root, "--collect-only", f"--artifacts={explicit}")
    assert sorted(p.name for p in explicit.rglob("*")) == ["earlier.log", "isa"]


def test_each_run_has_its_folder_its_junit_and_latest_names_the_newest(tmp_path):
    root = project(tmp_path)
    gate_pytest(root, "-n", "2")  # the workers write where the controller decided
    first = latest_run(root / "artifacts")
    gate_pytest(root, "-p", "no:xdist")
    second = latest_run(root / "artifacts")
    assert first and second and first != second
    assert sorted(p.name for p in (root / "artifacts" / RUNS).iterdir()) == sorted(
        [first.name, second.name]
    )
    for run in (first, second):
        assert (run / "mine.txt").is_file() and (run / "also.txt").is_file()
        junit = (run / "junit" / "pytest.xml").read_text()
        assert 'tests="2"' in junit and "test_writes_a_record" in junit
    assert os.readlink(root / "artifacts" / LATEST) == f"{RUNS}/{second.name}"


def test_keep_artifacts_adds_to_the_latest_run(tmp_path):
    root = project(tmp_path)
    gate_pytest(root, "-p", "no:xdist", "-k", "writes_a_record")
    gate_pytest(root, "-p", "no:xdist", "--keep-artifacts", "-k", "also_writes")
    runs = list((root / "artifacts" / RUNS).iterdir())
    assert len(runs) == 1 and {p.name for p in runs[0].iterdir()} >= {"mine.txt", "also.txt"}


def test_an_explicit_folder_is_cleared_by_a_new_run_and_kept_by_a_later_command(tmp_path):
    root, explicit = project(tmp_path), tmp_path / "explicit"
    (explicit / "isa").mkdir(parents=True)
    earlier = explicit / "isa" / "earlier.log"
    earlier.write_text("from an earlier run")
    gate_pytest(root, "-p", "no:xdist", "--keep-artifacts", f"--artifacts={explicit}")
    assert earlier.exists() and (explicit / "mine.txt").exists()
    gate_pytest(root, "-p", "no:xdist", f"--artifacts={explicit}")
    assert not earlier.exists() and (explicit / "junit" / "pytest.xml").exists()
    assert not (root / "artifacts").exists()


def test_a_nested_run_writes_under_its_parent_and_never_moves_latest(tmp_path):
    root = project(tmp_path)
    gate_pytest(root, "-p", "no:xdist")
    mine = latest_run(root / "artifacts")
    parent = tmp_path / "parent-run"
    parent.mkdir()
    # a nested run inherits TILEGATE_ARTIFACTS from a tox env: it must not take (and clear) that
    # folder
    gate_pytest(root, "-p", "no:xdist", env={PARENT_ENV: str(parent)})
    assert latest_run(root / "artifacts") == mine
    nested = list((parent / "nested" / RUNS).iterdir())
    assert len(nested) == 1 and (nested[0] / "mine.txt").exists()
    assert not (parent / "nested" / LATEST).exists()


def test_the_gate_run_hands_its_children_its_folder_not_its_variable(tmp_path):
    root = project(tmp_path)
    (root / "tests" / "test_records.py").write_text(
        "import json, os\n"
        "def test_env(artifacts_dir):\n"
        "    print(json.dumps([os.environ.get('TILEGATE_ARTIFACTS'), "
        f"os.environ.get('{PARENT_ENV}'), "
        "str(artifacts_dir)]))\n"
    )
    explicit = tmp_path / "explicit"
    proc = gate_pytest(root, "-p", "no:xdist", "-s", env={"TILEGATE_ARTIFACTS": str(explicit)})
    inherited, parent, artifacts = json.loads(
        next(ln for ln in proc.stdout.splitlines() if ln.startswith("["))
    )
    assert inherited is None and parent == artifacts == str(explicit)


def test_a_latest_link_out_of_the_runs_is_not_followed(tmp_path):
    root = tmp_path / "artifacts"
    (root / RUNS / "20260101T000000-1").mkdir(parents=True)
    for target in (
        "/etc",
        "../../etc",
        f"{RUNS}/../../etc",
        f"{RUNS}/20260101T000000-1/../..",
        "runs/x",
    ):
        link = root / LATEST
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        assert latest_run(root) is None and run_folder(root) == root, target
    (root / LATEST).unlink()
    (root / LATEST).symlink_to(f"{RUNS}/20260101T000000-1")
    assert run_folder(root) == root / RUNS / "20260101T000000-1"


def test_the_step_summary_reads_the_latest_run(tmp_path):
    root = project(tmp_path)
    gate_pytest(root, "-p", "no:xdist")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "step_summary.py"),
            str(root / "artifacts"),
            "--title",
            "t",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 passed" in proc.stdout, proc.stdout
