"""Building gfx942 code objects (hsaco) and reading them back, with a disk cache.

The cache key is the HIP source plus the toolchain identity (compiler version, HIP headers, flags)
and the inner-loop rule (tilegate.gfx942.inner_loop.LOOP_RULE): change any of them and the object is
rebuilt.

An entry is the folder ``hsaco/<key>/``: the code object, its listing, notes and ELF header,
llvm-mca's report on its inner loop, plus ``manifest.json`` (size and sha256 of each). It is
built in a temporary folder beside that one and renamed into place whole, so a reader sees a
complete entry or none; loading verifies every file against the manifest, and an entry that
fails is discarded and rebuilt.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from tilegate.gfx942.inner_loop import LOOP_RULE, inner_loop_report
from tilegate.gfx942.pch import discard, precompiled_header
from tilegate.gfx942.toolchain import Toolchain

# Part of every cache key (here and in builder.py): bump it when an entry's layout changes, so
# entries of another layout are never read, nor discarded under a run of an older checkout.
CACHE_FORMAT = "3"
MANIFEST = "manifest.json"
ENTRY_FILES = ("kernel.hsaco", "kernel.s", "notes.txt", "elf-header.txt", "inner-loop-mca.txt")


class BuildError(RuntimeError):
    """The compiler rejected a kernel's HIP source."""


class CacheEntryDiscarded(UserWarning):
    """A disk cache entry was damaged (truncated, altered, half-written): removed and rebuilt."""


@dataclass(frozen=True)
class CodeObject:
    hsaco: Path  # the gfx942 ELF code object the runtime loads
    listing: Path  # llvm-objdump disassembly
    notes: Path  # llvm-readelf --notes (AMDGPU metadata)
    elf_header: Path  # llvm-readelf -h (e_flags, ABI version)
    inner_loop_mca: Path  # llvm-mca's report on the inner loop (tilegate/gfx942/inner_loop.py)
    toolchain: Toolchain

    def disassembly(self) -> str:
        return self.listing.read_text()


def atomic_write(path: Path, data: bytes) -> None:
    # xdist workers may build the same entry at once: write aside, then rename.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def warn_discarded(entry: Path, why: str) -> None:
    warnings.warn(
        f"tilegate cache: discarding {entry} ({why}); rebuilding it",
        CacheEntryDiscarded,
        stacklevel=2,
    )


def _manifest(folder: Path) -> dict:
    manifest = {}
    for name in ENTRY_FILES:
        data = (folder / name).read_bytes()
        manifest[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return manifest


def entry_problem(folder: Path) -> str | None:
    """Why the entry in ``folder`` cannot be used, or None when every file matches its manifest."""
    try:
        expected = json.loads((folder / MANIFEST).read_bytes())
        actual = _manifest(folder)
        for name in ENTRY_FILES:
            want, got = expected[name], actual[name]
            if got["size"] != want["size"]:
                return f"{name} has {got['size']} bytes, its manifest says {want['size']}"
            if got["sha256"] != want["sha256"]:
                return f"{name} does not match its manifest's sha256"
    except (FileNotFoundError, NotADirectoryError) as exc:
        return f"{Path(exc.filename or '?').name} is missing"
    except (ValueError, KeyError, TypeError) as exc:  # unparsable manifest, or fields missing
        return f"unreadable manifest: {type(exc).__name__}: {exc}"
    return None


def _discard(entry: Path, why: str) -> None:
    aside = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}.discard-"))
    try:
        try:
            os.rename(entry, aside / entry.name)  # atomic: nobody opens a half-deleted entry
        except FileNotFoundError:
            return  # another process discarded it first
        if entry_problem(aside / entry.name) is None:
            # Another process rebuilt it since we looked: put it back (unless yet another is there).
            with contextlib.suppress(OSError):
                os.rename(aside / entry.name, entry)
            return
        warn_discarded(entry, why)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode:
        raise BuildError(
            f"{what} failed ({proc.returncode}): {' '.join(cmd[:3])} ...\n{proc.stderr[-4000:]}"
        )
    return proc.stdout


def _build_into(
    folder: Path, source: str, toolchain: Toolchain, cache_dir: Path | None = None
) -> None:
    # A rebuild gives the same bytes: clang names a __hip_cuid_ symbol after the source's real
    # path unless given -cuid, and objdump prints the paths it is given (relative to the folder).
    src, hsaco = Path("kernel.cpp"), Path("kernel.hsaco")
    (folder / src).write_text(source)
    cuid = hashlib.sha256(source.encode()).hexdigest()[:16]
    compile_cmd = [*toolchain.compile_command(src, hsaco), f"-cuid={cuid}"]
    what = f"{toolchain.kind} compile for gfx942"
    pch = precompiled_header(source, toolchain, cache_dir) if cache_dir else None
    if pch is None:
        _run(compile_cmd, what, folder)
    else:
        try:
            _run([*compile_cmd, "-Xclang", "-include-pch", "-Xclang", str(pch)], what, folder)
        except BuildError:
            _run(compile_cmd, what, folder)  # raises the real error when the source is at fault
            discard(pch, "a build failed with it and passed without it")
    (folder / src).unlink()
    for name, cmd, what in (
        ("kernel.s", [str(toolchain.objdump), "-d", "--mcpu=gfx942"], "disassembly"),
        ("notes.txt", [str(toolchain.readelf), "--notes"], "reading AMDGPU metadata"),
        ("elf-header.txt", [str(toolchain.readelf), "-h"], "reading the ELF header"),
    ):
        (folder / name).write_text(_run([*cmd, str(hsaco)], what, folder))
    (folder / "inner-loop-mca.txt").write_text(
        inner_loop_report(toolchain.mca, (folder / "kernel.s").read_text())
    )
    (folder / MANIFEST).write_text(json.dumps(_manifest(folder), indent=1))


def _install(staging: Path, entry: Path) -> None:
    """Rename the finished entry into place; keep another process's if it got there first and
    verifies."""
    for _ in range(3):
        try:
            os.rename(staging, entry)  # replaces nothing but an empty folder
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        problem = entry_problem(entry)
        if problem is None:
            return  # theirs is good: ours is removed by the caller
        _discard(entry, problem)
    raise OSError(
        f"could not install cache entry {entry}: another process kept putting damaged ones in place"
    )


def build_code_object(source: str, toolchain: Toolchain, cache_dir: Path) -> CodeObject:
    key = hashlib.sha256(
        f"{CACHE_FORMAT}\0{LOOP_RULE}\0{toolchain.identity}\0{source}".encode()
    ).hexdigest()[:24]
    entry = cache_dir / "hsaco" / key
    hsaco, listing, notes, header, mca = (entry / name for name in ENTRY_FILES)
    obj = CodeObject(hsaco, listing, notes, header, mca, toolchain)
    if entry.exists():
        problem = entry_problem(entry)
        if problem is None:
            return obj
        _discard(entry, problem)
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{key}.building-"))
    staging.chmod(0o755)  # mkdtemp's 0700 would make the entry private to this user
    try:
        _build_into(staging, source, toolchain, cache_dir)
        _install(staging, entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a failed build, or the copy that lost the race
    return obj
