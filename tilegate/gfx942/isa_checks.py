"""The ISA gate's rules. Each returns the ways a code object breaks it, as Violations; empty means
pass.

The same functions judge the real configs and the planted bad kernels, so a test that
shows a planted spill being flagged also shows the real configs' check can fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tilegate.gfx942.isa import LDS_PER_CU, IsaReading
from tilegate.gfx942.toolchain import GFX942_TARGET_ID


@dataclass(frozen=True)
class Violation:
    """One way a code object breaks one rule: ``rule`` names it (``spill``, ``mfma``, ...; for a
    golden snapshot, the field that changed), ``detail`` says what the code object shows."""

    rule: str
    detail: str

    # how an assertion message, hence the terminal and the step summary, shows it
    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def describe(violations: list[Violation]) -> str:
    """An assertion's message: one violation a line."""
    return "\n".join(map(str, violations))


# Code object versions an MI300X on ROCm 6.x loads (AMDGPUUsage, "Code Object V4/V5").
LOADABLE_CODE_OBJECT_VERSIONS = (4, 5)
# No gfx942 MFMA accumulates in fp16, so fp16 arithmetic in an attention kernel means
# software fp16 accumulation. v_cvt_pkrtz_f16_f32 / v_cvt_f16_f32 (packing P) are fine.
FP16_ACCUMULATION_SIGNATURE = (
    "v_pk_fma_f16",
    "v_pk_add_f16",
    "v_pk_mul_f16",
    "v_fma_f16",
    "v_fmac_f16",
    "v_mac_f16",
    "v_add_f16",
    "v_mul_f16",
    "v_fma_mixlo_f16",
    "v_fma_mixhi_f16",
)
# Sub-dword global loads: a tile load that lost its vectorisation.
NARROW_GLOBAL_LOADS = (
    "global_load_ubyte",
    "global_load_sbyte",
    "global_load_ushort",
    "global_load_sshort",
    "global_load_short_d16",
    "buffer_load_ushort",
    "buffer_load_ubyte",
    "flat_load_ushort",
)
# gfx942's fp8 is fnuz
MFMA_INPUT_SUFFIX = {"float16": "_f16", "bfloat16": "_bf16", "float8_e4m3fnuz": "_fp8_fp8"}


def check_identity(r: IsaReading) -> list[Violation]:
    bad = []
    if r.target_id != f"amdgcn-amd-amdhsa--{GFX942_TARGET_ID}":
        bad.append(
            Violation(
                "target-id", f"code object targets {r.target_id!r}, MI300X loads {GFX942_TARGET_ID}"
            )
        )
    for token in ("gfx942", "xnack-", "sramecc+"):
        if token not in r.elf_flags:
            bad.append(Violation("target-id", f"ELF flags {r.elf_flags!r} lack {token}"))
    if r.code_object_version not in LOADABLE_CODE_OBJECT_VERSIONS:
        bad.append(
            Violation(
                "target-id",
                f"code object v{r.code_object_version} not in loadable "
                f"{LOADABLE_CODE_OBJECT_VERSIONS}",
            )
        )
    if r.wavefront_size != 64:
        bad.append(Violation("wavefront", f"{r.wavefront_size}, gfx942 runs wave64"))
    return bad


def check_spills(r: IsaReading) -> list[Violation]:
    found = {
        "vgpr_spill_count": r.vgpr_spill_count,
        "sgpr_spill_count": r.sgpr_spill_count,
        "private_segment_bytes": r.private_segment_bytes,
        "scratch instructions": r.count("scratch_"),
        "dynamic stack": int(r.uses_dynamic_stack),
    }
    return [Violation("spill", f"{name} = {n}") for name, n in found.items() if n]


def check_lds(r: IsaReading) -> list[Violation]:
    if r.lds_bytes > LDS_PER_CU:
        return [
            Violation(
                "lds-budget", f"{r.lds_bytes} bytes of LDS, over the {LDS_PER_CU} per workgroup"
            )
        ]
    return []


