"""What the perf driver and its child say to each other: the child's command and its one record
line."""

from __future__ import annotations

import json
import sys

CHILD = "tilegate.harness.perf.child"
RECORD_MARK = "tilegate-perf: "  # the child's last line: the run's document, as JSON


def child_command(*args: str) -> list[str]:
    return [sys.executable, "-m", CHILD, *args]


def record_line(doc: dict) -> str:
    return RECORD_MARK + json.dumps(doc)


def read_record(stdout: str) -> dict | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RECORD_MARK)]
    return json.loads(lines[-1][len(RECORD_MARK) :]) if lines else None
