"""The SGLang child's launcher for engines that must refuse their model
(tilegate.harness.sglang.broken): detached starts whose exit code, log and pid come back through
files, and that the child can end."""

import signal
import subprocess
import sys
import threading
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


def _stopped(tmp_path, quit_ignored: bool) -> int:
    """The exit status of a start stop() ended: a sleeper whose SIGQUIT is default or ignored."""
    # set either way: a test run started in the background (nohup ... &) inherits it ignored
    disposition = signal.SIG_IGN if quit_ignored else signal.SIG_DFL
    sleeper = subprocess.Popen(
        ["sleep", "60"], preexec_fn=lambda: signal.signal(signal.SIGQUIT, disposition)
    )
    started = broken.Started(tmp_path / "log", tmp_path / "exit", tmp_path / "pid", time.time())
    started.pid_path.write_text(str(sleeper.pid))
    # the sleeper is this test's child: reaping it here lets stop() see it gone
    reaper = threading.Thread(target=sleeper.wait)
    reaper.start()
    broken.stop(started, grace=1.0)
    reaper.join(timeout=10)
    broken.stop(started)  # gone already: nothing to do, nothing raised
    return sleeper.returncode


def test_stop_ends_a_start_still_running(tmp_path):
    assert _stopped(tmp_path, quit_ignored=False) == -signal.SIGQUIT


def test_stop_ends_a_start_that_ignores_sigquit(tmp_path):
    # what start()'s shell hands its background job (POSIX: SIGQUIT ignored) before the engine takes
    # it back
    assert _stopped(tmp_path, quit_ignored=True) == -signal.SIGKILL


# The engine start's module run as start() runs it, with a stand-in model fixture that reports
# the SIGQUIT disposition where the real one would build the model.
REPORT_SIGQUIT = """
import runpy, signal, sys, types
fixture = types.ModuleType("tilegate.fixtures.tiny_llama")
fixture.SPEC = object()
def ensure_tiny_llama(spec):
    print(signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL)
    sys.exit(0)
fixture.ensure_tiny_llama = ensure_tiny_llama
sys.modules[fixture.__name__] = fixture
sys.argv = ["broken", "SPEC"]
runpy.run_module("tilegate.harness.sglang.broken", run_name="__main__")
"""


def test_the_engine_start_takes_sigquit_back_from_its_shell():
    # the same launch as start(): a background job of a non-interactive sh
    out = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" & wait $!', sys.executable, REPORT_SIGQUIT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "True", out