def check_occupancy(r: IsaReading) -> list[Violation]:
    occ = r.occupancy
    if occ.workgroups_per_cu < 1:
        return [
            Violation(
                "occupancy",
                f"no workgroup fits on a CU (limited by {occ.limited_by}: {occ.limits})",
            )
        ]
    return []


def check_mfma(r: IsaReading, input_dtype: str) -> list[Violation]:
    want = MFMA_INPUT_SUFFIX[input_dtype]
    mfma = r.histogram("v_mfma")
    if not mfma:
        return [
            Violation("mfma", "no v_mfma instruction: the matrix products run on the vector ALU")
        ]
    wrong = {name: n for name, n in mfma.items() if not name.endswith(want)}
    return [
        Violation("mfma", f"{name} x{n} does not take {input_dtype} inputs")
        for name, n in wrong.items()
    ]


def check_narrow_global_loads(r: IsaReading) -> list[Violation]:
    return [
        Violation("global-load-width", f"{name} x{r.instructions[name]}")
        for name in NARROW_GLOBAL_LOADS
        if r.instructions[name]
    ]


def check_wide_global_loads(r: IsaReading) -> list[Violation]:
    if not r.count("global_load_dwordx4") + r.count("buffer_load_dwordx4"):
        return [Violation("global-load-width", "no 128-bit global loads")]
    return []


def check_fp32_accumulation(r: IsaReading) -> list[Violation]:
    """Judged inside the kernel's loops, where an accumulation across key blocks is: an
    epilogue's fused scale and convert (v_fma_mix with a zero addend, acc * (1/l) to fp16) is no
    accumulation."""
    hits = {
        name: r.loop_instructions[name]
        for name in FP16_ACCUMULATION_SIGNATURE
        if r.loop_instructions[name]
    }
    return [Violation("fp16-accumulation", f"{name} x{n}") for name, n in hits.items()]


@dataclass(frozen=True)
class KernelIsa:
    """What a kernel's code object is held to besides the rules every build meets: its inputs'
    dtype and head_dim, whether it does matrix products (a reduction is not asked for MFMA) and
    whether it streams tiles in 128-bit loads (one that reads fp32 one element a thread is not)."""

    input_dtype: str
    head_dim: int
    uses_mfma: bool = True
    wide_global_loads: bool = True


def _global_load_width(r: IsaReading, k: KernelIsa) -> list[Violation]:
    wide = check_wide_global_loads(r) if k.wide_global_loads else []
    return [*check_narrow_global_loads(r), *wide]


def check_all(
    r: IsaReading, input_dtype: str, *, uses_mfma: bool = True, wide_global_loads: bool = True
) -> list[Violation]:
    """Every hard rule (RULES less the speed proxies). A kernel with no matrix product (a
    reduction) is not asked for MFMA, and one that reads fp32 one element per thread is not
    asked for 128-bit loads; no kernel may make sub-dword global loads or accumulate in fp16."""
    k = KernelIsa(input_dtype, 0, uses_mfma, wide_global_loads)
    return [v for rule in RULES if not rule.speed_proxy for v in rule.check(r, k)]


# Speed proxies (the CPU tier has no MI300X to time on): what a CPU can tell about gfx942 speed.
# Sub-dword LDS reads are one
# element per instruction (a B operand read across its rows, for example); with one wave per
# SIMD or fewer, nothing hides the latency of a global load or an MFMA chain; and a load waited for
# before any matrix instruction issues after it leaves the wave idle for the whole trip to memory.
# _d16/_d16_hi forms too
NARROW_LDS_READS = ("ds_read_u8", "ds_read_i8", "ds_read_u16", "ds_read_i16")
MIN_WAVES_PER_SIMD = {64: 2.0, 128: 1.0}  # by head_dim


def check_lds_read_width(r: IsaReading) -> list[Violation]:
    return [
        Violation("lds-read-width", f"{name} x{n}")
        for prefix in NARROW_LDS_READS
        for name, n in r.histogram(prefix).items()
    ]


