"""The SGLang child's launcher for engines that must refuse their model
(tilegate.harness.sglang.broken): detached starts whose exit code, log and pid come back through
files, and that the child can end."""

import signal
import subprocess
import time

from tilegate.harness.sglang import broken


def test_a_start_that_fails_reports_its_exit_code_and_log(tmp_path):
    # no such model in tilegate.fixtures.tiny_llama: the start fails before any engine, on any
    # machine
    started = broken.start("missing", "NO_SUCH_TINY_LLAMA", tmp_path)
    result = broken.collect(started, timeout=120)
    assert result["returncode"] == 1 and not result["started"], result
    assert "NO_SUCH_TINY_LLAMA" in (tmp_path / "broken-missing.log").read_text()
    assert int(started.pid_path.read_text()) > 0


def test_stop_ends_a_start_still_running(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    started = broken.Started(tmp_path / "log", tmp_path / "exit", tmp_path / "pid", time.time())
    started.pid_path.write_text(str(sleeper.pid))
    broken.stop(started)
    assert sleeper.wait(timeout=10) == -signal.SIGQUIT
    broken.stop(started)  # gone already: nothing to do, nothing raised
