"""Rendezvous ports for SGLang engines, leased machine-wide so that engines started at the same
time never pick the same one (tilegate.harness.sglang.serve starts every engine on one).

SGLang 0.5.23 picks an engine's ``nccl_port`` (the rank-0 scheduler's TCPStore) by binding a random
port in 22000-29999 and closing it (``get_free_port_below_ephemeral``, sglang/srt/utils/network.py);
the scheduler binds it only later, so two engines started together can both pick it and the second
fails with EADDRINUSE. A lease is a non-blocking exclusive ``flock`` on ``<port>.lock`` in a
per-user folder (``lock_dir``), taken before the same bind probe as SGLang's and held as long as the
engine runs: a port another lease holds, or another process has bound, is skipped. The lock goes
with its file descriptor, so a process that dies releases its leases.

The folder sits in the shared /tmp (the same path whatever TMPDIR says, so every process of the
user sees it): it is refused unless it is a real folder of this user that nobody else may write,
and lock files are opened without following symlinks. They are never removed (removing a lock file
races with its next taker): at most one empty file per port of the range is left there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import re
import socket
import stat
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PORTS_ENV = "TILEGATE_ENGINE_PORTS"  # LOW-HIGH: narrows the range (tests force contention with it)
DEFAULT_LOW, DEFAULT_HIGH = 22000, 29999  # SGLang's range, below the kernel's ephemeral ports


class NoFreeEnginePort(RuntimeError):
    """Every port of the range is leased by another engine or bound by another process."""


class UnsafePortLockPath(RuntimeError):
    """The lock folder or a lock file is not what a lease may trust (a symlink, another user's)."""


@dataclass(frozen=True)
class PortRange:
    low: int
    high: int

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"

    def ports(self) -> range:
        return range(self.low, self.high + 1)


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for bind(0) and connect()."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def parse_port_range(text: str) -> PortRange:
    """``LOW-HIGH`` (both included) as a PortRange; anything else raises ValueError saying why."""
    match = re.fullmatch(r"\s*(\d{1,5})\s*-\s*(\d{1,5})\s*", text)
    low, high = (int(match[1]), int(match[2])) if match else (0, 0)
    if not match or not 1 <= low <= high <= 65535:
        raise ValueError(
            f"{PORTS_ENV}={text!r}: expected LOW-HIGH, two port numbers from 1 to 65535 with "
            f"LOW <= HIGH (e.g. 22000-22011)"
        )
    return PortRange(low, high)


def port_range(env: Mapping[str, str] = os.environ) -> PortRange:
    """The range ``PORTS_ENV`` names, else SGLang's 22000-29999 kept below the ephemeral ports
    (where connect() could take a leased port before the engine binds it)."""
    if (text := env.get(PORTS_ENV)) is not None:
        return parse_port_range(text)
    high = min(DEFAULT_HIGH, _ephemeral_low() - 1)
    return PortRange(DEFAULT_LOW, high if high >= DEFAULT_LOW else DEFAULT_HIGH)


def lock_dir() -> Path:
    """Per user (a folder another user created first would be refused, not shared)."""
    return Path("/tmp") / f"tilegate-engine-ports-{os.getuid()}"


def _open_lock_dir(directory: Path) -> int:
    """A descriptor of ``directory``, created 0o700 if missing; refused when it is a symlink, not a
    folder, not this user's, or writable by anyone else."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePortLockPath(
                f"engine port lock folder {directory} is a symlink or not a folder: refusing it "
                f"(remove it; it is created again)"
            ) from exc
        raise
    st = os.fstat(fd)  # of what was opened: no window between the check and the use
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        os.close(fd)
        raise UnsafePortLockPath(
            f"engine port lock folder {directory} belongs to uid {st.st_uid} with mode "
            f"{stat.filemode(st.st_mode)}: a lease needs a folder of uid {os.getuid()} that no one "
            f"else may write (remove it; it is created again)"
        )
    return fd


def _lock(dir_fd: int, directory: Path, port: int) -> int | None:
    """The port's lock file, flock'ed exclusively; None when another lease holds it."""
    name = f"{port}.lock"
    try:
        # read-only and never truncated: the file's content is never touched
        flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePortLockPath(
                f"engine port lock file {directory / name} is a symlink: refusing to follow it"
            ) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePortLockPath(f"engine port lock file {directory / name} is not a file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def bindable(port: int) -> bool:
    """SGLang's probe: the IPv4 side of ``port`` binds without SO_REUSEADDR (the TCPStore binds
    there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@dataclass
class EnginePortLease:
    """A port no other lease holds while this one does; ``release`` once its engine is gone (the
    process's exit releases it too)."""

    port: int
    lock_path: Path
    fd: int | None  # the flock'ed lock file; None once released

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def __enter__(self) -> EnginePortLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _try_range(ports: PortRange, directory: Path) -> EnginePortLease | tuple[int, int]:
    """A lease on the first free port of a shuffled pass over ``ports``, else how many were leased
    elsewhere and how many bound by another process."""
    candidates = list(ports.ports())
    # a fresh generator: engines seed the global one alike, and equal orders would contend
    random.Random().shuffle(candidates)
    leased = bound = 0
    dir_fd = _open_lock_dir(directory)
    try:
        for port in candidates:
            fd = _lock(dir_fd, directory, port)
            if fd is None:
                leased += 1
            elif not bindable(port):
                os.close(fd)
                bound += 1
            else:
                return EnginePortLease(port, directory / f"{port}.lock", fd)
    finally:
        os.close(dir_fd)
    return leased, bound


def lease_engine_port(
    ports: PortRange | None = None, *, directory: Path | None = None, wait_s: float = 0.0
) -> EnginePortLease:
    """A lease on a free port of ``ports`` (default: ``port_range()``), waiting up to ``wait_s``
    seconds for one when every port is taken; then NoFreeEnginePort."""
    ports = ports or port_range()
    directory = directory or lock_dir()
    deadline = time.monotonic() + wait_s
    said_waiting = False
    while True:
        got = _try_range(ports, directory)
        if isinstance(got, EnginePortLease):
            return got
        leased, bound = got
        taken = f"{leased} leased by other engines, {bound} bound by other processes"
        if time.monotonic() >= deadline:
            raise NoFreeEnginePort(
                f"no free engine rendezvous port in {ports} ({taken}; waited {wait_s:.0f} s): "
                f"widen {PORTS_ENV} or unset it for {DEFAULT_LOW}-{DEFAULT_HIGH}"
            )
        if not said_waiting:
            print(
                f"tilegate: no free engine rendezvous port in {ports} ({taken}): waiting up to "
                f"{wait_s:.0f} s for one",
                file=sys.stderr,
                flush=True,
            )
            said_waiting = True
        time.sleep(0.2)
