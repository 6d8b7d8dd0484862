#!/usr/bin/env python3
"""Copies what the gate's container wrote into a folder the host made, plain files only, for the
upload and the step summary. Run on the MI300X runner's host (main's copy, trusted/). Stdlib only.

    python3 scripts/collect_records.py OUT DEST

OUT is the container's /out: artifacts/, baselines/ and .test_durations. DEST (new) gets
artifacts/, suite/baselines/ and .test_durations, the layout the upload always had. The code under
test wrote OUT, so nothing in it is followed or trusted: every folder and file is opened relative
to its parent's descriptor with O_NOFOLLOW, and only folders and regular files with one link are
taken. Symlinks, devices, FIFOs, sockets, hard links, a `.git` entry, a name with a control
character, a file over the size cap, anything past the file count or the total cap: each is
refused, listed in DEST/refused.json and on stderr as a GitHub annotation, and the command exits 1
once the rest is copied.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import asdict, dataclass
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
CHUNK = 2**20


@dataclass(frozen=True)
class Refusal:
    path: str  # relative to OUT
    why: str


class Collector:
    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.refused: list[Refusal] = []
        self.files = 0
        self.bytes = 0

    def refuse(self, path: str, why: str) -> None:
        self.refused.append(Refusal(path, why))

    def take(self, parent_fd: int, name: str, rel: str, target: Path) -> None:
        """Copies the entry ``name`` of the folder open as ``parent_fd`` to ``target``."""
        if name == ".git" or not name.isprintable() or "/" in name:
            self.refuse(rel, "name refused (.git, or a control character)")
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
        for name in sorted(os.listdir(fd)):
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


def collect(out: Path, dest: Path) -> list[Refusal]:
    dest.mkdir(parents=True)  # a new folder, made by the host
    collector = Collector(dest)
    if not out.is_dir():  # the container never started: nothing to take, the summary says so
        return []
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


def annotation(refusal: Refusal) -> str:
    text = f"collect_records refused {refusal.path}: {refusal.why}"
    return "::error title=record refused::" + text.replace("%", "%25").replace("\r", "%0D").replace(
        "\n", "%0A"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="the container's /out folder")
    parser.add_argument("dest", type=Path, help="a new folder for the upload and the summary")
    args = parser.parse_args()
    refused = collect(args.out, args.dest)
    if refused:
        (args.dest / "refused.json").write_text(
            json.dumps([asdict(r) for r in refused], indent=1) + "\n"
        )
        print("\n".join(annotation(r) for r in refused), file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
