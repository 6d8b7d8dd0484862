"""Building gfx942 code objects (hsaco) and reading them back, with a disk cache.

The cache key is the HIP source plus the toolchain identity (compiler version, HIP
headers, flags): change any of them and the object is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tilegate.toolchain import Toolchain


class BuildError(RuntimeError):
    """The compiler rejected a kernel's HIP source."""


@dataclass(frozen=True)
class CodeObject:
    hsaco: Path  # the gfx942 ELF code object the runtime loads
    listing: Path  # llvm-objdump disassembly
    notes: Path  # llvm-readelf --notes (AMDGPU metadata)
    elf_header: Path  # llvm-readelf -h (e_flags, ABI version)
    toolchain: Toolchain

    def disassembly(self) -> str:
        return self.listing.read_text()


def atomic_write(path: Path, data: bytes) -> None:
    # xdist workers may build the same object at once: write aside, then rename.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise BuildError(f"{what} failed ({proc.returncode}): {' '.join(cmd[:3])} ...\n{proc.stderr[-4000:]}")
    return proc.stdout


def build_code_object(source: str, toolchain: Toolchain, cache_dir: Path) -> CodeObject:
    key = hashlib.sha256(f"{toolchain.identity}\0{source}".encode()).hexdigest()[:24]
    out = cache_dir / "hsaco" / key
    obj = CodeObject(out / "kernel.hsaco", out / "kernel.s", out / "notes.txt", out / "elf-header.txt", toolchain)
    if all(p.is_file() for p in (obj.hsaco, obj.listing, obj.notes, obj.elf_header)):
        return obj
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src, hsaco = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel.hsaco"
        src.write_text(source)
        _run(toolchain.compile_command(src, hsaco), f"{toolchain.kind} compile for gfx942")
        listing = _run([str(toolchain.objdump), "-d", "--mcpu=gfx942", str(hsaco)], "disassembly")
        notes = _run([str(toolchain.readelf), "--notes", str(hsaco)], "reading AMDGPU metadata")
        header = _run([str(toolchain.readelf), "-h", str(hsaco)], "reading the ELF header")
        atomic_write(obj.listing, listing.encode())
        atomic_write(obj.notes, notes.encode())
        atomic_write(obj.elf_header, header.encode())
        atomic_write(obj.hsaco, hsaco.read_bytes())  # last: its presence marks the entry complete
    return obj