def check_waves_per_simd(r: IsaReading, head_dim: int) -> list[Violation]:
    return check_min_waves(r, MIN_WAVES_PER_SIMD[head_dim], f"head_dim {head_dim}")


def check_min_waves(r: IsaReading, want: float, what: str) -> list[Violation]:
    """``want``: the floor (an adapted kernel's adapter declares its own); ``what`` names whose
    floor it is."""
    occ = r.occupancy
    if occ.waves_per_simd < want:
        return [
            Violation(
                "waves-per-simd",
                f"{occ.waves_per_simd} at {what}, want >= {want} "
                f"(limited by {occ.limited_by}: {occ.limits} workgroups per CU)",
            )
        ]
    return []


def check_load_overlap(r: IsaReading) -> list[Violation]:
    """Every global load of the inner loop has an MFMA issued before its wait
    (tilegate/gfx942/latency.py): the next K/V tile is in flight while this one's matrix products
    run."""
    p = r.latency
    if p.loads_not_overlapped:
        return [
            Violation(
                "load-overlap",
                f"{p.loads_not_overlapped} of the inner loop's {p.loads} global loads "
                "are waited for (s_waitcnt vmcnt) before any MFMA issues after them",
            )
        ]
    return []


# Latency expectations at the gate's own standard, for an adapter to declare: every load of the
# inner loop overlapped (check_load_overlap), and no more barriers an iteration than the most of
# any gfx942 kernel the gate ships (paged decode n64w4s8, whose row reductions cross 4 waves;
# docs/isa.md; suite/library/test_latency.py holds it to the golden snapshots).
OWN_MIN_LOAD_OVERLAP = 1.0
OWN_MAX_BARRIERS = 13


def load_overlap(r: IsaReading) -> float:
    """The share of the inner loop's loads (global and scratch) with an MFMA issued before their
    wait (1.0 where the loop has none, or there is no loop). Exact: a floor of 1.0 fails on one
    load in thousands."""
    p = r.latency
    return 1.0 if not p.loads else 1 - p.loads_not_overlapped / p.loads


def has_key_loop(r: IsaReading, mfma: bool) -> bool:
    """Whether the code object has the loop the latency proxies describe: an inner loop, and
    (``mfma``: the kernel does matrix products) one that issues MFMAs. inner_loop takes a loop
    without MFMA only where none has any: the key loop unrolled, an index or copy loop left."""
    return r.latency.has_loop and not (mfma and r.latency.mfmas == 0)


def no_inner_loop(r: IsaReading, expectation: str, what: str, *, mfma: bool) -> list[Violation]:
    """An expectation on the inner loop, where the code object has none (or, ``mfma``, none with
    an MFMA): it cannot be judged, and is a violation, not a pass on figures of no key loop (as
    a golden figure that is gone, golden.cycles_rise, is one)."""
    if has_key_loop(r, mfma):
        return []
    found = (
        "a loop, but none that issues an MFMA: the key loop is not one"
        if r.latency.has_loop
        else "no inner loop (no backward branch; tilegate/gfx942/inner_loop.py)"
    )
    return [
        Violation(
            "inner-loop",
            f"{expectation} cannot be judged at {what}: its gfx942 code object has {found}, so "
            "there is nothing to measure: find why the build has no key loop; where the compiler "
            "unrolled a loop of one or two trips, declare the build in "
            "IsaExpectations.without_loop",
        )
    ]


def check_without_loop(r: IsaReading, what: str, *, mfma: bool) -> list[Violation]:
    """A build its adapter declares without a key loop (IsaExpectations.without_loop), and so
    spares the latency expectations: one that has one is a violation, so that they judge it."""
    if not has_key_loop(r, mfma):
        return []
    return [
        Violation(
            "inner-loop",
            f"{what} is declared without an inner loop (IsaExpectations.without_loop), and its "
            "gfx942 code object has one: take it out of without_loop, so that the latency "
            "expectations judge it",
        )
    ]


