"""What the counters driver and its child say to each other: the child's command, the kernels the
profiler selects, one line per profiled launch (in launch order), and the line that ends a run."""

from __future__ import annotations

import sys

CHILD = "tilegate.harness.counters.child"
# the profiler's kernel-name regex
PROFILED = "flash_fwd_kernel|paged_extend_kernel|paged_decode_split_kernel"
LAUNCH_MARK = "tilegate-counters: launch "
DONE = "tilegate-counters: done"


def child_command(family: str) -> list[str]:
    return [sys.executable, "-m", CHILD, family]


def launch_line(kernel: str, config: str) -> str:
    return f"{LAUNCH_MARK}{kernel} {config}"


def launch_names(stdout: str) -> list[tuple[str, str]]:
    """(kernel, config) of each profiled launch the child announced, in order."""
    return [
        (words[0], words[1])
        for line in stdout.splitlines()
        if line.startswith(LAUNCH_MARK)
        for words in [line.removeprefix(LAUNCH_MARK).split()]
    ]


def finished(stdout: str) -> bool:
    return DONE in stdout.splitlines()
