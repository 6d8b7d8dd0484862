#!/usr/bin/env python3
"""Write the tables the docs generate: the README's tier table (tilegate/testing/tiers.py),
docs/results.md's latency proxies (the committed golden snapshots) and docs/layout.md's modules.
Each sits between a pair of ``<!-- NAME:begin -->`` / ``<!-- NAME:end -->`` lines. With --check,
change nothing and exit 1 if a table differs from what would be written.

    python3 scripts/doc_tables.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tilegate.artifacts.layout_table import layout_table  # noqa: E402
from tilegate.gfx942.latency_table import latency_table  # noqa: E402
from tilegate.testing.tiers import readme_table  # noqa: E402

TABLES = {  # name -> (file, generated lines)
    "tiers": ("README.md", readme_table),
    "latency-0.1.15": ("docs/results.md", lambda: latency_table("0.1.15")),
    "layout": ("docs/layout.md", layout_table),
}


def replaced(text: str, name: str, lines: list[str]) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"expected one {begin} and one {end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return head + begin + "\n" + "\n".join(lines) + "\n" + end + tail


def stale() -> list[str]:
    """The files whose generated tables differ from what would be written now."""
    out = []
    for name, (file, generate) in TABLES.items():
        text = (ROOT / file).read_text()
        if replaced(text, name, generate()) != text:
            out.append(f"{file} ({name})")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true")
    check = parser.parse_args().check
    if check:
        found = stale()
        for what in found:
            print(f"stale table: {what}; run python3 scripts/doc_tables.py", file=sys.stderr)
        return 1 if found else 0
    for name, (file, generate) in TABLES.items():
        path = ROOT / file
        path.write_text(replaced(path.read_text(), name, generate()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
