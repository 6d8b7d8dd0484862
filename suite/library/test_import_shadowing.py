"""The checkout's folders never shadow PyPI packages that SGLang imports."""

import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.gate.paths import REPO_ROOT

TOP_LEVEL_FOLDERS = ("kernels", "references", "fixtures", "suite")


@pytest.mark.parametrize("folder", TOP_LEVEL_FOLDERS)
def test_top_level_folder_is_not_a_regular_package(folder):
    # Symptom: `import kernels` inside SGLang resolved to this repo's kernels/.
    # Fix: no __init__.py at the top level; the folders are reached as tilegate.<folder>.
    assert (REPO_ROOT / folder).is_dir()
    assert not (REPO_ROOT / folder / "__init__.py").exists()


def _import_from_checkout(code: str) -> str:
    # The checkout first on sys.path, as `python -m pytest` from the repo root puts it.
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_hugging_face_kernels_is_not_shadowed():
    # Symptom: tox -e cpu failed here because its venv (.tox/cpu/...) lives inside the checkout.
    # Fix: ask only whether `import kernels` reaches this repository's kernels/ folder.
    where = _import_from_checkout(
        "import kernels; from kernels import get_kernel; print(kernels.__file__)"
    )
    assert where != "None", "`import kernels` found a namespace package, not Hugging Face's kernels"
    assert not Path(where).resolve().is_relative_to(REPO_ROOT / "kernels"), where


def test_gate_modules_import_under_the_tilegate_namespace():
    where = _import_from_checkout("import tilegate.kernels.flash_fwd as f; print(f.__file__)")
    assert Path(where).resolve() == REPO_ROOT / "kernels" / "flash_fwd.py"


@pytest.mark.parametrize("name", ["tilegate.tilegate", "tilegate.suite", "tilegate.conftest"])
def test_only_the_three_card_folders_are_mapped_into_the_package(name):
    # Symptom: tilegate/__init__.py once appended the whole checkout to its __path__.
    # Fix: links (checkout) and package-dir (installs) map kernels/, references/, fixtures/ only.
    found = _import_from_checkout(
        f"import importlib.util as u; print(u.find_spec({name!r}) is not None)"
    )
    assert found == "False", f"{name} resolves: the checkout is mounted into the package again"
