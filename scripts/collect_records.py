#!/usr/bin/env python3
"""Copies what the gate's container wrote into a folder the host made, plain files only, for the
upload and the step summary. Run on the MI300X runner's host (main's copy, trusted/). Stdlib only.

    python3 scripts/collect_records.py OUT DEST

OUT is the container's /out: artifacts/, baselines/ and .test_durations. DEST (new) gets
artifacts/, suite/baselines/ and .test_durations, the layout the upload always had. The code under
test wrote OUT, so nothing in it is followed or trusted: every folder and file is opened relative
to its parent's descriptor with O_NOFOLLOW, and only folders and regular files with one link are
taken. A name is data too: the upload keeps it and an unzip on another machine writes it, so a path
is taken only in a small alphabet (NAME below: letters, digits, `._+-`, `/` between names, no name
of dots only or starting with `-`, bounded length and depth). Symlinks, devices, FIFOs, sockets,
hard links, a `.git` entry, a name outside the alphabet, a file over the size cap, anything past
the file count or the total cap: each is refused and counted; the first MAX_REPORTED are listed
in DEST/refused.json and on stderr as GitHub annotations (their names escaped into the alphabet),
then the count, and the command exits 1 once the rest is copied.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# (path under OUT, path under DEST)
TAKEN = (
    ("artifacts", "artifacts"),
    ("baselines", "suite/baselines"),
    (".test_durations", ".test_durations"),
)
FILE_CAP = 256 * 2**20  # the largest record: a code object's disassembly is a few MiB
TOTAL_CAP = 4 * 2**30
MAX_FILES = 50_000  # files and folders
MAX_DEPTH = 32
MAX_NAME = 128  # one name's characters
MAX_PATH = 512  # a whole path's, under OUT
MAX_REPORTED = 20  # refusals listed by name; the rest are counted
CHUNK = 2**20
# the characters of a name (`/` separates names); a name of dots only, or one that starts with `-`
# (an option to a tool), is refused on its own
NAME = re.compile(rf"[A-Za-z0-9._+-]{{1,{MAX_NAME}}}")


def shown(path: str) -> str:
    """``path`` in the alphabet NAME takes and `/`: every other character as \\xNN, \\uNNNN or
    \\UNNNNNNNN (a backslash too), so no refused name reaches a log or a JSON reader as itself."""
    return "".join(
        c
        if c == "/" or NAME.fullmatch(c)
        else f"\\x{ord(c):02x}"
        if ord(c) < 0x100
        else f"\\u{ord(c):04x}"
        if ord(c) < 0x10000
        else f"\\U{ord(c):08x}"
        for c in path
    )


def name_refused(name: str, rel: str) -> str | None:
    """Why ``name`` (the last name of ``rel``) is not taken; None when it is."""
    if name == ".git" or not name.strip(".") or name.startswith("-"):
        return "name refused (.git, dots only, or a leading -)"
    if not NAME.fullmatch(name):
        return f"name refused (outside letters, digits and ._+-, or over {MAX_NAME} characters)"
    if len(rel) > MAX_PATH:
        return f"path refused (over {MAX_PATH} characters)"
    return None


@dataclass(frozen=True)
class Refusal:
    path: str  # relative to OUT, escaped by shown()
    why: str


@dataclass
class Refusals:
    """The first MAX_REPORTED refusals and how many there were in all."""

    first: list[Refusal] = field(default_factory=list)
    count: int = 0

    def add(self, path: str, why: str) -> None:
        self.count += 1
        if len(self.first) < MAX_REPORTED:
            self.first.append(Refusal(shown(path), why))


class Collector:
    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.refused = Refusals()
        self.files = 0
        self.bytes = 0

    def refuse(self, path: str, why: str) -> None:
        self.refused.add(path, why)

    def take(self, parent_fd: int, name: str, rel: str, target: Path) -> None:
        """Copies the entry ``name`` of the folder open as ``parent_fd`` to ``target``."""
        why = name_refused(name, rel)
        if why:
            self.refuse(rel, why)
            return
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent_fd
            )
        except OSError as e:  # ELOOP: a symlink; ENXIO: a socket
            self.refuse(rel, f"not opened without following links: {os.strerror(e.errno or 0)}")
            return
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                self.take_folder(fd, rel, target)
            elif not stat.S_ISREG(info.st_mode):
                self.refuse(rel, f"not a regular file (mode {stat.filemode(info.st_mode)})")
            elif info.st_nlink != 1:
                self.refuse(rel, f"a hard link ({info.st_nlink} names)")
            elif info.st_size > FILE_CAP:
                self.refuse(rel, f"{info.st_size} bytes, over the {FILE_CAP}-byte cap")
            elif self.files >= MAX_FILES or self.bytes + info.st_size > TOTAL_CAP:
                self.refuse(rel, "over the collection's file count or total size")
            else:
                self.copy(fd, target, info.st_size)
        finally:
            os.close(fd)

    def take_folder(self, fd: int, rel: str, target: Path) -> None:
        if rel.count("/") >= MAX_DEPTH or self.files >= MAX_FILES:
            self.refuse(
                rel, f"a folder past the depth ({MAX_DEPTH}) or the count the collection takes"
            )
            return
        self.files += 1
        target.mkdir(parents=True, exist_ok=True)
        names = sorted(os.listdir(fd))  # sorted: the same refusals listed on every run
        for i, name in enumerate(names):
            if self.files >= MAX_FILES:  # the rest is counted, not opened: a million stay cheap
                rest = names[i:]
                listed = rest[: max(0, MAX_REPORTED - len(self.refused.first))]
                for late in listed:
                    self.refuse(f"{rel}/{late}", "over the collection's file count")
                self.refused.count += len(rest) - len(listed)
                break
            self.take(fd, name, f"{rel}/{name}", target / name)

    def copy(self, fd: int, target: Path, size: int) -> None:
        copied = 0
        with open(target, "xb") as out:  # DEST is new: nothing there to follow or overwrite
            while chunk := os.read(fd, CHUNK):
                copied += len(chunk)
                if copied > size:  # grew while read: take no more than was stat'ed
                    break
                out.write(chunk)
        self.files += 1
        self.bytes += min(copied, size)


def collect(out: Path, dest: Path) -> Refusals:
    dest.mkdir(parents=True)  # a new folder, made by the host
    collector = Collector(dest)
    if not out.is_dir():  # the container never started: nothing to take, the summary says so
        return collector.refused
    root = os.open(out, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        present = set(os.listdir(root))
        for source, target in TAKEN:
            if source in present:
                collector.take(root, source, source, dest / target)
        for name in sorted(present - {s for s, _ in TAKEN}):
            collector.refuse(
                name, "not a record the gate writes (artifacts/, baselines/, .test_durations)"
            )
    finally:
        os.close(root)
    return collector.refused


def annotations(refused: Refusals) -> list[str]:
    """The workflow commands for ``refused``: its paths are escaped by shown() already, and the
    reasons are this script's own words, so no line holds a control character or a `::` of the
    code under test's."""
    lines = [
        f"::error title=record refused::collect_records refused {r.path}: {r.why}"
        for r in refused.first
    ]
    if refused.count > len(refused.first):
        more = refused.count - len(refused.first)
        lines.append(f"::error title=record refused::collect_records refused {more} more entries")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="the container's /out folder")
    parser.add_argument("dest", type=Path, help="a new folder for the upload and the summary")
    args = parser.parse_args()
    refused = collect(args.out, args.dest)
    if refused.count:
        (args.dest / "refused.json").write_text(json.dumps(asdict(refused), indent=1) + "\n")
        print("\n".join(annotations(refused)), file=sys.stderr)
    return 1 if refused.count else 0


if __name__ == "__main__":
    sys.exit(main())
