"""docs/layout.md's module table, from the tree: every package folder of the gate and every module
in it, with the first sentence of the module's docstring (scripts/doc_tables.py writes it; a module
added, moved or removed makes suite/library/test_readme_rules.py fail until it is rewritten)."""

from __future__ import annotations

import ast
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT

# kernels/, references/ and fixtures/ are linked into tilegate/ (tilegate/__init__.py says why):
# listed at their source, and not again through the links
LINKED = ("kernels", "references", "fixtures")
FOLDERS = (*LINKED, "tilegate")


def first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def module_rows() -> list[tuple[str, str]]:
    rows = []
    for folder in FOLDERS:
        root = REPO_ROOT / folder
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(REPO_ROOT)
            if folder == "tilegate" and rel.parts[1] in LINKED:
                continue  # the links
            if "__pycache__" in rel.parts:
                continue
            text = first_sentence(path)
            if text or path.name != "__init__.py":  # an empty package marker says nothing
                rows.append((str(rel), text))
    return rows


def layout_table() -> list[str]:
    rows = [f"| `{module}` | {text.replace('|', '/')} |" for module, text in module_rows()]
    return ["| module | what it is (its docstring's first sentence) |", "| --- | --- |", *rows]
