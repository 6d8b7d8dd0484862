"""Machine-wide rendezvous-port leases for SGLang engines (tilegate/harness/sglang/ports.py):
engines started together get distinct ports, ports bound elsewhere are skipped, a full range says
so, and the lock folder in the shared /tmp cannot be turned against its user. Then the engine
start on a lease (tilegate/harness/sglang/engine_start.py) against stand-ins for
``sglang.Engine``: a start whose port another process took (.port_holders tells) runs again on a
new lease, at most twice more; every other failure is left as it was."""

import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tilegate.harness.sglang import engine_start, ports
from tilegate.harness.sglang.port_holders import foreign_listener, listening_sockets, process_tree
from tilegate.harness.sglang.ports import (
    PORTS_ENV,
    NoFreeEnginePort,
    PortRange,
    UnsafePortLockPath,
    lease_engine_port,
    parse_port_range,
    port_range,
)


def free_block(n: int) -> PortRange:
    """``n`` consecutive ports below the ephemeral range that nothing holds now."""
    for _ in range(200):
        low = random.randrange(22000, 29999 - n)
        if all(ports.bindable(p) for p in range(low, low + n)):
            return PortRange(low, low + n - 1)
    raise AssertionError(f"no {n} consecutive free ports in 22000-29999")


@pytest.fixture
def locks(tmp_path) -> Path:
    return tmp_path / "locks"


def listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("0.0.0.0", port))
    sock.listen()
    return sock


# Each process leases once "go" arrives on stdin (so that all of them race), prints its port and
# holds the lease until stdin closes.
LEASE_AND_HOLD = """
import sys
from pathlib import Path
from tilegate.harness.sglang.ports import PortRange, lease_engine_port
low, high, directory = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
sys.stdin.readline()
lease = lease_engine_port(PortRange(low, high), directory=directory)
print(lease.port, flush=True)
sys.stdin.read()
"""


def test_leases_taken_at_once_by_eight_processes_are_distinct(locks):
    span = free_block(12)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LEASE_AND_HOLD, str(span.low), str(span.high), str(locks)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    try:
        time.sleep(2)  # every interpreter up and waiting
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        got = [int(proc.stdout.readline()) for proc in procs if proc.stdout is not None]
        assert len(set(got)) == 8 and set(got) <= set(span.ports()), got
        for port in got:  # held while their processes run
            with pytest.raises(NoFreeEnginePort, match="1 leased by other engines"):
                lease_engine_port(PortRange(port, port), directory=locks)
    finally:
        for proc in procs:
            proc.communicate(timeout=30)  # closes stdin: each process ends, its lease with it
    assert all(proc.returncode == 0 for proc in procs)
    with lease_engine_port(PortRange(got[0], got[0]), directory=locks) as lease:
        assert lease.port == got[0]


def test_a_port_another_socket_listens_on_is_skipped(locks):
    span = free_block(2)
    with listening(span.low):
        picked = set()
        for _ in range(20):  # candidates are shuffled: each pass may try the bound port first
            with lease_engine_port(span, directory=locks) as lease:
                picked.add(lease.port)
    assert picked == {span.high}


def test_a_lease_is_held_until_released(locks):
    span = free_block(1)
    lease = lease_engine_port(span, directory=locks)
    with pytest.raises(NoFreeEnginePort):
        lease_engine_port(span, directory=locks)
    lease.release()
    lease.release()  # twice: nothing more
    lease_engine_port(span, directory=locks).release()


def test_a_range_with_every_port_taken_says_so(locks, capfd):
    span = free_block(3)
    with (
        listening(span.low),
        lease_engine_port(PortRange(span.low + 1, span.high), directory=locks),
    ):
        with lease_engine_port(PortRange(span.low + 1, span.high), directory=locks):
            t0 = time.monotonic()
            with pytest.raises(NoFreeEnginePort) as raised:
                lease_engine_port(span, directory=locks, wait_s=0.5)
    assert time.monotonic() - t0 >= 0.5
    message = str(raised.value)
    assert f"no free engine rendezvous port in {span.low}-{span.high}" in message
    assert "2 leased by other engines, 1 bound by other processes" in message
    assert PORTS_ENV in message
    assert f"no free engine rendezvous port in {span} " in capfd.readouterr().err  # it waited


def test_a_symlink_planted_at_the_lock_folder_is_refused(tmp_path):
    target = tmp_path / "attackers"
    target.mkdir(mode=0o700)
    planted = tmp_path / "locks"
    planted.symlink_to(target)
    with pytest.raises(UnsafePortLockPath, match="symlink"):
        lease_engine_port(free_block(1), directory=planted)
    assert list(target.iterdir()) == []


