"""The package's layers import one way, and the runtime imports nothing of the gate.

Layers, lowest first; each may import only the ones its row names (and itself):
  kernels       tilegate.kernels (kernels/)                    -
  runtime       tilegate, tilegate.platform, tilegate.runtime  kernels
  serving       tilegate.serving                               kernels, runtime
  base          tilegate.gate.paths                            -
  references    tilegate.references (references/)             -
  library       tilegate.* not in another layer (gate, gfx942, artifacts)
                                                               base, kernels, references, runtime
  fixtures      tilegate.fixtures (fixtures/)                  base, kernels, references, runtime,
                                                               library
  harness       tilegate.harness.* modules (shared by tiers)   every layer above
  harness.TIER  tilegate.harness.TIER (perf, counters, ...)    every layer above: no other tier
  families      tilegate.families (kernels, families, adapters) every layer above but the tiers, and
  harness.sanitize
  testing       tilegate.testing (the pytest plugin)           every layer
The first three are the runtime distribution (RUNTIME_LAYERS; suite/library/test_packaging.py
checks that its wheel holds exactly them). Imports inside functions count too, and no modules
import each other in a cycle, whatever their layers. Test modules share helpers through
suite/suite_helpers.py only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tilegate.gate.paths import REPO_ROOT

FOLDERS = {
    "kernels": "tilegate.kernels",
    "references": "tilegate.references",
    "fixtures": "tilegate.fixtures",
}
# what an SGLang deployment installs: nothing in these imports a layer outside them
RUNTIME_LAYERS = ("kernels", "runtime", "serving")
RUNTIME_MODULES = ("tilegate", "tilegate.platform", "tilegate.runtime")
ALLOWED = {
    "kernels": set(),
    "runtime": {"kernels"},
    "serving": {"kernels", "runtime"},
    "base": set(),
    "references": set(),
    "library": {"base", "kernels", "references", "runtime"},
    "fixtures": {"base", "kernels", "references", "runtime", "library"},
    "harness": {"base", "kernels", "references", "runtime", "library", "serving", "fixtures"},
}
# tilegate/harness/<tier>/: a driver, a child, their protocol
TIERS = ("perf", "counters", "sanitize", "sglang")
for _tier in TIERS:
    ALLOWED[f"harness.{_tier}"] = ALLOWED["harness"] | {"harness"}
# its sanitizer tier runs the sanitize driver
ALLOWED["families"] = ALLOWED["harness"] | {"harness", "harness.sanitize"}
ALLOWED["testing"] = set(ALLOWED) | {f"harness.{t}" for t in TIERS}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "tilegate.gate.paths":
        return "base"
    if module in RUNTIME_MODULES:
        return "runtime"
    if len(parts) > 3 and parts[1] == "harness":
        return f"harness.{parts[2]}"
    if len(parts) > 1 and parts[1] in (
        "kernels",
        "references",
        "fixtures",
        "serving",
        "harness",
        "families",
        "testing",
    ):
        return parts[1]
    return "library"


def gate_modules() -> dict[str, Path]:
    """Every module of the package, by its import name (the linked folders read once, at their
    source)."""
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
    assert {
        "tilegate.kernels.flash_fwd",
        "tilegate.serving.sglang_backend",
        "tilegate.harness.sglang.child",
        "tilegate.references.attention",
        "tilegate.fixtures.shapes",
        "tilegate.gate.builder",
        "tilegate.testing.pytest_plugin",
    } <= set(modules)
    assert {layer_of(m) for m in modules} == set(ALLOWED), (
        "a layer with no module, or a module in no layer"
    )


def test_every_tier_package_is_a_layer():
    found = {
        p.name
        for p in (REPO_ROOT / "tilegate" / "harness").iterdir()
        if (p / "__init__.py").exists()
    }
    assert found == set(TIERS), (
        "a tier package of tilegate/harness/ without its layer row (or the reverse)"
    )


def bad_imports(module: str, path: Path) -> list[str]:
    """The imports of ``module`` (its source at ``path``) that its layer may not make."""
    mine = layer_of(module)
    return sorted(
        f"{name} ({layer_of(name)})"
        for name in tilegate_imports(path)
        if layer_of(name) != mine and layer_of(name) not in ALLOWED[mine]
    )


@pytest.mark.parametrize("module", sorted(gate_modules()))
def test_imports_follow_the_layers(module):
    mine = layer_of(module)
    bad = bad_imports(module, gate_modules()[module])
    assert not bad, (
        f"{module} ({mine}) may import only {sorted(ALLOWED[mine]) or 'its own layer'}, not: {bad}"
    )


def test_a_runtime_module_that_grows_an_import_of_gate_code_is_refused(tmp_path):
    """The attack: a production launcher that reaches for the gate's planted defects (or its
    references, or the pytest plugin), even inside a function, would ship the gate to every
    deployment."""
    planted = tmp_path / "paged.py"
    planted.write_text(
        "def extend(defect):\n"
        "    from tilegate.gate.planted import knobs_for\n"
        "    import tilegate.references.attention\n"
        "    from tilegate.testing import skips\n"
    )
    assert bad_imports("tilegate.serving.paged", planted) == [
        "tilegate.gate.planted (library)",
        "tilegate.references.attention (references)",
        "tilegate.testing (testing)",
    ]
    assert all(not (ALLOWED[r] - set(RUNTIME_LAYERS)) for r in RUNTIME_LAYERS)


def test_no_test_module_imports_another():
    offenders = {}
    for path in sorted((REPO_ROOT / "suite").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        hits = sorted(n for n in names if n.split(".")[-1].startswith(("test_", "conftest")))
        if hits:
            offenders[path.name] = hits
    assert not offenders, f"shared helpers belong in suite/suite_helpers.py: {offenders}"


def import_graph() -> dict[str, set[str]]:
    """module -> the gate's modules it imports (``from a.b import c`` is a.b.c when c is a
    module)."""
    modules = gate_modules()
    graph = {}
    for module, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                edges |= {
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                }
        graph[module] = {e for e in edges if e in modules and e != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(members) > 1:
                        found.append(sorted(members))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == [], (
        "modules that import each other, directly or through others"
    )


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_test_lives_in_the_library():
    """Tests live in suite/ and, for the tiers the plugin runs in a kernel repository, in the pytest
    layer (tilegate.testing.kernel_tiers); a ``test_`` function anywhere else in the package would
    be a test module inside the library."""
    found = [
        f"{module}.{node.name}"
        for module, path in gate_modules().items()
        if layer_of(module) != "testing"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    ]
    assert found == []
