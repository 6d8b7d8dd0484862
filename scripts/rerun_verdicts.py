#!/usr/bin/env python3
"""Run one pytest selection N times and count verdict changes: a gate whose verdicts flake is
not a gate.

    python3 scripts/rerun_verdicts.py N [pytest args...]
    e.g. python3 scripts/rerun_verdicts.py 20 -n 2              (the CPU tier, warm cache)
         python3 scripts/rerun_verdicts.py 5 -p xdist -n auto --dist loadgroup -m numerics   (GPU)

Each run writes a JUnit XML; a test's verdict is passed, failed, error or skipped. The script
prints each run's counts and time, then every test whose verdict differed between runs, and exits
1 if any did (or if a run collected a different set of tests). Stdlib only.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def verdicts(junit: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
    return out


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    runs, args = int(argv[0]), argv[1:]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            junit = Path(tmp) / f"run-{i}.xml"
            start = time.monotonic()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    f"--junitxml={junit}",
                    *args,
                ],
                capture_output=True,
                text=True,
            )
            took = time.monotonic() - start
            if not junit.exists():
                print(
                    f"run {i + 1}: no JUnit report (exit "
                    f"{proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
                )
                return 1
            results.append(verdicts(junit))
            counts = Counter(results[-1].values())
            print(
                f"run {i + 1}/{runs}: exit {proc.returncode}, {dict(sorted(counts.items()))} in "
                f"{took:.0f} s",
                flush=True,
            )
    names = set().union(*results)
    changed = {
        n: [r.get(n, "absent") for r in results]
        for n in sorted(names)
        if len({r.get(n, "absent") for r in results}) > 1
    }
    print(f"{len(names)} tests x {runs} runs: {len(changed)} verdict changes")
    for name, seen in changed.items():
        print(f"  {name}: {' '.join(seen)}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
