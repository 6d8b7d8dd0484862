"""Compiling a GPU run's kernels once, all at a time, before its first test.

A test compiles a kernel when it first launches it, on one core: the tests of one xdist group
wait on their compiles one after another, and two groups that launch one kernel both compile it.
On the H200 that made the GPU tier compile-bound (docs/gpu-tiers.md). So a GPU test
declares what it launches with the ``builds`` mark, and before any test runs, one process per CPU
compiles every declared kernel of the selected, runnable tests into TileLang's disk cache; the
tests load them from there. A build that fails here is only counted: the test that launches it
compiles it again, and fails with the real error.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

from tilegate.gate.builds import Build

# Longest compiles first, so that no process starts a long one last (sm90, H200 host: the paged
# extend kernels with prefetch_kv take 20-25 s, prefill 10-15 s, the decode steps a few seconds).
COMPILE_ORDER = {
    "paged_extend": 0,
    "flash_fwd": 1,
    "paged_decode_split": 2,
    "paged_decode_combine": 3,
}
# 0: no precompile (each test compiles what it launches)
PROCESSES_ENV = "TILEGATE_PRECOMPILE_PROCESSES"


def _compile_one(build: Build) -> str | None:
    try:
        build.compile()
        return None
    except Exception as exc:  # the test that launches it compiles it again and reports it
        return (
            f"{build.kernel} {build.shape.name} {getattr(build.cfg, 'name', build.cfg)}: "
            f"{type(exc).__name__}"
        )


def default_processes() -> int:
    return int(os.environ.get(PROCESSES_ENV, len(os.sched_getaffinity(0))))


@dataclass(frozen=True)
class PrecompileResult:
    """What a precompile did: ``failed`` names each build that did not compile, with its error
    type."""

    kernels: int
    target: str
    processes: int
    seconds: float = 0.0
    failed: tuple[str, ...] = field(default=())

    @property
    def compiled_ahead(self) -> bool:
        return self.kernels > 0 and self.processes > 0

    def summary(self) -> str:
        if not self.compiled_ahead:
            return (
                f"precompile: {self.kernels} kernels, {self.processes} processes: nothing "
                "compiled ahead"
            )
        line = (
            f"precompile: {self.kernels} kernels for {self.target} in {self.seconds:.0f} s on "
            f"{self.processes} processes"
        )
        if self.failed:
            line += (
                f"; {len(self.failed)} failed (their tests compile them again and report why): "
                f"{'; '.join(self.failed[:3])}"
            )
        return line

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PrecompileResult:
        data = json.loads(text)
        return cls(**{**data, "failed": tuple(data["failed"])})


def precompile(builds: Iterable[Build], target: str, processes: int) -> PrecompileResult:
    """Compile ``builds`` for ``target`` (the local GPU's table) on ``processes`` processes."""
    todo = sorted(
        {b for build in builds for b in build.resolved(target)},
        key=lambda b: (COMPILE_ORDER.get(b.kernel, 0), repr(b)),
    )
    if not todo or processes < 1:
        return PrecompileResult(len(todo), target, processes)
    start = time.perf_counter()
    workers = min(processes, len(todo))
    # spawn: the caller may have a GPU context, which a forked child must not inherit
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        failed = tuple(why for why in pool.map(_compile_one, todo) if why)
    return PrecompileResult(len(todo), target, workers, time.perf_counter() - start, failed)