def test_a_symlink_planted_at_a_lock_file_is_not_followed(locks):
    span = free_block(1)
    locks.mkdir(mode=0o700)
    victim = locks.parent / "victim"
    victim.write_text("keep me")
    (locks / f"{span.low}.lock").symlink_to(victim)
    with pytest.raises(UnsafePortLockPath, match="symlink"):
        lease_engine_port(span, directory=locks)
    assert victim.read_text() == "keep me"


def test_a_lock_folder_others_may_write_is_refused(locks):
    locks.mkdir()
    locks.chmod(0o777)
    with pytest.raises(UnsafePortLockPath, match="no one else may write"):
        lease_engine_port(free_block(1), directory=locks)


def test_a_lock_folder_of_another_user_is_refused(tmp_path):
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
    else:
        theirs = Path("/")  # root's
    with pytest.raises(UnsafePortLockPath, match="belongs to uid"):
        lease_engine_port(free_block(1), directory=theirs)


def test_the_lock_folder_is_per_user_in_tmp():
    assert ports.lock_dir() == Path(f"/tmp/tilegate-engine-ports-{os.getuid()}")


@pytest.mark.parametrize(
    "text, expected",
    [("22000-22011", (22000, 22011)), (" 23000 - 23000 ", (23000, 23000)), ("1-65535", (1, 65535))],
)
def test_the_range_variable_reads_low_dash_high(text, expected):
    assert parse_port_range(text) == PortRange(*expected)
    assert port_range({PORTS_ENV: text}) == PortRange(*expected)


@pytest.mark.parametrize(
    "text", ["", "22000", "22000-", "a-b", "22011-22000", "0-10", "22000-65536", "-5-10", "1e3-2e3"]
)
def test_the_range_variable_refuses_anything_else(text):
    with pytest.raises(ValueError) as raised:
        port_range({PORTS_ENV: text})
    assert str(raised.value).startswith(f"{PORTS_ENV}={text!r}: expected LOW-HIGH")


def test_the_default_range_is_sglangs_below_the_ephemeral_ports():
    span = port_range({})
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert span.low == 22000 and span.high == min(29999, ephemeral_low - 1)


# --- telling a collision (port_holders) and starting again on one (engine_start) ---------------

LISTEN_AND_WAIT = """
import socket, sys, time
sock = socket.socket()
sock.bind(("0.0.0.0", int(sys.argv[1])))
sock.listen()
print("listening", flush=True)
time.sleep(300)
"""


@contextmanager
def listener_outside_this_tree(port: int, tmp_path: Path):
    """A process that is no descendant of this one (its shell exits: it is reparented), listening
    on ``port``, as another engine's scheduler would."""
    log = tmp_path / f"listener-{port}.log"
    started = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" "$2" > "$3" 2>&1 & echo $!']
        + [sys.executable, LISTEN_AND_WAIT, str(port), str(log)],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout)
    try:
        deadline = time.monotonic() + 30
        while "listening" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
            time.sleep(0.05)
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


@contextmanager
def listener_child(port: int):
    """A child of this process listening on ``port``, as the engine's scheduler does."""
    child = subprocess.Popen(
        [sys.executable, "-c", LISTEN_AND_WAIT, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "listening"
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_a_listener_outside_this_process_tree_is_foreign(tmp_path):
    port = free_block(1).low
    assert foreign_listener(port) is None  # nobody
    with listening(port):  # this process's own
        assert listening_sockets(port) and foreign_listener(port) is None
    with listener_child(port):
        assert foreign_listener(port) is None  # a child's, as the engine's scheduler's is
    with listener_outside_this_tree(port, tmp_path) as pid:
        assert foreign_listener(port) in listening_sockets(port)
        assert pid not in process_tree(os.getpid()) and process_tree(pid)[0] == pid


class FakeEngine:
    def __init__(self, port: int):
        self.port, self.shut_down = port, False

    def shutdown(self) -> None:
        self.shut_down = True


@dataclass
class FakeStarts:
    """``sglang.Engine`` as engine_start calls it: the first ``failures`` starts install the
    SIGQUIT handler, have the port taken by ``taker`` (if any), quit as a failed scheduler does
    and raise as the engine then does; later ones start."""

    failures: int
    taker: Callable | None
    leftovers: list = field(default_factory=list)  # what each failed start left running
    ports: list[int] = field(default_factory=list)

    def __call__(self, nccl_port: int, custom_sigquit_handler: Callable) -> FakeEngine:
        self.ports.append(nccl_port)
        if len(self.ports) > self.failures:
            return FakeEngine(nccl_port)
        if self.taker:
            self.taker(nccl_port)
        # spawned, as SGLang's are: a forked one would hold a copy of the lease's lock
        detokenizer = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,))
        detokenizer.start()
        self.leftovers.append(detokenizer)
        signal.signal(signal.SIGQUIT, custom_sigquit_handler)  # as _set_envs_and_config does
        os.kill(os.getpid(), signal.SIGQUIT)  # as run_scheduler_process does on an exception
        raise RuntimeError("Rank 0 scheduler died during initialization (exit code: 0).")


