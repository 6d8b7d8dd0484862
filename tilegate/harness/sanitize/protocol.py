"""What the sanitizer driver and its child say to each other: the child's command, one progress line
per launch (the log then names the launch a report follows), and the line that ends a run."""

from __future__ import annotations

import sys

CHILD = "tilegate.harness.sanitize.child"
MARK = "tilegate-sanitize: "
DONE = MARK + "done"


def child_command(*args: str) -> list[str]:
    return [sys.executable, "-m", CHILD, *args]


def progress_line(what: str) -> str:
    return MARK + what


def finished(text: str) -> bool:
    return DONE in text.splitlines()
