"""The options that take a path work as the README writes them, with folders that exist; a gate run
of several pytest commands keeps every command's artifacts."""

import subprocess
import sys

from tilegate.paths import REPO_ROOT
from tilegate.report import ISA_DIR, NUMERICS_DIR, PERF_DIR

PATH_OPTIONS = ("--artifacts", "--tilegate-cache", "--llama3-path")


def _collect_only(*args: str) -> subprocess.CompletedProcess:
    # -n 0, not -p no:xdist: xdist registers the xdist_group marker that --strict-markers asks for
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "--co", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_documented_path_form_works_with_existing_folders(tmp_path):
    # Symptom: `pytest -m e2e --artifacts /existing/dir` took the folder for pytest's root,
    # never loaded conftest.py and stopped with "unrecognized arguments". Fix: `--option=DIR`.
    folders = {option: tmp_path / option.strip("-") for option in PATH_OPTIONS}
    for folder in folders.values():
        folder.mkdir()
    proc = _collect_only("-m", "e2e", *(f"{option}={folder}" for option, folder in folders.items()))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "suite/test_e2e_hf.py::" in proc.stdout  # the gate's own tests, collected from its root


def test_later_commands_of_a_gate_run_keep_the_earlier_records(tmp_path):
    # tox -e rocm runs compile+ISA, then the GPU tiers, then perf: each used to clear the folder,
    # so the summary and the upload kept only the perf table.
    records = [tmp_path / folder / "earlier.log" for folder in (ISA_DIR, NUMERICS_DIR, PERF_DIR)]
    for record in records:
        record.parent.mkdir()
        record.write_text("from an earlier command")
    kept = _collect_only("-m", "compat", f"--artifacts={tmp_path}", "--keep-artifacts")
    assert kept.returncode == 0, kept.stdout[-2000:] + kept.stderr[-2000:]
    assert all(record.exists() for record in records)
    cleared = _collect_only("-m", "compat", f"--artifacts={tmp_path}")  # a new run starts clean
    assert cleared.returncode == 0, cleared.stdout[-2000:] + cleared.stderr[-2000:]
    assert not any(record.exists() for record in records)
