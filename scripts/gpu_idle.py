#!/usr/bin/env python3
"""Fails unless no process holds the MI300X runner's GPUs: before the gate (a leftover process
from an earlier job would share the GPU and its memory, and its timing) and after it (the gate
left nothing running). Stdlib only.

    python3 scripts/gpu_idle.py [--when before|after] [--kfd-proc DIR]

The amdgpu kernel driver lists every process that has the GPU open (/dev/kfd) as a folder
/sys/class/kfd/kfd/proc/<pid> (what rocm-smi --showpids reads). A machine without that folder
has no ROCm driver loaded: that fails too.

Any process's command line is printed, into the job's log, where a line that starts with `::`
(after spaces) or holds `##[` is a workflow command: so each is printed escaped (printable()).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

KFD_PROC = Path("/sys/class/kfd/kfd/proc")


def printable(raw: bytes) -> str:
    r"""``raw`` as printable ASCII on one line: a backslash as ``\\``, every byte outside 0x20-0x7e
    as ``\xHH`` (a newline or a lone \r would start a line of the process's choosing, an escape
    byte drive the terminal), and the ``#`` of ``#[`` as ``\x23`` (the runner's older
    ``##[command]`` form is obeyed anywhere in a line)."""
    text = "".join(
        "\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}" for b in raw
    )
    return text.replace("#[", "\\x23[")


def holders(kfd_proc: Path) -> dict[int, str]:
    """pid -> command line of every other process holding the GPU, escaped (printable())."""
    out = {}
    for entry in kfd_proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (Path("/proc") / entry.name / "cmdline").read_bytes()
            cmd = printable(raw.replace(b"\0", b" ").strip())
        except OSError:
            cmd = "(not visible from here: another container or namespace)"
        out[int(entry.name)] = cmd or "(no command line)"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--when", choices=("before", "after"), default="before")
    parser.add_argument(
        "--kfd-proc",
        type=Path,
        default=KFD_PROC,
        help="the driver's process list (default: %(default)s)",
    )
    args = parser.parse_args()
    if not args.kfd_proc.is_dir():
        print(
            f"gpu_idle: {args.kfd_proc} does not exist: no ROCm (amdgpu/KFD) driver on this runner",
            file=sys.stderr,
        )
        return 1
    found = holders(args.kfd_proc)
    if found:
        what = (
            "an earlier job left them running"
            if args.when == "before"
            else "the gate left them running"
        )
        print(
            f"gpu_idle: the GPU is not idle {args.when} the gate ({what}); end them, or take the "
            "runner offline:",
            file=sys.stderr,
        )
        for pid, cmd in sorted(found.items()):
            print(f"  pid {pid}: {cmd}", file=sys.stderr)
        return 1
    print(f"gpu_idle: no process holds the GPU {args.when} the gate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
