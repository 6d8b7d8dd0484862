"""One build of an adapted kernel: a problem and a tile config for a target, as the builder takes
it (tilegate.gate.builder): a name, the threads it launches, a cache key, and the prim_func to
lower."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from tilegate.families.provenance import source_digest
from tilegate.families.spec import (
    Config,
    Kernel,
    KernelDeclarationError,
    Problem,
    raised_at,
)

# how the factory is called (lowering_input) decides the program too
_THIS_MODULE = source_digest(Path(__file__))


@dataclass(frozen=True)
class KernelBuild:
    kernel: Kernel = field(compare=False, repr=False)
    kernel_name: str
    problem: Problem
    cfg: Config
    target: str

    @classmethod
    def of(cls, kernel: Kernel, problem: Problem, cfg: Config, target: str) -> KernelBuild:
        return cls(kernel, kernel.name, problem, cfg, target)

    @property
    def name(self) -> str:
        return f"{self.kernel_name}-{self.problem.name}-{self.cfg.name}"

    @property
    def threads(self) -> int:
        return self.cfg.threads

    @property
    def lds_estimate(self) -> int:
        estimate = self.kernel.lds_estimate
        assert estimate is not None  # a kernel with problems declares it (Kernel refuses)
        return estimate(self.problem, self.cfg)

    def cache_key(self) -> str:
        """What the lowered code is made from, and nothing else: the target; the kernel's module,
        its factory and the arguments the factory gets (the problem's ``args``, the config's
        keywords); the target's globals and the at_import answers; the sha256 of the kernel's
        sources as this process runs them (Provenance.sha256); and this module, which calls the
        factory. The builder adds the cache format, TileLang's version and the gate's own sources
        (builder.sources_digest). The rest of the adapter (names, threads, the LDS estimate,
        capabilities, ISA expectations, findings) judges the build: an edit there does not
        relower."""
        chosen = repr(sorted(self.kernel.target_globals.get(self.target, {}).items()))
        answered = repr(sorted(self.kernel.at_import.items()))
        return "\0".join(
            (
                self.target,
                self.kernel.provenance.module,
                self.kernel.factory,
                repr(self.problem.args),
                repr(self.cfg.kwargs),
                chosen,
                answered,
                self.kernel.provenance.sha256(),
                _THIS_MODULE,
            )
        )

    def lowering_input(self):
        """(prim_func, pass_configs): the factory called as the module would for ``target``, through
        unwrap_factory: a @tilelang.autotune factory is never tuned, the config is the adapter's."""
        module = load_module(self.kernel)
        factory = getattr(module, self.kernel.factory)
        args, kwargs = self.problem.args, dict(self.cfg.kwargs)
        target_globals = self.kernel.target_globals.get(self.target, {})
        # the at_import answers stand while the factory traces too (a kernel may ask the GPU then),
        # unless the build is for the GPU this process has, which answers for itself
        with _module_globals(module, target_globals), _answers(self.kernel, target=self.target):
            try:
                plain, get_tir, passes = unwrap_factory(factory)
                prim = plain(*args, **kwargs)
                if get_tir is not None and not hasattr(prim, "buffer_map"):
                    prim = get_tir(*args, **kwargs)  # an eager-style jit kernel returns no program
            except Exception as exc:
                raise KernelDeclarationError(
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
        assert self.kernel.isa is not None  # a kernel with problems declares it
        want = self.kernel.isa.mfma_input
        dtypes = {str(b.dtype) for b in prim.buffer_map.values()}
        if want and want.startswith("float8") and want not in dtypes:
            raise KernelDeclarationError(
                f"{self.name}: ISA expects {want} operands, the program takes {sorted(dtypes)} "
                "(are the adapter's target globals applied?)"
            )


def unwrap_factory(factory) -> tuple[Callable, Callable | None, dict | None]:
    """(the plain function, its jit's get_tir or None, pass_configs): the one place the gate looks
    inside TileLang's decorators, so that an adapter names the module attribute as written.

    TileLang 0.1.12 and 0.1.15 wrap the same way (file:line 0.1.15 / 0.1.12):
    - ``@tilelang.autotune(configs=...)`` returns ``AutoTuneImpl(jit_impl=...)``, the
      ``@tilelang.jit`` object below it (tilelang/autotuner/tuner.py:1183 / 1233, its decorator
      :1318 / :1349, which asserts it wraps a JITImpl). Calling it runs the autotuner, which needs a
      GPU (``__call__``, :1267 / :1280). The gate takes ``jit_impl`` and never calls it: the
      adapter's config stands for the tuner's choice, and ``configs`` is not read.
    - ``@tilelang.jit`` returns ``JITImpl(func=JITFunc, pass_configs=...)``
      (tilelang/jit/__init__.py:270 / :258, decorator :638 / :614); ``JITFunc.orig_func`` is the
      decorated function (tilelang/language/eager/builder.py:1618 / :1363). It is called, not
      ``get_tir``: that caches by argument (``p1_cache``, builder.py:1664 / :1409), so a build after
      one with other target globals would get that one's program. ``get_tir`` is for an
      eager-style kernel, whose function returns no prim_func. Its ``pass_configs`` apply.
    - anything else is a plain function returning a prim_func, called as it is.
    """
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl

    if isinstance(factory, AutoTuneImpl):
        factory = factory.jit_impl
    if isinstance(factory, JITImpl):
        plain = getattr(factory.func, "orig_func", None) or factory.get_tir
        return plain, factory.get_tir, dict(factory.pass_configs or {})
    return factory, None, None


def load_module(kernel: Kernel) -> ModuleType:
    """The kernel's module (its provenance), imported with the adapter's ``at_import`` answers; one
    that raises (or exits) at import is an error naming the adapter's declaration and the line that
    raised."""
    provenance = kernel.provenance
    try:
        with _answers(kernel, first_import_only=True):
            return provenance.load()
    except KernelDeclarationError:  # an at_import name that is not there
        raise
    except (Exception, SystemExit) as exc:  # sys.exit() without a GPU: an error, not the run's end
        if provenance.path is not None:  # a half-run module left behind would load "fine" next
            sys.modules.pop(provenance.module, None)
        raise KernelDeclarationError(
            f"{kernel.name}: importing its kernel module {provenance.module} ({provenance.label}) "
            f"raised {type(exc).__name__}: {exc}{raised_at(exc)}; the adapter at "
            f"{kernel.declared_at} names it: make it import here (what it needs installed, or "
            "at_import for what it asks the GPU at import), or name the module that defines "
            f"{kernel.factory!r}"
        ) from exc


@contextlib.contextmanager
def _answers(kernel: Kernel, *, first_import_only: bool = False, target: str = ""):
    """Kernel.at_import, in place while the kernel's module is first imported
    (``first_import_only``) or while its factory traces a build for ``target``, and removed after:
    each dotted name's callable returns its value, whatever it is called with; a name that is not
    callable is set to the value."""
    if (
        not kernel.at_import
        or (first_import_only and kernel.provenance.module in sys.modules)
        or (target and _local_target() == target)
    ):
        yield
        return
    saved = []
    try:
        for dotted, value in kernel.at_import.items():
            owner, name = _owner(kernel, dotted)
            before = getattr(owner, name)
            saved.append((owner, name, before))
            setattr(owner, name, _answering(value) if callable(before) else value)
        yield
    finally:
        for owner, name, before in reversed(saved):
            setattr(owner, name, before)


def _local_target() -> str | None:
    from tilegate.platform import detect  # imports torch: only for an adapter with answers

    return detect().config_target


def _answering(value):
    def answer(*args, **kwargs):
        return value

    return answer


def _owner(kernel: Kernel, dotted: str):
    """(the object holding ``dotted``'s last part, that part): the longest importable module of
    ``dotted``, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:-1]:
                owner = getattr(owner, part)
        except AttributeError:
            break
        if hasattr(owner, parts[-1]):
            return owner, parts[-1]
        break
    raise KernelDeclarationError(
        f"{kernel.name}: at_import names {dotted!r}, which is not there to answer; the adapter at "
        f"{kernel.declared_at} names it: give the full name, as torch.cuda.get_device_name"
    )


@contextlib.contextmanager
def _module_globals(module, values: dict):
    missing = [name for name in values if not hasattr(module, name)]
    if missing:
        raise KernelDeclarationError(
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


def cases(kernel: Kernel, target: str) -> list[KernelBuild]:
    return [KernelBuild.of(kernel, p, c, target) for p, c in kernel.builds(target)]
