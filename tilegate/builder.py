"""One cached path from (kernel, shape, config, target) to lowered source and code object.

Two cache levels: in memory for the session (per xdist worker), and on disk across
runs. The lowered-source key is the kernel's TIR script, the target and the TileLang
version, so any change to a kernel factory misses the cache.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import tilelang

from tilegate import lowering
from tilegate.codeobj import CodeObject, atomic_write, build_code_object
from tilegate.isa import IsaReport, read_code_object
from tilegate.kernels.registry import KernelCase
from tilegate.toolchain import find_toolchain


@dataclass(frozen=True)
class Lowered:
    source: str
    lds_bytes: int
    symbol: str


class KernelBuilder:
    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._lowered: dict[KernelCase, Lowered] = {}
        self._objects: dict[KernelCase, CodeObject] = {}

    def lowered(self, case: KernelCase) -> Lowered:
        if case not in self._lowered:
            self._lowered[case] = self._lower_cached(case)
        return self._lowered[case]

    def _lower_cached(self, case: KernelCase) -> Lowered:
        func = case.prim_func()
        key = hashlib.sha256(f"{tilelang.__version__}\0{case.target}\0{func.script()}".encode()).hexdigest()[:24]
        path = self.cache_dir / "lowered" / f"{key}.json"
        if path.is_file():
            return Lowered(**json.loads(path.read_text()))
        source, lds, symbol = lowering.lower(func, case.target)
        result = Lowered(source, lds, symbol)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(result.__dict__).encode())
        return result

    def code_object(self, case: KernelCase) -> CodeObject:
        if case.target != "gfx942":
            raise ValueError(f"code objects are built for gfx942 only, not {case.target}")
        if case not in self._objects:
            self._objects[case] = build_code_object(self.lowered(case).source, find_toolchain(), self.cache_dir)
        return self._objects[case]

    def isa_report(self, case: KernelCase) -> IsaReport:
        return read_code_object(self.code_object(case), self.lowered(case).lds_bytes, case.threads)
