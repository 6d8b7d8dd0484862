"""The options that take a path work as the README writes them, with folders that exist (where a
run's records go: suite/library/test_run_records.py)."""

import subprocess
import sys

from isolated_pytest import PYTEST_WITHOUT_INI, environment_of_a_first_run

from tilegate.gate.paths import REPO_ROOT
from tilegate.testing import skips

PATH_OPTIONS = ("--artifacts", "--tilegate-cache", "--llama3-path")


# A light module to collect (it imports no torch or TileLang), named from the repository's root: its
# tests are listed under that node id only where pytest took the checkout for its rootdir (a folder
# argument taken for a test path would have moved the rootdir, or failed the run).
LIGHT_MODULE = "suite/library/test_import_layers.py"


def _collect_only(*args: str) -> subprocess.CompletedProcess:
    # -n 0, not -p no:xdist: xdist registers the xdist_group marker that --strict-markers asks for
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-q",
            "--co",
            *args,
            LIGHT_MODULE,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_documented_path_form_works_with_existing_folders(tmp_path):
    # Symptom: `pytest -m e2e --artifacts /existing/dir` took the folder for pytest's root,
    # never loaded conftest.py and stopped with "unrecognized arguments". Fix: `--option=DIR`.
    folders = {option: tmp_path / option.strip("-") for option in PATH_OPTIONS}
    for folder in folders.values():
        folder.mkdir()
    proc = _collect_only(*(f"{option}={folder}" for option, folder in folders.items()))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{LIGHT_MODULE}::" in proc.stdout  # the gate's own tests, collected from its root


def test_path_options_also_take_a_space_where_the_plugin_is_installed(tmp_path):
    # Installed, the plugin loads through its pytest11 entry point: its options are known before
    # pytest picks the rootdir, so `--artifacts DIR` is an option and its value, not a test path.
    from importlib.metadata import entry_points

    if not [
        e for e in entry_points(group="pytest11") if e.value == "tilegate.testing.pytest_plugin"
    ]:
        skips.missing(
            "tilegate-testing is not installed here (checkout on PYTHONPATH): its pytest11 entry "
            "point is missing"
        )
    folders = {option: tmp_path / option.strip("-") for option in PATH_OPTIONS}
    for folder in folders.values():
        folder.mkdir()
    proc = _collect_only(
        *(arg for option, folder in folders.items() for arg in (option, str(folder)))
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{LIGHT_MODULE}::" in proc.stdout


def test_another_project_s_run_keeps_its_artifacts_under_its_own_root(tmp_path):
    # A kernel repository running the gate's plugin: its records (and the folder the plugin clears
    # at the start of a run) are its own artifacts/, never the gate checkout's.
    project = tmp_path / "kernel-repo"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_records.py").write_text(
        "def test_records_go_here(artifacts_dir):\n"
        "    (artifacts_dir / 'mine.txt').write_text('ok')\n"
    )
    proc = subprocess.run(
        [
            *PYTEST_WITHOUT_INI,
            "-p",
            "no:xdist",
            "-p",
            "tilegate.testing.pytest_plugin",
            "--rootdir",
            str(project),
            "tests",
        ],
        cwd=project,
        env=environment_of_a_first_run(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (project / "artifacts" / "latest" / "mine.txt").read_text() == "ok"
    assert not (REPO_ROOT / "artifacts" / "mine.txt").exists()
