"""The options that take a path work as the README writes them, with folders that exist."""

import subprocess
import sys

from tilegate.paths import REPO_ROOT

PATH_OPTIONS = ("--artifacts", "--tilegate-cache", "--llama3-path")


def test_documented_path_form_works_with_existing_folders(tmp_path):
    # Symptom: `pytest -m e2e --artifacts /existing/dir` took the folder for pytest's root,
    # never loaded conftest.py and stopped with "unrecognized arguments". Fix: `--option=DIR`.
    folders = {option: tmp_path / option.strip("-") for option in PATH_OPTIONS}
    for folder in folders.values():
        folder.mkdir()
    # -n 0, not -p no:xdist: xdist registers the xdist_group marker that --strict-markers asks for
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q",
                           "--co", "-m", "e2e", *(f"{option}={folder}" for option, folder in folders.items())],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "suite/test_e2e_hf.py::" in proc.stdout  # the gate's own tests, collected from its root
