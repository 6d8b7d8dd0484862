"""What the README says, checked against the code: one module skips, the tier table is the tiers',
the generated tables are fresh, and every path the README and docs name exists."""

import ast
import re
import subprocess
import sys

from tilegate.gate.paths import REPO_ROOT

SKIPS = REPO_ROOT / "tilegate" / "testing" / "skips.py"
SKIPPING = {("pytest", "skip"), ("pytest", "importorskip"), ("mark", "skip"), ("mark", "skipif")}


def skip_calls(source: str) -> list[int]:
    """Lines of ``source`` that skip: pytest.skip(...), pytest.importorskip(...),
    pytest.mark.skip(...) and skipif, as code (text inside a string is not code)."""
    found = set()
    for node in ast.walk(ast.parse(source)):  # a call's function is an attribute node too
        if isinstance(node, ast.Attribute):
            owner = node.value
            name = getattr(owner, "id", None) or getattr(owner, "attr", None)
            if (name, node.attr) in SKIPPING:
                found.add(node.lineno)
    return sorted(found)


def python_files():
    for folder in ("tilegate", "suite", "kernels", "references", "fixtures"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path.resolve() != SKIPS and "external_kernel" not in path.parts:
                yield path


def test_no_code_but_skips_py_skips():
    offenders = {
        str(p.relative_to(REPO_ROOT)): lines
        for p in python_files()
        if (lines := skip_calls(p.read_text()))
    }
    assert not offenders, (
        f"skips are decided in tilegate/testing/skips.py (skips.missing): {offenders}"
    )


def test_the_skip_finder_sees_each_form_and_no_string():
    source = (
        "import pytest\n"
        "pytest.skip('x')\n"
        "pytest.importorskip('tomllib')\n"
        "@pytest.mark.skip(reason='r')\n"
        "def test_a(): pass\n"
        "@pytest.mark.skipif(True, reason='r')\n"
        "def test_b(): pass\n"
        "TEXT = 'pytest.skip(\"in a string\")'\n"
    )
    assert skip_calls(source) == [2, 3, 4, 6]


def test_the_generated_tables_are_fresh():
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "doc_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def test_every_path_the_readme_and_docs_name_exists():
    named = re.compile(
        r"(?<![\w./-])((?:suite|tilegate|kernels|references|fixtures|scripts|docs)/"
        r"[\w./-]*\w)"
    )
    missing = {}
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for path in set(named.findall(doc.read_text())):
            if "<" in path or "*" in path or path.endswith(".") or (REPO_ROOT / path).exists():
                continue
            missing.setdefault(doc.name, []).append(path)
    assert not missing, f"paths named in the docs that are not in the tree: {missing}"
