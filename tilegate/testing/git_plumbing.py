"""git as the runner-boundary tests drive it (suite/library/test_runner_boundary.py,
test_runner_logs.py): a fixed author, and no system or global config of this machine's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, stdin: str | bytes | None = None) -> str:
    """git's stdout, stripped; a failing command raises."""
    out = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        check=True,
        env={**os.environ, **ENV},
    )
    return out.stdout.decode().strip()