def check_min_load_overlap(
    r: IsaReading, floor: float, what: str, *, mfma: bool = False
) -> list[Violation]:
    """An adapted kernel's floor on load overlap (its adapter's; the gate's own kernels are held to
    every load, check_load_overlap). ``what`` names whose floor it is. No inner loop: a violation
    (no_inner_loop)."""
    if missing := no_inner_loop(r, f"min_load_overlap {floor}", what, mfma=mfma):
        return missing
    share, p = load_overlap(r), r.latency  # shown rounded down: never as the floor it misses
    if share < floor:
        return [
            Violation(
                "load-overlap",
                f"{math.floor(share * 1000) / 1000} at {what}, want >= {floor}: "
                f"{p.loads_not_overlapped} of the inner loop's {p.loads} loads (global and "
                "scratch) are waited for (s_waitcnt vmcnt) before any MFMA issues after them",
            )
        ]
    return []


def check_max_barriers(
    r: IsaReading, ceiling: int, what: str, *, mfma: bool = False
) -> list[Violation]:
    """A ceiling on the inner loop's s_barriers per iteration: each stalls every wave of the
    workgroup until the slowest arrives. No inner loop: a violation (no_inner_loop)."""
    if missing := no_inner_loop(r, f"max_barriers_per_iteration {ceiling}", what, mfma=mfma):
        return missing
    barriers = r.latency.barriers
    if barriers > ceiling:
        return [
            Violation(
                "barriers",
                f"{barriers} s_barrier per iteration of the inner loop at {what}, want <= "
                f"{ceiling}",
            )
        ]
    return []


def check_speed_proxies(r: IsaReading, head_dim: int) -> list[Violation]:
    k = KernelIsa("", head_dim)
    return [v for rule in RULES if rule.speed_proxy for v in rule.check(r, k)]


@dataclass(frozen=True)
class Rule:
    """One rule of the ISA tier: ``name`` is its test's (``-k fp16_accumulation`` selects exactly
    it, suite/isa/test_isa.py), ``holds`` what a code object must show, ``check`` the ways one
    breaks it. A speed proxy is what a CPU can tell of gfx942 speed; the others are hard rules."""

    name: str
    holds: str
    check: Callable[[IsaReading, KernelIsa], list[Violation]]
    speed_proxy: bool = False


RULES = (
    Rule(
        "code_object_identity",
        "built for gfx942:sramecc+:xnack- (what MI300X loads), wave64, a loadable version",
        lambda r, k: check_identity(r),
    ),
    Rule("no_spills", "no register spills, scratch or dynamic stack", lambda r, k: check_spills(r)),
    Rule("lds_budget", "LDS within gfx942's 64 KiB a workgroup", lambda r, k: check_lds(r)),
    Rule("occupancy", "at least one workgroup fits on a CU", lambda r, k: check_occupancy(r)),
    Rule(
        "mfma",
        "matrix products on MFMA instructions that take the kernel's input dtype",
        lambda r, k: check_mfma(r, k.input_dtype) if k.uses_mfma else [],
    ),
    Rule(
        "global_load_width",
        "no sub-dword global loads; 128-bit loads where the kernel streams tiles",
        _global_load_width,
    ),
    Rule(
        "fp16_accumulation",
        "no fp16 arithmetic: every sum accumulates in fp32 (no gfx942 MFMA accumulates in fp16)",
        lambda r, k: check_fp32_accumulation(r),
    ),
    Rule(
        "lds_read_width",
        "no sub-dword LDS reads (each is one element an instruction)",
        lambda r, k: check_lds_read_width(r),
        speed_proxy=True,
    ),
    Rule(
        "waves_per_simd",
        "enough waves a SIMD to hide latency (MIN_WAVES_PER_SIMD by head_dim)",
        lambda r, k: check_waves_per_simd(r, k.head_dim),
        speed_proxy=True,
    ),
    Rule(
        "load_overlap",
        "every global load of the inner loop has an MFMA issued before its wait",
        lambda r, k: check_load_overlap(r),
        speed_proxy=True,
    ),
)


def rules_broken(violations: list[Violation]) -> set[str]:
    return {v.rule for v in violations}
