"""The GPU tiers' deadline (tilegate/testing/watchdog.py): a hung test fails in time, named with
its kernel."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from planted_hang_tests import HANG_DEADLINE_S
from planted_hang_tests import SHAPE as HANG_SHAPE

from tilegate.gate.builds import phase_builds
from tilegate.gate.paths import REPO_ROOT
from tilegate.gate.planted import PrefillDefect
from tilegate.testing.watchdog import EXIT_CODE


def test_deadline_ends_a_process_stuck_outside_python():
    # time.sleep blocks in C, as a device synchronisation does: only another thread can act
    code = (
        "import time; from tilegate.testing.watchdog import Deadline\n"
        "with Deadline(1, 'suite/x.py::test_stuck', lambda: 'flash_fwd causal-mha8-d64-fp16 "
        "m64n64w4'):\n"
        "    time.sleep(60)\n"
    )
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_CODE, proc.stderr
    assert time.monotonic() - start < 30
    assert (
        "tilegate watchdog: suite/x.py::test_stuck still running after 1 s "
        "(last kernel launched: flash_fwd causal-mha8-d64-fp16 m64n64w4)"
    ) in proc.stderr
    assert "time.sleep(60)" in proc.stderr or "<string>" in proc.stderr  # the stuck thread's stack


def test_sigusr1_prints_every_stack_and_the_process_goes_on():
    code = (
        "import sys, time; from tilegate.testing.watchdog import dump_stacks_on_sigusr1\n"
        "dump_stacks_on_sigusr1(); print('ready', flush=True); time.sleep(30)\n"
        "print('still alive', flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGUSR1)
    time.sleep(1)
    assert proc.poll() is None  # stacks printed, process not ended
    proc.kill()
    _, err = proc.communicate()
    assert "most recent call first" in err and 'File "<string>", line 2' in err, err


def _run_planted(tmp_path, tests: tuple[str, ...], limit_s: float) -> str:
    """suite/planted_hang_tests.py under xdist, as a fresh gate run of its own; its terminal output.
    A nested run that outlives ``limit_s`` fails this test with every process's stacks (SIGUSR1,
    tilegate/testing/watchdog.py) instead of holding the outer run."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_XDIST_", "TILEGATE_GPU_IDS"))
    }
    # the failing run keeps its run folder (tilegate/testing/pytest_plugin.py): here
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "xdist",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            f"--artifacts={tmp_path}",
            *(f"suite/planted_hang_tests.py::{t}" for t in tests),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # its own process group: the workers are ended with it
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGUSR1)
        time.sleep(5)
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(
            f"the nested run was still going after {limit_s:.0f} s; its output and "
            f"stacks:\n{out[-12000:]}"
        )
    assert proc.returncode != 0, out[-3000:]
    return out


def test_a_stuck_test_fails_in_time_and_the_run_goes_on(tmp_path):
    start = time.monotonic()
    out = _run_planted(tmp_path, ("test_stuck_in_c_code", "test_runs_beside_the_stuck_one"), 90)
    # the node id may carry xdist's group suffix (test_stuck_in_c_code@stuck)
    assert "tilegate watchdog: suite/planted_hang_tests.py::test_stuck_in_c_code" in out, out[
        -3000:
    ]
    assert "still running after 3 s (last kernel launched: none)" in out, out[-3000:]
    assert "crashed while running 'suite/planted_hang_tests.py::test_stuck_in_c_code" in out, out[
        -3000:
    ]
    # the crash fails it, and its retry (xdist re-sends a crashed worker's group) errors at setup
    assert "1 failed, 1 passed, 1 error" in out, out[-3000:]  # and the other test ran and passed
    assert "hung earlier in this run and was ended by the watchdog" in out, out[-3000:]
    assert time.monotonic() - start < 100


@pytest.mark.gpu
@pytest.mark.slow  # minutes: scheduled first (tilegate/testing/pytest_plugin.py)
@pytest.mark.deadline(300)
# compiled ahead into TileLang's disk cache, which the child run shares (the compile is not the
# hang)
@pytest.mark.builds(
    *phase_builds("prefill", HANG_SHAPE),
    *phase_builds("prefill", HANG_SHAPE, defect=PrefillDefect.HANG),
)
def test_planted_hang_fails_in_time_and_the_run_goes_on(tmp_path):
    # by node id: -k "planted_hang" would also match the module's name, and select every test in it
    out = _run_planted(
        tmp_path,
        (
            "test_compile_the_planted_hang",
            "test_planted_hang",
            "test_a_healthy_call_after_the_hang",
        ),
        240,
    )
    assert "tilegate watchdog: suite/planted_hang_tests.py::test_planted_hang" in out, out[-3000:]
    assert (
        f"still running after {HANG_DEADLINE_S} s (last kernel launched: flash_fwd "
        "causal-mha8-d64-fp16"
        in out
        and "knobs=PrefillKnobs(hang=True)" in out
    ), out[-3000:]
    assert "crashed while running 'suite/planted_hang_tests.py::test_planted_hang" in out, out[
        -3000:
    ]
    # the crash, its refused retry; the healthy tests pass (the compile step may be re-sent too)
    assert re.search(r"\b1 failed, [23] passed, 1 error\b", out), out[-3000:]
