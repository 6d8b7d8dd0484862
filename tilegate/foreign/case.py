"""One build of a foreign kernel: a problem and a tile config for a target, as the builder takes it
(tilegate.builder): a name, the threads it launches, a cache key, and the prim_func to lower."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from tilegate.foreign.provenance import source_digest
from tilegate.foreign.spec import (
    Config,
    ForeignKernel,
    ForeignKernelError,
    Problem,
    raised_at,
)

# how the factory is called (lowering_input) decides the program too
_THIS_MODULE = source_digest(Path(__file__))


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
        """What the lowered code is made from, and nothing else: the target; the kernel's module,
        its factory and the arguments the factory gets (the problem's ``args``, the config's
        keywords); the target's globals; the sha256 of the kernel's sources as this process runs
        them (Provenance.sha256); and this module, which calls the factory. The builder adds the
        cache format, TileLang's version and the gate's own sources (builder.sources_digest). The
        rest of the adapter (names, threads, the LDS estimate, capabilities, ISA expectations,
        findings) judges the build: an edit there does not relower."""
        chosen = repr(sorted(self.kernel.target_globals.get(self.target, {}).items()))
        return "\0".join(
            (
                self.target,
                self.kernel.provenance.module,
                self.kernel.factory,
                repr(self.problem.args),
                repr(self.cfg.kwargs),
                chosen,
                self.kernel.provenance.sha256(),
                _THIS_MODULE,
            )
        )

    def lowering_input(self):
        """(prim_func, pass_configs): the factory called as the module would for ``target``. A
        @tilelang.jit factory's own function is called, not its get_tir: get_tir caches by argument,
        so a build after one with other target globals would get that one's program."""
        module = load_module(self.kernel)
        factory = getattr(module, self.kernel.factory)
        args, kwargs = self.problem.args, dict(self.cfg.kwargs)
        with _module_globals(module, self.kernel.target_globals.get(self.target, {})):
            try:
                if hasattr(factory, "get_tir"):
                    traced = getattr(getattr(factory, "func", None), "orig_func", None)
                    prim = traced(*args, **kwargs) if traced is not None else None
                    prim = prim if hasattr(prim, "buffer_map") else factory.get_tir(*args, **kwargs)
                    passes = dict(factory.pass_configs or {})
                else:
                    prim, passes = factory(*args, **kwargs), None
            except Exception as exc:
                raise ForeignKernelError(
                    f"{self.name}: {module.__name__}.{self.kernel.factory}(*{args!r}, "
                    f"**{kwargs!r}) raised {type(exc).__name__}: {exc}{raised_at(exc, __file__)}; "
                    f"the adapter at {self.kernel.declared_at} gives problem {self.problem.name}'s "
                    f"args and config {self.cfg.name}'s kwargs: fix them there where the factory "
                    "does not take them"
                ) from exc
        self._check_operand_dtype(prim)
        return prim, passes

    def _check_operand_dtype(self, prim) -> None:
        """An fp8 MFMA expectation names the flavour (gfx942: e4m3fnuz); gfx942's MFMA mnemonics
        do not, so the program's buffers must."""
        want = self.kernel.isa.mfma_input
        dtypes = {str(b.dtype) for b in prim.buffer_map.values()}
        if want and want.startswith("float8") and want not in dtypes:
            raise ForeignKernelError(
                f"{self.name}: ISA expects {want} operands, the program takes {sorted(dtypes)} "
                "(are the adapter's target globals applied?)"
            )


def load_module(kernel: ForeignKernel) -> ModuleType:
    """The kernel's module (its provenance); one that raises at import is an error naming the
    adapter's declaration and the line that raised."""
    provenance = kernel.provenance
    try:
        return provenance.load()
    except Exception as exc:
        if provenance.path is not None:  # a half-run module left behind would load "fine" next
            sys.modules.pop(provenance.module, None)
        raise ForeignKernelError(
            f"{kernel.name}: importing its kernel module {provenance.module} ({provenance.label}) "
            f"raised {type(exc).__name__}: {exc}{raised_at(exc)}; the adapter at "
            f"{kernel.declared_at} names it: make it import here (what it needs installed, or "
            "target_globals for what it reads at import), or name the module that defines "
            f"{kernel.factory!r}"
        ) from exc


@contextlib.contextmanager
def _module_globals(module, values: dict):
    missing = [name for name in values if not hasattr(module, name)]
    if missing:
        raise ForeignKernelError(
            f"{module.__name__} has no {missing}: the adapter's target globals are stale"
        )
    saved = {name: getattr(module, name) for name in values}
    try:
        for name, value in values.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def cases(kernel: ForeignKernel, target: str) -> list[ForeignCase]:
    return [
        ForeignCase.of(kernel, p, c, target)
        for p in kernel.problems
        for c in kernel.configs.get(target, ())
    ]
