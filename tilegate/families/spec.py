"""What an adapter declares about a kernel the gate did not write, as typed records.

An adapter module (about 100 lines at most) builds one ``Kernel`` per kernel: where its
source comes from, its factory and tile configs per target, the problems it is built for, what it
can do, what its ISA should show, the findings already known, and (for the GPU tiers) its launcher
and the family of cases and reference it is judged by. The gate's tiers read nothing else.

The records take keywords only, so that an adapter says what each value is:
``IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0)``.
A ``Problem`` and a ``Config`` take their name, a label, first:
``Config("m64n64", kwargs=params(block_m=64, block_n=64), threads=128)``.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import traceback
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NoReturn

from tilegate.families.provenance import Provenance

Params = tuple[tuple[str, Any], ...]  # keyword arguments, hashable and in a fixed order


class KernelDeclarationError(ValueError):
    """An adapter's declaration is inconsistent, or a problem lies outside its capabilities."""


def params(**kwargs: Any) -> Params:
    return tuple(sorted(kwargs.items()))


# The GPU case families a kernel may declare (Kernel.family): name -> the module that holds
# its cases, inputs, reference and baseline, the capability features they exercise (FEATURE_OF),
# and what it refuses in an adapter (refusal). tilegate/families/gpu.py dispatches on this; a family
# is one module beside these.
FAMILIES = {
    "sparse-mla": "tilegate.families.sparse_mla",
    "dense": "tilegate.families.dense",
    "paged": "tilegate.families.paged",
}
# What a finding's ``worst`` may bound (tilegate.families.verdicts): the ISA tier's figures (LDS:
# the lowered figure, never the adapter's estimate) and the numerics tier's max-error ratio.
WORST_METRICS = frozenset(
    {
        "vgpr_spill_count",
        "private_segment_bytes",
        "lds_bytes",
        "narrow_lds_reads",
        "waves_per_simd",
        "load_overlap",
        "loads_not_overlapped",
        "barriers_per_iteration",
        "max_ratio",
    }
)
_NOT_THE_CALLER = {__file__, dataclasses.__file__, "<string>"}  # <string>: a dataclass's __init__


def declaration_site() -> str:
    """``file:line`` of the code that built the record being checked: the adapter's line."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename in _NOT_THE_CALLER:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def raised_at(exc: BaseException, caller: str = "") -> str:
    """`` (raised at file:line)``: where ``exc`` was raised, outside the import machinery and the
    ``caller`` file (the call itself, where the callee refused its arguments); empty where no such
    line is known (a module not found)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (raised at {exc.filename}:{exc.lineno})"
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and f.filename != caller
    ]
    return f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What the kernel takes. Every value of the gate's axes (tilegate.families.axes) left out
    here is a named skip; every value named here must be built by some declared problem."""

    dtypes: tuple[str, ...]  # the KV operand's dtype: "bfloat16", "float8_e4m3"
    head_dims: tuple[int, ...]  # Q.K width (MLA: 576 = 512 latent + 64 rope)
    masks: tuple[str, ...]  # "causal", "full", "sliding-window", "sparse-topk"
    compile_time: tuple[str, ...]  # the problem parameters fixed at build (the rest stay dynamic)
    features: tuple[str, ...] = ()  # optional inputs it takes: "sink", "topk-length"

    def declared(self, axis: str) -> tuple:
        """The values declared on one of the gate's axes: dtype, head_dim, mask, feature."""
        return {
            "dtype": self.dtypes,
            "head_dim": self.head_dims,
            "mask": self.masks,
            "feature": self.features,
        }[axis]

    def left_out(self, kernel_name: str, **values) -> str | None:
        """A named skip for the first of ``values`` (axis=value) these capabilities leave out,
        ``NAME: its capabilities leave out dtype 'float16' (declared: bfloat16)``; or None."""
        for axis, value in values.items():
            declared = self.declared(axis)
            if value not in declared:
                return (
                    f"{kernel_name}: its capabilities leave out {axis} {value!r} (declared: "
                    f"{', '.join(map(str, declared))})"
                )
        return None


