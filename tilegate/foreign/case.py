"""One build of a foreign kernel: a problem and a tile config for a target, as the builder takes it
(tilegate.builder): a name, the threads it launches, a cache key, and the prim_func to lower."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tilegate.foreign.provenance import source_digest
from tilegate.foreign.spec import Config, ForeignKernel, ForeignKernelError, Problem


@dataclass(frozen=True)
class ForeignCase:
    kernel: ForeignKernel = field(compare=False, repr=False)
    kernel_name: str
    problem: Problem
    cfg: Config
    target: str

    @classmethod
    def of(cls, kernel: ForeignKernel, problem: Problem, cfg: Config, target: str) -> ForeignCase:
        return cls(kernel, kernel.name, problem, cfg, target)

    @property
    def name(self) -> str:
        return f"{self.kernel_name}-{self.problem.name}-{self.cfg.name}"

    @property
    def threads(self) -> int:
        return self.cfg.threads

    @property
    def lds_estimate(self) -> int:
        return self.kernel.lds_estimate(self.problem, self.cfg)

    def cache_key(self) -> str:
        """The case, and the sha256 of the kernel's source and of the adapter that builds it."""
        adapter = sys.modules[self.kernel.lds_estimate.__module__]  # the module that declares the kernel
        digests = [self.kernel.provenance.sha256(), source_digest(Path(str(adapter.__file__)))]
        return "\0".join((self.target, self.name, repr(self.problem), repr(self.cfg), *digests))

    def lowering_input(self):
        """(prim_func, pass_configs): the factory called as the module would for ``target``."""
        module = self.kernel.provenance.load()
        factory = getattr(module, self.kernel.factory)
        with _module_globals(module, self.kernel.target_globals.get(self.target, {})):
            if hasattr(factory, "get_tir"):  # a @tilelang.jit function: its prim_func and its pass configs
                return factory.get_tir(*self.problem.args, **dict(self.cfg.kwargs)), dict(factory.pass_configs or {})
            return factory(*self.problem.args, **dict(self.cfg.kwargs)), None


@contextlib.contextmanager
def _module_globals(module, values: dict):
    missing = [name for name in values if not hasattr(module, name)]
    if missing:
        raise ForeignKernelError(f"{module.__name__} has no {missing}: the adapter's target globals are stale")
    saved = {name: getattr(module, name) for name in values}
    try:
        for name, value in values.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def cases(kernel: ForeignKernel, target: str) -> list[ForeignCase]:
    return [ForeignCase.of(kernel, p, c, target) for p in kernel.problems for c in kernel.configs.get(target, ())]
