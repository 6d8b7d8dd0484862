"""A precompiled header for the gfx942 builds.

Every HIP source TileLang emits opens with the same block of #includes: hip_runtime.h and TileLang's
HIP templates, about 2.4 MB of C++ once preprocessed. Parsing it was 1.2 s of each 2 s clang run
(docs/cpu-tier.md). The block is compiled once per toolchain into a clang PCH, kept in
the compile cache, and every build of a source that opens with that block includes it precompiled.

A PCH changes no byte of the code object (``suite/library/test_toolchain.py`` builds one kernel
both ways and compares). clang has no driver mode that writes a HIP device PCH, so the PCH is
written by the driver's own front-end command for the block (``clang -###``), told to emit a PCH
instead of an object. Where that cannot be done, a build goes on without one: slower, never
different."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import subprocess
import tempfile
import warnings
from pathlib import Path

from tilegate.gfx942.toolchain import Toolchain

PCH_FORMAT = "1"  # bump when how a PCH is made changes
# keys whose PCH failed in this process: not tried (and warned about) per build
_cannot_build: set[str] = set()


def include_block(source: str) -> str:
    """The #include lines the source opens with (blank lines between them allowed)."""
    lines = []
    for line in source.splitlines():
        if line.startswith("#include"):
            lines.append(line)
        elif line.strip():
            break
    return "\n".join(lines) + "\n" if lines else ""


def _front_end_command(toolchain: Toolchain, header: Path, pch: Path) -> list[str] | None:
    """The clang -cc1 command the driver would run for ``header`` as a HIP source, emitting a
    PCH."""
    plan = subprocess.run(
        [str(toolchain.clang), *toolchain.compile_flags, "-###", "-o", "unused.hsaco", str(header)],
        capture_output=True,
        text=True,
        cwd=header.parent,
    )
    jobs = [shlex.split(line) for line in plan.stderr.splitlines() if line.startswith(' "')]
    cc1 = next((job for job in jobs if "-cc1" in job and "-emit-obj" in job), None)
    if plan.returncode or cc1 is None or cc1[-1] != str(header) or cc1.count("-o") != 1:
        return None
    cmd = [("-emit-pch" if arg == "-emit-obj" else arg) for arg in cc1]
    cmd[cmd.index("-o") + 1] = str(pch)
    return cmd


def precompiled_header(source: str, toolchain: Toolchain, cache_dir: Path) -> Path | None:
    """The PCH of ``source``'s include block for ``toolchain`` (built on first use), or None."""
    block = include_block(source)
    if not block:
        return None
    key = hashlib.sha256(f"{PCH_FORMAT}\0{toolchain.identity}\0{block}".encode()).hexdigest()[:24]
    pch, header = cache_dir / "pch" / f"{key}.pch", cache_dir / "pch" / f"{key}.h"
    if pch.is_file():
        return pch
    if key in _cannot_build:
        return None
    pch.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pch.parent, prefix=f".{key}.building-") as tmp:
        # The PCH names the header it was made from, and clang checks that file's size and time
        # when it loads the PCH: the header stays beside it, written once (a second writer would
        # make every PCH built from the first copy stale).
        (Path(tmp) / "prelude.h").write_text(block)
        with contextlib.suppress(FileExistsError):
            os.link(Path(tmp) / "prelude.h", header)  # fails, keeping the first, when it is there
        staged = Path(tmp) / "prelude.pch"
        cmd = _front_end_command(toolchain, header, staged)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp) if cmd else None
        if proc is None or proc.returncode or not staged.is_file():
            why = (
                "the driver's plan has no single front-end job"
                if proc is None
                else proc.stderr[-500:]
            )
            warnings.warn(
                f"tilegate: no precompiled header for the gfx942 builds ({why}); building without",
                stacklevel=2,
            )
            _cannot_build.add(key)
            return None
        os.replace(staged, pch)  # atomic: a reader sees the whole PCH or none
    return pch


def discard(pch: Path, why: str) -> None:
    warnings.warn(
        f"tilegate: discarded the precompiled header {pch} ({why}); the build ran without it",
        stacklevel=2,
    )
    pch.unlink(missing_ok=True)
