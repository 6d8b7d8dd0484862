"""Running a workload under NVIDIA's compute-sanitizer and reading its verdict.

Each tool prints a summary line at exit: ``ERROR SUMMARY: N errors`` (memcheck, initcheck,
synccheck) or ``RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)``. A run whose
summary is missing (the child crashed, or the tool did not attach) is an error, not a pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tilegate.harness.sanitize import protocol

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# memcheck flags an access only outside every live allocation, and the driver places allocations
# side by side: a read past the end of K landed in V, and memcheck saw nothing (H200). A pad after
# each allocation (compute-sanitizer --padding) puts such a read in no allocation; 1 MiB is more
# than any tail the kernels can overrun (one key block of the sanitizer's shapes is <= 64 KiB).
MEMCHECK_PADDING_BYTES = 1 << 20
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACES = re.compile(
    r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)"
)


class SanitizerRunError(RuntimeError):
    """The sanitized process gave no verdict (it crashed, timed out, or the tool failed)."""


@dataclass(frozen=True)
class SanitizerResult:
    tool: str
    errors: int  # racecheck: hazards reported as errors (warnings are counted apart)
    warnings: int
    completed: bool  # the workload ran to its end (a planted fault may stop it early)
    returncode: int
    log: Path
    wall_s: float

    def excerpt(self, lines: int = 40) -> str:
        """The first reports, for a failure message."""
        text = self.log.read_text(errors="replace").splitlines()
        found = [ln for ln in text if ln.startswith("==")]  # compute-sanitizer and ASan prefixes
        return "\n".join(found[:lines])


def find_compute_sanitizer() -> str | None:
    for candidate in (
        shutil.which("compute-sanitizer"),
        os.environ.get("CUDA_HOME", "") + "/bin/compute-sanitizer",
        "/usr/local/cuda/bin/compute-sanitizer",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def parse_summary(tool: str, text: str) -> tuple[int, int] | None:
    """(errors, warnings) from a sanitizer log, or None when it has no summary line."""
    if tool == "racecheck":
        m = _RACES.search(text)
        return (int(m.group(2)), int(m.group(3))) if m else None
    m = _ERRORS.search(text)
    return (int(m.group(1)), 0) if m else None


def run_sanitized(
    tool: str,
    child_args: list[str],
    log: Path,
    timeout_s: float = 900,
    child: list[str] | None = None,
) -> SanitizerResult:
    """``python -m tilegate.harness.sanitize.child child_args`` (or the command ``child``, which
    ends by
    printing protocol.DONE) under ``tool``; its output goes to ``log``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r}: known {TOOLS}")
    sanitizer = find_compute_sanitizer()
    if sanitizer is None:
        raise SanitizerRunError(
            "compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
        )
    cmd = [
        sanitizer,
        "--tool",
        tool,
        "--print-limit",
        "200",
        "--target-processes",
        "application-only",
    ]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]  # hazards and the analysis summary both
    if tool == "memcheck":
        cmd += ["--padding", str(MEMCHECK_PADDING_BYTES)]
    cmd += child or protocol.child_command(*child_args)
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONUNBUFFERED": "1"}
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        try:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise SanitizerRunError(
                f"{tool} run did not finish in {timeout_s:.0f} s: {log}"
            ) from exc
    text = log.read_text(errors="replace")
    summary = parse_summary(tool, text)
    if summary is None:
        tail = "\n".join(text.splitlines()[-30:])
        raise SanitizerRunError(
            f"{tool} gave no verdict (exit {proc.returncode}); log {log}:\n{tail}"
        )
    completed = protocol.finished(text)
    return SanitizerResult(
        tool, *summary, completed, proc.returncode, log, time.monotonic() - start
    )


def run_asan(child_args: list[str], log: Path, timeout_s: float = 900) -> SanitizerResult:
    """ROCm's counterpart: the workload built with device AddressSanitizer (gfx942:xnack+), run with
    HSA_XNACK=1. Each ``ERROR: AddressSanitizer`` report counts as one error."""
    cmd = protocol.child_command(*child_args, "--asan")
    env = {**os.environ, "HSA_XNACK": "1", "PYTHONUNBUFFERED": "1"}
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
    text = log.read_text(errors="replace")
    return SanitizerResult(
        "asan",
        text.count("ERROR: AddressSanitizer"),
        0,
        protocol.finished(text),
        proc.returncode,
        log,
        time.monotonic() - start,
    )
