"""Who listens on a TCP port, read from Linux's /proc: the engine start
(tilegate.harness.sglang.engine_start) tells a rendezvous-port collision by a listener on its
leased port that none of its own processes holds."""

from __future__ import annotations

import os
import time
from pathlib import Path

LISTEN = "0A"  # the state column of /proc/net/tcp{,6} (include/net/tcp_states.h: TCP_LISTEN)


def listening_sockets(port: int) -> set[int]:
    """The inodes of the sockets listening on ``port`` (IPv4 and IPv6, any address)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue  # no IPv6 here
        for row in rows:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            cols = row.split()
            if len(cols) > 9 and cols[3] == LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(int(cols[9]))
    return inodes


def process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it, by the parent pid in /proc/PID/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        ppid = int(text.rsplit(")", 1)[1].split()[1])  # after "(comm)", which may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` has open (none if it is gone or not ours)."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    inodes = set()
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _foreign(port: int, root: int) -> set[int]:
    # ours first: a process of the tree that exits meanwhile takes its listener with it
    ours = set().union(*(socket_inodes(pid) for pid in process_tree(root)))
    return listening_sockets(port) - ours


def foreign_listener(port: int, root: int | None = None, settle_s: float = 0.1) -> int | None:
    """The inode of a socket listening on ``port`` that no process of ``root``'s tree (default:
    this process's) holds, seen twice ``settle_s`` apart; None when there is none. Twice: a process
    of the tree in the middle of its exit can have let go of its descriptors while the kernel still
    lists its listener."""
    root = root or os.getpid()
    first = _foreign(port, root)
    if not first:
        return None
    time.sleep(settle_s)
    return min(first & _foreign(port, root), default=None)
