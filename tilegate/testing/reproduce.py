"""The test that is running, and the one command that runs it again alone: what a failure prints
so that a kernel engineer can reproduce it at a desk."""

from __future__ import annotations

import os
import shlex


def current_test_id() -> str:
    """The running test's node id ("" outside a test): pytest sets PYTEST_CURRENT_TEST to
    ``<node id> (<phase>)`` for each phase it runs."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def command(test_id: str) -> str:
    """One line, from the checkout's root, that runs ``test_id`` and nothing else."""
    return f"python3 -m pytest -p no:cacheprovider {shlex.quote(test_id)}"
