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

from tilegate.kernels.problem import AttentionShape

# A Build's config, when it is not one config: the local GPU's table decides (resolved on the GPU
# machine, where the table is known; never at collection).
DEFAULT = "default"  # the kernel's default config for the local target
EVERY = "every"  # every config of the local target's table

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


@dataclass(frozen=True)
class Build:
    """One kernel a test launches: a KERNELS name, its shape, a config (or DEFAULT / EVERY) and the
    factory's keyword arguments (a planted defect) as sorted (name, value) pairs."""

    kernel: str
    shape: AttentionShape
    cfg: object = DEFAULT
    options: tuple = ()

    def __post_init__(self):
        if "defect" in dict(self.options):  # the factories take knobs (kernels/hooks.py)
            raise TypeError(f"{self.kernel}: plant a defect with kind_builds(defect=...) or knobs")

    def resolved(self, target: str) -> list[Build]:
        """This build with a real config: one Build per config of ``target`` that it names."""
        from tilegate.gate.registry import KERNELS
        from tilegate.kernels.configs import default_config

        tables = KERNELS[self.kernel].config_tables
        if self.cfg == DEFAULT:
            configs = [default_config(target, self.shape.head_dim, tables)]
        elif self.cfg == EVERY:
            configs = list(tables[target][self.shape.head_dim])
        else:
            configs = [self.cfg]
        return [Build(self.kernel, self.shape, cfg, self.options) for cfg in configs]

    def compile(self) -> None:
        """Compile exactly as the runtime does when a test launches this kernel."""
        from tilegate import runtime
        from tilegate.gate.registry import KERNELS

        runtime.compiled(KERNELS[self.kernel].factory, self.shape, self.cfg, **dict(self.options))


def kind_builds(kind: str, shape: AttentionShape, cfg=DEFAULT, **options) -> list[Build]:
    """What one call of a kernel family launches: ``flash_fwd``, ``extend``, or ``decode`` (the
    split-KV step, then the combine step). ``defect`` is planted through its knobs
    (tilegate/gate/planted.py), in the kernel of its own family."""
    from tilegate.gate.planted import knobs_for
    from tilegate.gate.registry import KERNELS

    names = {
        "flash_fwd": ("flash_fwd",),
        "extend": ("paged_extend",),
        "decode": ("paged_decode_split", "paged_decode_combine"),
    }[kind]
    # None: the factory's default
    defect = options.pop("defect", None)
    builds = []
    for name in names:
        # the defect's knobs go to the kernel of its family (decode: the combine step)
        mine = defect is not None and isinstance(defect, KERNELS[name].defects or ())
        opts = {**options, "knobs": knobs_for(defect) if mine else None}
        pairs = tuple(sorted((k, v) for k, v in opts.items() if v is not None))
        builds.append(Build(name, shape, cfg, pairs))
    if defect is not None and all(dict(b.options).get("knobs") is None for b in builds):
        raise TypeError(f"no kernel of {kind} plants {defect!r}")
    return builds


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
