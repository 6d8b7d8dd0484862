"""A per-test deadline that works while the test's thread is stuck inside the GPU driver.

A hung kernel leaves the main thread blocked in a device synchronisation, where no Python signal
handler runs. A timer thread does: past the deadline it names the test and the last kernel the
process launched, dumps every thread's stack, and ends the process. Under xdist the controller
reports "worker crashed while running <test>" as that test's failure, starts a fresh worker and
the run goes on; ending the process is also what frees the GPU from the runaway kernel.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sys
import threading
from pathlib import Path

EXIT_CODE = 3
_MAX_FD = 65536


class Deadline:
    """``report_dir``: where the report also goes, one file per test. pytest captures the test's
    stderr into a buffer that dies with the process, so the run's summary reads these files."""

    def __init__(self, seconds: float, test: str, last_kernel, report_dir: Path | None = None):
        self.seconds, self.test, self.last_kernel, self.report_dir = (
            seconds,
            test,
            last_kernel,
            report_dir,
        )
        self._timer = threading.Timer(seconds, self._expired)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def _expired(self) -> None:
        line = (
            f"tilegate watchdog: {self.test} still running after {self.seconds:.0f} s "
            f"(last kernel launched: {self.last_kernel() or 'none'}); ending this process\n"
        )
        if self.report_dir is not None:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            with open(report_path(self.report_dir, self.test), "w") as f:
                f.write(line)
                faulthandler.dump_traceback(f, all_threads=True)
        sys.stderr.write("\n" + line)
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        sys.stderr.flush()
        # Close every descriptor but stdin/stdout/stderr first, lowest first: the xdist channel
        # (opened at start-up) before the GPU driver's. If the driver then holds this exit while
        # it stops the runaway kernel, the controller has already seen the worker go and goes on.
        os.closerange(3, _MAX_FD)
        os._exit(EXIT_CODE)


def dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr: how a stuck run (or the gate's
    own
    test of a nested run that outlived its limit) shows where each process is, without ending it."""
    faulthandler.register(
        signal.SIGUSR1, file=sys.__stderr__ or sys.stderr, all_threads=True, chain=False
    )


def report_path(report_dir: Path, test: str) -> Path:
    return report_dir / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test)}.txt"


def reports(report_dir: Path) -> list[str]:
    """The first line of each watchdog report in ``report_dir``, with the file that has the
    stacks."""
    return [
        f"{f.read_text().splitlines()[0]} (stacks: {f})" for f in sorted(report_dir.glob("*.txt"))
    ]
