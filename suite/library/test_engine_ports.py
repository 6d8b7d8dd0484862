"""Machine-wide rendezvous-port leases for SGLang engines (tilegate/harness/sglang/ports.py):
engines started together get distinct ports, ports bound elsewhere are skipped, a full range says
so, and the lock folder in the shared /tmp cannot be turned against its user."""

import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilegate.harness.sglang import ports
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
