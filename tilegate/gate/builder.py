"""One cached path from (kernel, shape, config, target) to lowered source and code object.

Two cache levels: in memory for the session (per xdist worker), and on disk across
runs. The lowered-source key is the case's ``cache_key()`` (a registered kernel's name, shape,
config and target; an adapted kernel's what its lowering takes, with the sha256 of its source as
this process runs it: tilegate/families/case.py), the TileLang version and a digest of every
kernel source file and of lowering.py: any change to a kernel factory misses the cache (so does a
change to any other kernel file: cheap to relower, and a warm run need not build a prim_func to
know its key).

A lowered entry (``lowered/<key>.json``) embeds the sha256 of its fields and is written aside,
then renamed into place; one that does not parse or match its checksum is discarded and relowered.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import tilelang

from tilegate.gate import lowering
from tilegate.gfx942.code_object import (
    CACHE_FORMAT,
    CodeObject,
    atomic_write,
    build_code_object,
    warn_discarded,
)
from tilegate.gfx942.isa import IsaReading, read_code_object
from tilegate.gfx942.toolchain import find_toolchain


class Buildable(Protocol):
    """What the builder takes: a registered kernel's build (tilegate.gate.registry.KernelCase)
    or an adapted kernel's (tilegate.families.case.KernelBuild)."""

    name: str
    target: str

    @property
    def threads(self) -> int: ...

    def cache_key(self) -> str: ...

    def lowering_input(self) -> tuple[Any, dict | None]: ...


@dataclass(frozen=True)
class Lowered:
    source: str
    lds_bytes: int
    symbol: str


LOWERED_FIELDS = tuple(f.name for f in dataclasses.fields(Lowered))


def _checksum(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _load_lowered(path: Path) -> Lowered | None:
    """The entry at ``path``; None when there is none, or when it is damaged (then it is
    discarded)."""
    try:
        entry = json.loads(path.read_bytes())
        fields = {name: entry[name] for name in LOWERED_FIELDS}
        if entry["sha256"] == _checksum(fields):
            return Lowered(**fields)
        why = "its content does not match its sha256"
    except FileNotFoundError:
        return None
    except KeyError as exc:
        why = f"field {exc} is missing"
    except (ValueError, TypeError) as exc:  # truncated or garbled JSON, or not an object
        why = f"unreadable: {type(exc).__name__}: {exc}"
    warn_discarded(path, why)
    # at worst another worker's fresh entry: that costs a relowering, no more
    path.unlink(missing_ok=True)
    return None


@functools.cache
def sources_digest() -> str:
    """sha256 over the kernel sources (kernels/*.py), lowering.py and the planted defects' knobs
    (planted.py): what a lowered kernel depends on besides its case and TileLang."""
    import tilegate.kernels
    from tilegate.gate import planted

    kernels = sorted(Path(tilegate.kernels.__path__[0]).glob("*.py"))
    files = [*kernels, Path(lowering.__file__), Path(planted.__file__)]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


class KernelBuilder:
    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._lowered: dict[Buildable, Lowered] = {}
        self._objects: dict[Buildable, CodeObject] = {}

    def lowered(self, case: Buildable) -> Lowered:
        if case not in self._lowered:
            self._lowered[case] = self._lower_cached(case)
        return self._lowered[case]

    def _entry(self, case: Buildable) -> Path:
        key = "\0".join((CACHE_FORMAT, tilelang.__version__, case.cache_key(), sources_digest()))
        return self.cache_dir / "lowered" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"

    def _lower_cached(self, case: Buildable) -> Lowered:
        cached = _load_lowered(self._entry(case))
        if cached is not None:
            return cached
        prim_func, pass_configs = case.lowering_input()
        result = Lowered(*lowering.lower(prim_func, case.target, pass_configs))
        # Keyed again, now that its sources are imported: an adapted kernel's file edited between
        # the first key and its import is written under the key of what was lowered.
        path = self._entry(case)
        fields = dataclasses.asdict(result)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({**fields, "sha256": _checksum(fields)}).encode())
        return result

    def code_object(self, case: Buildable) -> CodeObject:
        if case.target != "gfx942":
            raise ValueError(f"code objects are built for gfx942 only, not {case.target}")
        if case not in self._objects:
            self._objects[case] = build_code_object(
                self.lowered(case).source, find_toolchain(), self.cache_dir
            )
        return self._objects[case]

    def isa_reading(self, case: Buildable) -> IsaReading:
        return read_code_object(self.code_object(case), self.lowered(case).lds_bytes, case.threads)