@dataclass(frozen=True, kw_only=True)
class IsaExpectations:
    """What the gfx942 code object should show."""

    # the MFMA input dtype ("bfloat16", "float8_e4m3fnuz"); None: no matrix product
    mfma_input: str | None
    wide_global_loads: bool  # 128-bit global loads expected
    # The speed proxy's floor: below it, nothing hides a load's latency. One number for every
    # build, or one per head_dim, as the gate's own kernels have ({64: 2.0, 128: 1.0},
    # tilegate.gfx942.isa_checks.MIN_WAVES_PER_SIMD): a wider head holds more registers a wave.
    min_waves_per_simd: float | dict[int, float]
    # The inner loop's latency proxies, measured as the gate's own kernels' (gfx942/latency.py);
    # None: not judged. The share of its global loads an MFMA issues between the load and its
    # wait (1.0: every load, the gate's own kernels' rule), and its s_barriers per iteration.
    min_load_overlap: float | None = None
    max_barriers_per_iteration: int | None = None
    # The builds with no inner loop, as (problem, config) names: a key loop of one or two trips
    # the compiler unrolled. Their latency expectations are not judged (there is nothing to
    # measure), and such a build that has a loop fails, so that they are judged again. Any other
    # build without a loop fails the expectations declared: they cannot be judged there.
    without_loop: frozenset[tuple[str, str]] = frozenset()

    def __post_init__(self) -> None:
        floor, ceiling = self.min_load_overlap, self.max_barriers_per_iteration
        if self.without_loop and floor is None and ceiling is None:
            raise KernelDeclarationError(
                f"{declaration_site()}: IsaExpectations: without_loop spares builds the latency "
                "expectations, and none is declared (min_load_overlap, "
                "max_barriers_per_iteration): leave it out"
            )
        if floor is not None and not 0.0 <= floor <= 1.0:
            raise KernelDeclarationError(
                f"{declaration_site()}: IsaExpectations: min_load_overlap {floor} is a share of "
                "the inner loop's loads: give one in [0, 1] (1.0: every load overlapped)"
            )
        if ceiling is not None and (not isinstance(ceiling, int) or ceiling < 0):
            raise KernelDeclarationError(
                f"{declaration_site()}: IsaExpectations: max_barriers_per_iteration {ceiling!r} "
                "is a count of s_barriers: give a whole number, 0 or more"
            )

    def waves_floor(self, head_dim: int) -> float:
        floor = self.min_waves_per_simd
        return floor[head_dim] if isinstance(floor, dict) else floor