@pytest.fixture
def leases(monkeypatch, locks):
    """engine_start leasing from 3 free ports of its own, in a lock folder of the test's; SIGQUIT's
    handler and SGLang's answer (which would end this process) put back and recorded."""
    span = free_block(3)
    monkeypatch.setenv(PORTS_ENV, str(span))
    monkeypatch.setattr(ports, "lock_dir", lambda: locks)
    answers: list[int] = []
    monkeypatch.setattr(engine_start, "sglang_answer", lambda: answers.append(1))
    before = signal.getsignal(signal.SIGQUIT), set(multiprocessing.active_children())
    yield SimpleNamespace(span=span, answers=answers)
    signal.signal(signal.SIGQUIT, before[0])
    for left in set(multiprocessing.active_children()) - before[1]:  # SGLang's answer would end it
        left.kill()
        left.join()


def test_a_start_whose_port_another_process_took_is_retried_on_a_new_one(leases, tmp_path, capfd):
    with ExitStack() as taken:
        starts = FakeStarts(
            failures=1,
            taker=lambda port: taken.enter_context(listener_outside_this_tree(port, tmp_path)),
        )
        engine = engine_start.start_engine(starts)
        assert starts.ports[1] != starts.ports[0] and engine.port == starts.ports[1]
        assert not starts.leftovers[0].is_alive()  # the failed start's processes ended
        err = capfd.readouterr().err
        assert f"engine start collided on rendezvous port {starts.ports[0]}" in err
        assert "Rank 0 scheduler died during initialization" in err and "retry 1 of 2" in err
        assert leases.answers == []
        one = PortRange(engine.port, engine.port)
        with pytest.raises(NoFreeEnginePort):  # the engine's lease, held while it runs
            lease_engine_port(one, directory=ports.lock_dir())
        engine.shutdown()
        assert engine.shut_down
        lease_engine_port(one, directory=ports.lock_dir()).release()


def test_a_start_that_collides_every_time_gives_up_after_two_retries(leases, tmp_path, capfd):
    with ExitStack() as taken:
        starts = FakeStarts(
            failures=99,
            taker=lambda port: taken.enter_context(listener_outside_this_tree(port, tmp_path)),
        )
        with pytest.raises(RuntimeError, match="Rank 0 scheduler died") as raised:
            engine_start.start_engine(starts)
    assert sorted(starts.ports) == list(leases.span.ports())  # three starts, each on a new port
    assert "3 starts, each collided" in "".join(raised.value.__notes__)
    err = capfd.readouterr().err
    assert "retry 1 of 2" in err and "retry 2 of 2" in err and "retry 3" not in err


@pytest.mark.parametrize("holder", ["nobody", "the engine's child"])
def test_a_child_that_quits_for_another_reason_gets_sglangs_answer(leases, holder, capfd):
    # "the engine's child": the scheduler's own TCPStore, listening, when it fails later on
    with ExitStack() as taken:

        def child_listens(port: int) -> None:
            taken.enter_context(listener_child(port))

        starts = FakeStarts(failures=1, taker=None if holder == "nobody" else child_listens)
        with pytest.raises(RuntimeError, match="Rank 0 scheduler died"):
            engine_start.start_engine(starts)
    assert len(starts.ports) == 1 and leases.answers == [1]
    assert "retry" not in capfd.readouterr().err
    with lease_engine_port(PortRange(starts.ports[0], starts.ports[0]), directory=ports.lock_dir()):
        pass  # released


def test_any_other_failure_is_raised_as_it_came(leases):
    failure = ValueError("context_length 4096 > the model's 2048")
    tried = []

    def refuse(nccl_port, custom_sigquit_handler):
        tried.append(nccl_port)
        raise failure

    with pytest.raises(ValueError) as raised:
        engine_start.start_engine(refuse)
    assert raised.value is failure and len(tried) == 1 and leases.answers == []
    with lease_engine_port(PortRange(tried[0], tried[0]), directory=ports.lock_dir()):
        pass  # released


def test_a_sigquit_outside_an_engine_start_gets_sglangs_answer(leases):
    engine_start.on_child_quit(signal.SIGQUIT, None)
    assert leases.answers == [1]
