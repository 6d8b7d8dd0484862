"""SGLang engines started side by side on the CPU never share a rendezvous port: each leases its
``nccl_port`` (tilegate/harness/sglang/ports.py).

Each engine runs in a process of its own in .venv-sglang, through tilegate.harness.sglang.serve's
``engine`` as the SGLang child's are, on the random tiny Llama-3 with torch_native, restricted to
the same 2-port range (``TILEGATE_ENGINE_PORTS``). SGLang's own pick there (bind, close, bind
again later: ``get_free_port_below_ephemeral``) gives two engines the same port whenever one port
of two is bound: the test binds one and starts two engines.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tilegate.harness.sglang import protocol
from tilegate.harness.sglang.driver import bytecode_env
from tilegate.harness.sglang.ports import PORTS_ENV, PortRange, bindable

# nested: two engine starts of ~30-60 CPU s each, so in -m nested (.ci/run) with the other runs in
# .venv-sglang rather than in the README's test command
pytestmark = [pytest.mark.sglang, pytest.mark.nested]

# Serves one greedy request, prints the port and tokens, then holds the engine (and its port) until
# stdin closes.
SERVE_AND_HOLD = """
import json, sys
from transformers import AutoConfig
from tilegate.fixtures import tiny_llama
from tilegate.harness.sglang.serve import CPU_ENGINE_DEFAULTS, Request, engine, generate

model = str(tiny_llama.ensure_tiny_llama(tiny_llama.TINY_LLAMA))
# context 1024: the random model has 2048 positions, CPU_ENGINE_DEFAULTS ask for 4096
eng = engine(model, "torch_native", **(CPU_ENGINE_DEFAULTS | {"context_length": 1024}))
try:
    vocab = AutoConfig.from_pretrained(model).vocab_size
    out = generate(eng, [Request([1, 5, 9, 13, 17], 4)], 2, vocab)
    print(json.dumps({"port": eng.server_args.nccl_port, "tokens": out[0]["tokens"]}), flush=True)
    sys.stdin.read()
finally:
    eng.shutdown()
"""
START_S = 600  # two engine starts sharing 2 cores, with a slow neighbour


def free_pair() -> PortRange:
    for _ in range(200):
        low = random.randrange(22000, 29998)
        if bindable(low) and bindable(low + 1):
            return PortRange(low, low + 1)
    raise AssertionError("no 2 consecutive free ports in 22000-29999")


@dataclass
class EngineChild:
    proc: subprocess.Popen
    out: Path
    err: Path

    def served(self) -> dict | None:
        line = self.out.read_text().partition("\n")[0] if self.out.exists() else ""
        return json.loads(line) if line else None

    def log(self) -> str:
        return self.err.read_text() if self.err.exists() else ""


def start_child(name: str, ports: PortRange, workdir: Path) -> EngineChild:
    python = protocol.venv_python()
    markers = workdir / f"markers-{name}"  # the instrumented plugin writes there
    markers.mkdir()
    env = protocol.child_env(markers) | {PORTS_ENV: str(ports)}
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            [str(python), "-c", SERVE_AND_HOLD],
            cwd=workdir,
            env=bytecode_env(env, python),
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its engine's processes end with it (killpg below)
        )
    return EngineChild(proc, out, err)


def wait_until(what: str, done, children: list[EngineChild], timeout: float = START_S) -> None:
    """Poll ``done()``; fail early, with its log, on a child that exited."""
    deadline = time.monotonic() + timeout
    while not done():
        for child in children:
            if child.proc.poll() is not None:
                raise AssertionError(
                    f"an engine child exited {child.proc.returncode} before {what}:\n"
                    f"{child.log()[-6000:]}"
                )
        assert time.monotonic() < deadline, f"still not {what} after {timeout:.0f} s"
        time.sleep(0.05)


def finish(children: list[EngineChild]) -> None:
    """Let each child shut its engine down and exit; end any still running after that."""
    for child in children:
        try:
            if child.proc.stdin:
                child.proc.stdin.close()
            child.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if child.proc.poll() is None:
                os.killpg(child.proc.pid, signal.SIGKILL)
                child.proc.wait()


def listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("0.0.0.0", port))
    sock.listen()
    return sock


def test_two_engines_started_together_on_one_free_port_take_turns(tmp_path):
    ports = free_pair()
    bound = listening(ports.low)  # of the two, only ports.high is free
    children: list[EngineChild] = []
    try:
        children = [start_child(name, ports, tmp_path) for name in ("first", "second")]
        # one leases ports.high and starts; the other finds no free port and waits for one
        waiting = f"no free engine rendezvous port in {ports}"

        def someone_waits() -> bool:
            return any(waiting in c.log() for c in children)

        wait_until("a child waiting for a port", someone_waits, children)
        bound.close()  # the waiting one leases ports.low now, while the other engine starts
        wait_until("both engines serving", lambda: all(c.served() for c in children), children)
        served = [c.served() for c in children]
        waited = [waiting in c.log() for c in children]
    finally:
        bound.close()
        finish(children)
    assert all(c.proc.returncode == 0 for c in children), [c.log()[-3000:] for c in children]
    assert waited.count(True) == 1, waited
    by_port = {s["port"]: w for s, w in zip(served, waited)}
    assert by_port == {ports.high: False, ports.low: True}, (served, waited)
    assert len(served[0]["tokens"]) == 4 and served[0]["tokens"] == served[1]["tokens"], served
