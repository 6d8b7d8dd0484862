"""Time the full CPU run (the README's ``python3 -m pytest -n 2``) N times over the warm caches.

    python3 scripts/time_cpu_run.py [--runs N] [--keep-logs DIR] [-- PYTEST ARGS]   (default: 3
    runs; -n 2)

Prints one line per run (wall seconds, CPU seconds of the run's whole process tree, the verdict's
outcome counts from its JUnit XML, the load average before it) and then min/median/max of each.
The CPU figure is sampled: every 0.25 s the script reads /proc for every process descended from
the pytest it started (xdist workers, the SGLang children and the engines they spawn, compilers),
or in a process group one of them leads (a detached engine start), each one's user+system time as
last seen; a process that lives less than a sample is missed, so it is a slight undercount. On a
machine others use, the wall times move with their load and the CPU seconds much less: quote
both, with the load average. Each run writes its artifacts to a temporary folder (never
artifacts/); the compile and model caches are the checkout's (.cache/), as a warm run finds them.
Linux only."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tilegate.artifacts.records import read_junit

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.25


def _stat(pid: int) -> tuple[int, int, float, str] | None:
    """(parent pid, process group, user+system seconds, start time in ticks) of a live process,
    from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3
    return int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / TICK, fields[19]


def run_once(cmd: list[str], env: dict) -> tuple[float, float, str, int]:
    """Run ``cmd``; returns wall seconds, sampled CPU seconds of its process tree, its output,
    exit code."""
    with tempfile.TemporaryFile(mode="w+") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        tree = {proc.pid}
        cpu: dict[tuple[int, str], float] = {}
        while proc.poll() is None:
            stats = {
                pid: s
                for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                if (s := _stat(pid))
            }
            grew = True
            # the tree: a process whose parent is in it, or whose process group a member leads (a
            # detached start, orphaned before a sample saw its parent: the SGLang child's refused
            # engines); kept once seen
            while grew:
                new = {pid for pid, s in stats.items() if s[0] in tree or s[1] in tree} - tree
                tree |= new
                grew = bool(new)
            for pid in tree & stats.keys():
                _, _, seconds, start = stats[pid]
                cpu[(pid, start)] = seconds
            time.sleep(SAMPLE_S)
        wall = time.monotonic() - t0
        out.seek(0)
        return wall, sum(cpu.values()), out.read(), proc.returncode


def counts(junit: Path) -> str:
    """The run's outcomes by kind, from its JUnit XML (tilegate.artifacts.records), as "536
    passed, 798 skipped"."""
    if not junit.exists():
        return "no JUnit XML"
    kinds = Counter(o.kind for o in read_junit(junit))
    return ", ".join(f"{n} {kind.lower()}" for kind, n in sorted(kinds.items()))


def spread(values: list[float]) -> str:
    return f"min {min(values):.1f}  median {statistics.median(values):.1f}  max {max(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep-logs", type=Path, help="write each run's output to DIR/run-N.log")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: -n 2)")
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "pytest", *(args.pytest_args or ["-n", "2"])]
    print(f"{os.cpu_count()} CPUs; {' '.join(cmd[1:])}", flush=True)
    walls, cpus, failed = [], [], False
    for i in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="tilegate-time-") as artifacts:
            env = os.environ | {"TILEGATE_ARTIFACTS": artifacts}
            load = os.getloadavg()[0]
            junit = Path(artifacts) / "timing.xml"
            wall, cpu, output, code = run_once([*cmd, f"--junitxml={junit}"], env)
            outcome = counts(junit)
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            (args.keep_logs / f"run-{i}.log").write_text(output)
        failed |= code != 0
        walls.append(wall)
        cpus.append(cpu)
        print(
            f"run {i}: {wall:6.1f} s wall, {cpu:6.1f} CPU s, load {load:.2f} before; exit {code}: "
            f"{outcome}",
            flush=True,
        )
    print(f"wall s: {spread(walls)}")
    print(f"CPU s:  {spread(cpus)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
