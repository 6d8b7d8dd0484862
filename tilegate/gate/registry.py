"""The kernels under test, by name, with the config tables they are built for, and the case
that names one build of one of them.

The compile and ISA tiers build every kernel here for every config of its table. A kernel
states what its ISA should show: the decode combine step is a reduction (no matrix product)
that reads fp32 partials one per thread, so it expects neither MFMA nor 128-bit loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tilegate.gate.planted import CombineDefect, Defect, ExtendDefect, PrefillDefect, knobs_for
from tilegate.kernels.configs import (
    CONFIG_TABLES,
    DECODE_TABLES,
    EXTEND_TABLES,
    TARGETS,
    TileConfig,
)
from tilegate.kernels.flash_fwd import flash_fwd
from tilegate.kernels.paged_decode import paged_decode_combine, paged_decode_split
from tilegate.kernels.paged_extend import paged_extend
from tilegate.kernels.problem import CAUSAL, FULL, AttentionShape, Mask

# The mask variants each kernel implements. Every tier reads its cases from these lists (compile
# and ISA: tilegate.fixtures.compile_cases; numerics, drift, sanitize, stress and perf:
# tilegate.fixtures.shapes), so a variant added here is built, judged and counted by each of them.
PREFILL_MASKS = (CAUSAL, FULL, Mask(causal=True, window=127))
SERVING_MASKS = (CAUSAL,)  # SGLang's extend and decode are causal

# The phases of attention that serving runs, and the kernels each launches, in order: the one name
# for them in the harness children, the precompile builds and the tiers.
PHASES = {
    "prefill": ("flash_fwd",),
    "extend": ("paged_extend",),
    "decode": ("paged_decode_split", "paged_decode_combine"),
}


@dataclass(frozen=True)
class KernelSpec:
    factory: Callable
    config_tables: dict  # target -> head_dim -> configs
    masks: tuple[Mask, ...] = SERVING_MASKS
    uses_mfma: bool = True
    wide_global_loads: bool = True
    one_thread_per_dim: bool = False  # launches head_dim threads, whatever the config says
    defects: type[Defect] | None = None  # its planted defects (tilegate/gate/planted.py)

    def threads(self, shape, cfg) -> int:
        return shape.head_dim if self.one_thread_per_dim else cfg.threads


KERNELS = {
    "flash_fwd": KernelSpec(flash_fwd, CONFIG_TABLES, masks=PREFILL_MASKS, defects=PrefillDefect),
    "paged_extend": KernelSpec(paged_extend, EXTEND_TABLES, defects=ExtendDefect),
    "paged_decode_split": KernelSpec(paged_decode_split, DECODE_TABLES),
    "paged_decode_combine": KernelSpec(
        paged_decode_combine,
        DECODE_TABLES,
        uses_mfma=False,
        wide_global_loads=False,
        one_thread_per_dim=True,
        defects=CombineDefect,
    ),
}


def planted_pass_configs(factory: Callable, defect: Defect | None) -> dict:
    """The pass configs the build of ``factory`` with ``defect`` planted needs ({} when healthy). A
    defect in a factory not registered here is an error: its build could lack what plants it; so is
    one that is not a member of the factory's own enumeration (a plain string included)."""
    if defect is None:
        return {}
    name = getattr(factory, "__name__", repr(factory))
    spec = next((s for s in KERNELS.values() if s.factory is factory), None)
    if spec is None:
        raise ValueError(f"defect {defect!r} planted in {name!r}, which is not in KERNELS")
    # TypeError for a name or another kernel's defect
    return knobs_for(defect, spec.defects, name).pass_configs()


@dataclass(frozen=True)
class KernelCase:
    """One build: a registered kernel (or a planted variant's ``factory``) for a shape, a tile
    config and a target's table."""

    kernel: str
    shape: AttentionShape
    cfg: TileConfig
    target: str
    # default: KERNELS[kernel].factory
    factory: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return f"{self.kernel}-{self.shape.name}-{self.cfg.name}"

    @property
    def threads(self) -> int:
        spec = KERNELS.get(self.kernel)
        return spec.threads(self.shape, self.cfg) if spec else self.cfg.threads

    def cache_key(self) -> str:
        """What the lowering depends on besides TileLang and the kernel sources
        (tilegate.gate.builder): the kernel's name names its factory (a planted variant has its
        own)."""
        return "\0".join((self.target, self.kernel, repr(self.shape), repr(self.cfg)))

    def lowering_input(self):
        """(prim_func, pass_configs) for tilegate.gate.lowering.lower."""
        return self.prim_func(), None

    def prim_func(self):
        self.cfg.validate(TARGETS[self.target], self.shape)  # ConfigError before any compile
        return (self.factory or KERNELS[self.kernel].factory)(self.shape, self.cfg)
