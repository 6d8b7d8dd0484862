"""The package's layers import one way, and the package installs as a normal (non-editable) one.

Layers, lowest first; each may import only the ones its row names (and itself):
  base        tilegate.paths                                   -
  kernels     tilegate.kernels (kernels/)                      -
  references  tilegate.references (references/)               -
  library     tilegate.* not in another layer                  base, kernels, references
  serving     tilegate.serving                                 base, kernels, references, library
  fixtures    tilegate.fixtures (fixtures/)                    base, kernels, references
  harness     tilegate.harness                                 every layer above
Imports inside functions count too. Test modules share helpers through suite/suite_helpers.py only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.paths import REPO_ROOT

FOLDERS = {"kernels": "tilegate.kernels", "references": "tilegate.references", "fixtures": "tilegate.fixtures"}
ALLOWED = {
    "base": set(),
    "kernels": set(),
    "references": set(),
    "library": {"base", "kernels", "references"},
    "serving": {"base", "kernels", "references", "library"},
    "fixtures": {"base", "kernels", "references"},
    "harness": {"base", "kernels", "references", "library", "serving", "fixtures"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "tilegate.paths":
        return "base"
    if len(parts) > 1 and parts[1] in ("kernels", "references", "fixtures", "serving", "harness"):
        return parts[1]
    return "library"


def gate_modules() -> dict[str, Path]:
    """Every module of the package, by its import name (the linked folders read once, at their source)."""
    found = {}
    for path in sorted((REPO_ROOT / "tilegate").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT / "tilegate")
        if rel.parts[0] in FOLDERS:
            continue  # a link to a top-level folder, read below
        found[".".join(("tilegate", *rel.with_suffix("").parts)).removesuffix(".__init__")] = path
    for folder, package in FOLDERS.items():
        for path in sorted((REPO_ROOT / folder).glob("*.py")):
            found[f"{package}.{path.stem}"] = path
    return found


def tilegate_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n == "tilegate" or n.startswith("tilegate.")}


def test_every_module_is_placed_in_a_layer():
    modules = gate_modules()
    assert {"tilegate.kernels.flash_fwd", "tilegate.serving.sglang_backend", "tilegate.harness.sglang_child",
            "tilegate.references.attention", "tilegate.fixtures.shapes", "tilegate.builder"} <= set(modules)


@pytest.mark.parametrize("module", sorted(gate_modules()))
def test_imports_follow_the_layers(module):
    mine = layer_of(module)
    bad = sorted(f"{name} ({layer_of(name)})" for name in tilegate_imports(gate_modules()[module])
                 if layer_of(name) != mine and layer_of(name) not in ALLOWED[mine])
    assert not bad, f"{module} ({mine}) may import only {sorted(ALLOWED[mine]) or 'its own layer'}, not: {bad}"


def test_no_test_module_imports_another():
    offenders = {}
    for path in sorted((REPO_ROOT / "suite").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        hits = sorted(n for n in names if n.split(".")[-1].startswith(("test_", "conftest")))
        if hits:
            offenders[path.name] = hits
    assert not offenders, f"shared helpers belong in suite/suite_helpers.py: {offenders}"


@pytest.mark.slow
def test_a_plain_install_serves_the_plugin(tmp_path):
    """``pip install .`` (not editable): the mapped subpackages and SGLang's entry point load from
    the installed copy, with this checkout nowhere on the path."""
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(REPO_ROOT)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    probe = ("import tilegate.kernels.problem as k, tilegate.serving.sglang_plugin as s, importlib.util as u\n"
             "from importlib.metadata import entry_points\n"
             "assert all(u.find_spec(m) for m in ('tilegate.kernels.flash_fwd', 'tilegate.references.paged',\n"
             "                                     'tilegate.fixtures.shapes', 'tilegate.harness.sglang_child'))\n"
             "eps = [e for e in entry_points(group='sglang.srt.plugins') if e.name == 'tilelang']\n"
             "assert eps and all(e.load() is s.register for e in eps), eps\n"
             "print(k.__file__); print(s.__file__)")
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target)})
    assert run.returncode == 0, run.stderr[-3000:]
    for where in run.stdout.split():
        assert Path(where).is_relative_to(target), where  # the installed copy, not the checkout