@dataclass(frozen=True)
class Problem:
    """One compile-time problem: ``args`` go to the factory before the config's keywords."""

    name: str  # the label in test ids: the one field given by position
    _: KW_ONLY
    dtype: str
    head_dim: int
    mask: str
    args: tuple = ()
    # the compile-time sizes by name (heads, topk, ...): capabilities.compile_time
    shape: Params = ()
    # the names of the kernel's configs (Kernel.configs) built for this problem, where a
    # tile config suits one problem only (the tile sizes a kernel picks by head count); None: every
    # config of the target, crossed with every problem
    configs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Config:
    """One tile config: the factory's keyword arguments, and the threads it launches."""

    name: str  # the label in test ids: the one field given by position
    _: KW_ONLY
    kwargs: Params
    threads: int


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A defect the gate already found, run as a strict expected failure (red once it is fixed).
    An ISA finding names the rules (Violation.rule) a build breaks, exactly, for the problems and
    configs named (None: every one); a GPU finding names the family's cases (``cases``) and the
    check they fail: "numerics", "determinism", or "lowering" (the kernel does not build)."""

    rules: frozenset[str]
    reason: str  # one line, with the figures
    problems: frozenset[str] | None = None
    configs: frozenset[str] | None = None
    cases: frozenset[str] | None = None
    tilelang: str | None = None  # only under this TileLang version (None: every one)
    gpu: str | None = None  # only on this kind of GPU, "cuda" or "rocm" (None: every one)
    # The worst the finding admits, so that a kernel that gets worse in its own way is red too:
    # (metric, value) pairs (WORST_METRICS). ISA: vgpr_spill_count, private_segment_bytes,
    # lds_bytes (the lowered figure), narrow_lds_reads, loads_not_overlapped,
    # barriers_per_iteration (at most), waves_per_simd, load_overlap (at least);
    # numerics: max_ratio (at most).
    worst: Params = ()
    # A numerics finding about NaN: it stands only while the failing output is non-finite. A
    # lowering finding: only an error whose text holds this.
    nonfinite: bool = False
    error: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted({metric for metric, _ in self.worst} - WORST_METRICS)
        if unknown:
            hint = (
                ": a finding states its worst lowered figure (lds_bytes), never the adapter's "
                "estimate"
                if "lds_estimate" in unknown
                else ""
            )
            raise KernelDeclarationError(
                f"{declaration_site()}: Finding {self.reason[:60]!r}: worst bounds {unknown}, "
                f"which no tier measures; bound one of {sorted(WORST_METRICS)}{hint}"
            )

    def _here(self) -> bool:
        from tilegate.gate.tilelang_versions import RUNNING

        if self.tilelang is not None and self.tilelang != RUNNING:
            return False
        if self.gpu is not None:
            # imports torch: only for a finding scoped to a GPU
            from tilegate.platform import detect

            return detect().kind == self.gpu
        return True

    def covers(self, problem: str, config: str) -> bool:
        return (
            self.cases is None
            and self._here()
            and (self.problems is None or problem in self.problems)
            and (self.configs is None or config in self.configs)
        )

    def covers_case(self, case: str, rule: str) -> bool:
        """A GPU case's finding on ``rule`` ("numerics", "determinism"); "lowering" covers every
        check."""
        return (
            self.cases is not None
            and case in self.cases
            and self._here()
            and bool(self.rules & {rule, "lowering"})
        )


@dataclass(frozen=True)
class LaunchOption:
    """One way a launcher runs a case, where its kernel has several the gate judges (the gate's own
    kernels: every config of every target's table, a decode's split counts): the GPU tiers run
    each case once with each, handing ``value`` to the launcher as ``inputs.option``."""

    label: str  # in test ids: {kernel}-{case}-{label}
    value: Any
    _: KW_ONLY
    target: str | None = None  # the config table it comes from (skipped where that cannot run)
    tiles: tuple[int, int] | None = None  # (block_m, block_n): a failure's site in the tiling
    builds: tuple = ()  # tilegate.gate.builds.Build: compiled before the run's first test
    # the options that launch one build share it (their tests share an xdist worker, so the build
    # compiles once); default: the label
    build_group: str = ""

    @property
    def group(self) -> str:
        return self.build_group or self.label


@dataclass(frozen=True, kw_only=True)
class Kernel:
    name: str
    provenance: Provenance
    # attribute of the provenance module: a @tilelang.jit function, or one returning a prim_func
    factory: str
    configs: dict[str, tuple[Config, ...]]  # target -> configs, best first
    problems: tuple[Problem, ...]
    capabilities: Capabilities
    # None only without problems: a kernel whose builds another tier judges (the gate's own, by
    # its registry: tilegate/families/own.py)
    isa: IsaExpectations | None
    # bytes: a hint, checked against the lowered figure (within 10%); the lowered figure, never
    # this, decides whether a config fits the LDS budget
    lds_estimate: Callable[[Problem, Config], int] | None
    # Module globals that select the target's code path at build time, where the module picks it at
    # import (is_hip() and the fp8 flavour on a CPU answer for CUDA): target -> {name: value}.
    target_globals: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the kernel's module is answered while it is imported and while its factory traces a
    # build, where it asks the GPU then (a CPU has none; sys.exit() without one):
    # {"torch.cuda.get_device_name": "AMD Instinct MI300X"}. A callable returns the value, any other
    # name is set to it; undone after the import and after each trace.
    at_import: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    # The GPU tiers: the family of cases (FAMILIES), the launcher (its signature is the family's:
    # sparse-mla (module, inputs, stored inputs) -> output, dense (module, inputs) -> output, paged
    # a tilegate.families.paged.Launchers(extend=..., decode=...) of those), and for sparse-mla the
    # KV storage format (tilegate.families.kv_formats), the family's sizes (heads, topk, d_qk, d_v),
    # and a peer kernel for the benchmark ((inputs, stored) -> output). Dense and paged cases take
    # their shapes from the gate's own (tilegate.families.dense, tilegate.families.paged).
    family: str | None = None
    launcher: Callable | None = None
    kv_format: str = "bfloat16"
    gpu_shape: tuple[int, int, int, int] | None = None
    peer: Callable | None = None
    # dense: where capabilities.compile_time fixes a case's sizes (batch, seq_q, seq_k, or seq: one
    # length for Q and K), the factory's args for one case (tilegate.families.per_case.CaseShape ->
    # args); the family builds the kernel per case and hands it to the launcher (inputs.compiled)
    case_args: Callable | None = None
    # dense and paged: the LaunchOptions of one case (the family's Case -> options); None: each case
    # runs once, the launcher choosing how (inputs.option None)
    launch_options: Callable[[Any], tuple[LaunchOption, ...]] | None = None
    # file:line of the adapter code that built this record: every declaration error names it
    declared_at: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "declared_at", declaration_site())
        names = [p.name for p in self.problems]
        if len(set(names)) != len(names):
            self._refuse(f"problem names repeat: {names}")
        for p in self.problems:
            outside = {k for k, _ in p.shape} - set(self.capabilities.compile_time)
            if outside:
                self._refuse(
                    f"problem {p.name} fixes {sorted(outside)}, which its "
                    f"capabilities do not declare compile-time ({self.capabilities.compile_time})"
                )
            for axis, value, declared in (
                ("dtype", p.dtype, self.capabilities.dtypes),
                ("head_dim", p.head_dim, self.capabilities.head_dims),
                ("mask", p.mask, self.capabilities.masks),
            ):
                if value not in declared:
                    self._refuse(
                        f"problem {p.name} has {axis} {value!r}, outside its "
                        f"capabilities {declared}"
                    )
        if self.problems and (self.isa is None or self.lds_estimate is None):
            self._refuse("its problems are built: declare isa and lds_estimate for them")
        self._check_config_names()
        if self.isa is not None:
            self._check_isa(self.isa)
        self._check_gpu_side()

    def _check_isa(self, isa: IsaExpectations) -> None:
        self._check_without_loop(isa)
        floors = isa.min_waves_per_simd
        if isinstance(floors, dict) and set(floors) != {p.head_dim for p in self.problems}:
            self._refuse(
                f"isa.min_waves_per_simd has floors for head_dims {sorted(floors)}, its problems "
                f"build {sorted({p.head_dim for p in self.problems})}: one floor for each, or "
                "one number for every build"
            )

    def _check_gpu_side(self) -> None:
        if self.family is None and (self.launcher is not None or self.gpu_shape is not None):
            self._refuse("a launcher and a gpu_shape are for a GPU family: declare one")
        if self.case_args is not None and self.family != "dense":
            self._refuse("case_args builds the dense family's cases: declare family 'dense'")
        if self.launch_options is not None and self.family not in ("dense", "paged"):
            self._refuse("launch_options are handed to a dense or paged launcher: declare one")
        if self.family is not None and self.family not in FAMILIES:
            self._refuse(
                f"family {self.family!r} has no GPU case set in the gate (families: "
                f"{', '.join(FAMILIES)}); declare one of those, or leave family, launcher and "
                "gpu_shape out for the CPU tiers only"
            )
        if self.family is not None and (why := self.family_module().refusal(self)):
            self._refuse(why)
        self._check_features()

    def _refuse(self, why: str) -> NoReturn:
        raise KernelDeclarationError(f"{self.declared_at}: Kernel {self.name!r}: {why}")

    def _check_config_names(self) -> None:
        """Each config a problem names is one of the kernel's, and each config is built by some
        problem."""
        declared = {c.name for configs in self.configs.values() for c in configs}
        for p in self.problems:
            unknown = sorted(set(p.configs or ()) - declared)
            if unknown or p.configs == ():
                self._refuse(
                    f"problem {p.name} names configs {unknown or '()'}, and its configs are "
                    f"{sorted(declared)}: name some of those, or leave configs out for every one"
                )
        built = {n for p in self.problems for n in (declared if p.configs is None else p.configs)}
        if unbuilt := sorted(declared - built):
            self._refuse(f"configs {unbuilt} are named by no problem: name them, or drop them")

    def _check_without_loop(self, isa: IsaExpectations) -> None:
        """Each build isa.without_loop names is one of the kernel's."""
        built = {(p.name, c.name) for target in self.configs for p, c in self.builds(target)}
        unknown = sorted(set(isa.without_loop) - built)
        if unknown:
            self._refuse(
                f"isa.without_loop names {unknown}, which are not (problem, config) builds of it "
                f"(its builds: {sorted(built)})"
            )

    def _check_features(self) -> None:
        """A feature is an input of the family's GPU cases: each declared must be one a case of
        the family exercises."""
        features = self.capabilities.features
        if not features:
            return
        if self.family is None:
            self._refuse(
                f"capabilities.features {features} are inputs of GPU cases, and it declares no "
                f"family; declare one ({', '.join(FAMILIES)}) or leave the features out"
            )
        exercised = set(self.family_module().FEATURE_OF.values())
        cannot = [f for f in features if f not in exercised]
        if cannot:
            theirs = ", ".join(sorted(exercised)) or "none"
            self._refuse(
                f"capabilities.features declares {cannot}, which no case of family "
                f"{self.family!r} exercises (its features: {theirs}); leave them out"
            )

    def family_module(self) -> Any:
        """The module of its GPU family (FAMILIES; it imports torch): its cases and judge."""
        return importlib.import_module(FAMILIES[str(self.family)])

    def builds(self, target: str) -> list[tuple[Problem, Config]]:
        """(problem, config) per build for ``target``: every config with every problem, except
        where a problem names its own."""
        return [
            (p, c)
            for p in self.problems
            for c in self.configs.get(target, ())
            if p.configs is None or c.name in p.configs
        ]

    def findings_for(self, problem: Problem, config: Config) -> list[Finding]:
        return [f for f in self.findings if f.covers(problem.name, config.name)]

    def findings_for_case(self, case: str, rule: str) -> list[Finding]:
        return [f for f in self.findings if f.covers_case(case, rule)]
