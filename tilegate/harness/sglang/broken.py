"""Engines that must refuse their model: ``python -m tilegate.harness.sglang.broken SPEC_NAME``.

Started by the SGLang child (tilegate.harness.sglang.child) for its spec's "broken" models, each in
a process of its own: SGLang's engine answers a scheduler that died at start-up by killing its own
process tree (SIGQUIT, then SIGKILL), so the child reads each one's exit code and log instead. The
child starts them first and collects them after its good engines: their start-ups overlap the rest.

Each is detached from the child (a subshell left to run when its shell exits), so it is no
descendant of the child's: ``Engine.shutdown`` kills every descendant of its process
(``kill_process_tree(os.getpid(), include_parent=False)``, sglang/srt/entrypoints/engine.py), and a
good engine shutting down while a broken one still started killed it (under load on 2 cores: exit
-9, no refusal in its log). It stays in the child's process group, which the driver ends on a stop;
the child itself ends any start it no longer waits for (``stop``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STARTED = "TILEGATE: engine started"  # printed only if the engine came up: it must not
REASON = "UnsupportedByTileLangBackend:"  # the lines that say why it refused


def start_broken(spec_name: str) -> int:
    """In the grandchild: start an engine with the production "tilelang" backend on the model the
    fixture names (tilegate.fixtures.tiny_llama.<spec_name>), which it must refuse."""
    from tilegate.fixtures import tiny_llama
    from tilegate.harness.sglang.serve import CPU_ENGINE_DEFAULTS, engine

    # context 1024: the broken variants keep the random model's 2048 positions
    kw: dict = CPU_ENGINE_DEFAULTS | {"context_length": 1024}
    eng = engine(
        str(tiny_llama.ensure_tiny_llama(getattr(tiny_llama, spec_name))), "tilelang", **kw
    )
    print(STARTED, flush=True)
    eng.shutdown()
    return 0


@dataclass(frozen=True)
class Started:
    log_path: Path
    exit_path: Path  # the exit code, written when the engine start ends
    pid_path: Path  # the engine's pid: stop() ends a start the child no longer waits for
    t0: float  # time.time() at the start: the log's last write tells when the process ended


def start(label: str, spec_name: str, workdir: Path) -> Started:
    """Launch one broken model's engine start in the background, detached (the module says why);
    its output in broken-LABEL.log, its pid in broken-LABEL.pid, its exit code in
    broken-LABEL.exit."""
    log_path, exit_path, pid_path = (
        workdir / f"broken-{label}.{ext}" for ext in ("log", "exit", "pid")
    )
    exit_path.unlink(missing_ok=True)
    subprocess.run(
        [
            "sh",
            "-c",
            '("$0" -m tilegate.harness.sglang.broken "$1" & echo $! > "$4"; wait $!; echo $? > '
            '"$3")'
            ' > "$2" 2>&1 &',
            sys.executable,
            spec_name,
            str(log_path),
            str(exit_path),
            str(pid_path),
        ],
        check=True,
    )
    return Started(log_path, exit_path, pid_path, time.time())


def stop(started: Started, grace: float = 10.0) -> None:
    """End an engine start still running (the child failed or gave up on it): SIGQUIT, which
    SGLang's engine answers by killing its own process tree; SIGKILL if it still runs after
    ``grace`` seconds (a start that had not yet taken SIGQUIT back from its shell, see __main__)."""
    if started.exit_path.exists() or not started.pid_path.exists():
        return
    try:
        pid = int(started.pid_path.read_text())
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            time.sleep(0.05)
            os.kill(pid, 0)  # ProcessLookupError once its shell has reaped it
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, ValueError):
        pass


def collect(started: Started, timeout: float = 600) -> dict:
    """What the engine start said: its exit code, whether it came up, the refusal lines, its log."""
    while not (started.exit_path.exists() and started.exit_path.read_text().strip()):
        if time.time() - started.t0 > timeout:
            stop(started)
            raise TimeoutError(
                f"a broken engine's start still running after {timeout:.0f} s (log "
                f"{started.log_path})"
            )
        time.sleep(0.2)
    code = int(started.exit_path.read_text())
    returncode = 128 - code if code > 128 else code  # sh writes 128 + N for signal N; Popen says -N
    text = started.log_path.read_text()
    reasons = [line.strip() for line in text.splitlines() if REASON in line]
    return {
        "returncode": returncode,
        "started": STARTED in text,
        "reasons": reasons,
        "log": str(started.log_path),
        "wall_s": started.log_path.stat().st_mtime - started.t0,
    }


if __name__ == "__main__":
    # start() runs this as an asynchronous list of a non-interactive sh, which POSIX starts with
    # SIGINT and SIGQUIT ignored; stop() ends a start with SIGQUIT, so take its default back
    # before the slow imports (SGLang's engine installs its own handler later).
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    sys.exit(start_broken(sys.argv[1]))
