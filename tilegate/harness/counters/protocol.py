"""What the counters driver and its child say to each other: the child's command, the kernels the
profiler selects, one line per profiled launch (in launch order), and the line that ends a run."""

from __future__ import annotations

import sys

CHILD = "tilegate.harness.counters.child"
# Each profiled kernel's device symbol: TileLang 0.1.15 names it after the prim_func with
# "_kernel" appended, extern "C" (no mangling), for gfx942 and sm90 alike
# (tilegate.gate.lowering.lower's symbol for each kernel). The profilers print it as is.
SYMBOLS = {
    "flash_fwd": "flash_fwd_kernel_kernel",
    "paged_extend": "paged_extend_kernel_kernel",
    "paged_decode_split": "paged_decode_split_kernel_kernel",
}
# The profiler's kernel-name regex (searched, not matched whole): looser than SYMBOLS on purpose,
# so a renamed kernel is still profiled and then refused by name, rather than missing silently.
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
