#!/usr/bin/env python3
"""Write docs/isa.md's gfx942 decode table (tilegate/gate/decode_choice.py): builds the split
kernel for each decode config and candidate (fp16, d64 and d128; a warm cache takes seconds, a
cold one about a minute a build) and reads their figures. With --check, change nothing and exit 1
if the table differs. TileLang's lowering depends on the hash seed: this runs at the gate's (0).

    PYTHONPATH=. python3 scripts/decode_choice.py [--check] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts.doc_tables import replaced  # noqa: E402
from tilegate.testing.pytest_plugin import LOWERING_HASH_SEED  # noqa: E402


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != LOWERING_HASH_SEED:
        env = {**os.environ, "PYTHONHASHSEED": LOWERING_HASH_SEED}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument(
        "--cache", default=os.environ.get("TILEGATE_CACHE", str(ROOT / ".cache" / "tilegate"))
    )
    args = parser.parse_args()
    import tilelang

    from tilegate.gate import decode_choice as dc
    from tilegate.gate.builder import KernelBuilder
    from tilegate.gfx942.toolchain import find_toolchain

    found = (tilelang.__version__, find_toolchain().kind)
    if found != (dc.TILELANG, dc.TOOLCHAIN):
        print(f"the docs' figures are TileLang {dc.TILELANG} with {dc.TOOLCHAIN}, not {found}")
        return 2
    lines = dc.table(dc.all_figures(KernelBuilder(Path(args.cache))))
    text = dc.DOC.read_text()
    new = replaced(text, dc.BLOCK, lines)
    if args.check:
        if new != text:
            print(f"stale table: {dc.DOC} ({dc.BLOCK})", file=sys.stderr)
            return 1
        return 0
    dc.DOC.write_text(new)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
