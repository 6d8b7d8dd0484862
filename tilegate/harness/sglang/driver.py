"""Driving SGLang's real engine from the gate's pytest process (the driver side).

SGLang 0.5.23 lives in its own venv on CPU machines (``.venv-sglang``,
scripts/install-sglang-cpu.sh: it pins torch 2.14.1, the gate runs 2.13); on the MI300X runner it is
the gate's own python. Either way one child process (tilegate.harness.sglang.child) tokenizes the
prompts once, runs the FP32 transformers reference on those ids, serves the model with each backend
asked for and writes JSON; the file names are tilegate.harness.sglang.protocol's.

Bytecode: on a CPU machine the child, and every SGLang process it starts, imports SGLang, torch and
transformers afresh (SGLang spawns its scheduler and detokenizer: 8-9 CPU seconds of imports each,
per engine). .venv-sglang is installed with --no-compile, on the understanding that Python writes
the bytecode at first import; where the environment says PYTHONDONTWRITEBYTECODE, it never does, and
every import compiles SGLang's 4,700 modules again (~4.5 CPU s per process). So a CPU child writes
and reads its bytecode under the venv (``pycache_dir``), outside every source tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tilegate.harness.sglang import protocol as proto


def pycache_dir(python: Path) -> Path:
    """Where a CPU child's bytecode goes: beside the venv's bin/, removed with the venv."""
    return Path(python).parent.parent / "pycache"


def bytecode_env(env: dict, python: Path) -> dict:
    """``env`` with Python's bytecode cache on, kept in ``pycache_dir(python)``."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"} | {
        "PYTHONPYCACHEPREFIX": str(pycache_dir(python))
    }


class EngineRun:
    """One run of the child, shared through files in ``workdir`` by every xdist worker: whoever
    comes first (``start``, under a file lock) launches it in the background, so that its minutes
    of engine start-ups overlap the rest of the suite; ``result`` waits for it. The child runs
    under ``sh`` so that its exit code lands in a file any worker can read. A failed run raises,
    with the log's tail, in every test that asks: never a skip. ``python`` and ``cpu``: the CPU
    venv by default; the MI300X tests pass the gate's own python and cpu=False. ``observed``: the
    engines serve ``tilelang`` through the harness plugin's observed backend (the default, whose
    records the tests judge), or, False, through the production plugin alone (the serving
    benchmark: what users run, with nothing recorded).

    As a context manager: started on entry, its process group ended on exit if still running."""

    def __init__(
        self,
        workdir: Path,
        spec: dict,
        *,
        python: Path | None = None,
        cpu: bool = True,
        observed: bool = True,
    ):
        self.workdir, self.spec, self.observed = Path(workdir), spec, observed
        self.python, self.cpu = Path(python or proto.venv_python()), cpu
        self.out, self.exit_file = self.workdir / proto.RESULT, self.workdir / proto.EXIT_CODE
        self.log, self.started = self.workdir / proto.LOG, self.workdir / proto.STARTED

    def __enter__(self) -> EngineRun:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_if_running()

    def start(self) -> None:
        from filelock import FileLock

        self.workdir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.workdir / proto.START_LOCK)):
            if self.started.exists():
                return
            markers = self.workdir / proto.MARKERS
            markers.mkdir(exist_ok=True)
            spec_path = self.workdir / proto.SPEC
            spec_path.write_text(json.dumps(self.spec, indent=2))
            env = proto.child_env(markers, cpu=self.cpu, observed=self.observed)
            with open(self.log, "w") as log:
                proc = subprocess.Popen(
                    [
                        "sh",
                        "-c",
                        '"$0" -m tilegate.harness.sglang.child "$1" "$2"; echo $? > "$3"',
                        str(self.python),
                        str(spec_path),
                        str(self.out),
                        str(self.exit_file),
                    ],
                    cwd=self.workdir,
                    env=bytecode_env(env, self.python) if self.cpu else env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.started.write_text(json.dumps({"time": time.time(), "pgid": proc.pid}))

    def result(self, timeout: float = 900) -> dict:
        self.start()
        t0 = json.loads(self.started.read_text())["time"]
        while not self.exit_file.exists():
            if time.time() - t0 > timeout:
                raise TimeoutError(
                    f"SGLang runner still running after {timeout:.0f} s (log {self.log})"
                )
            time.sleep(0.5)
        code = self.exit_file.read_text().strip()
        if code != "0" or not self.out.exists():
            raise RuntimeError(
                f"SGLang runner exited {code} (log {self.log}):\n{self.log.read_text()[-6000:]}"
            )
        result = json.loads(self.out.read_text())
        result["driver"] = {
            "pid": os.getpid(),
            "wall_s": self.out.stat().st_mtime - t0,
            "log": str(self.log),
        }
        return result

    def stop_if_running(self) -> None:
        """End the run's process group if it is still going (a pytest run that ended early)."""
        if self.started.exists() and not self.exit_file.exists():
            try:
                os.killpg(json.loads(self.started.read_text())["pgid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


class EngineRuns:
    """A pytest run's CPU children by name (tilegate.testing.pytest_fixtures: the name is the
    fixture that reads it), started and stopped together. ``start`` takes the names the selected
    tests read."""

    def __init__(self, runs: dict[str, EngineRun]):
        self.runs = runs

    def start(self, names=None) -> None:
        for name in self.runs if names is None else names:
            self.runs[name].start()

    def result(self, name: str, timeout: float = 900) -> dict:
        return self.runs[name].result(timeout)

    def stop_if_running(self) -> None:
        for run in self.runs.values():
            run.stop_if_running()
