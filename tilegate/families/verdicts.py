"""How an adapted kernel's check ends, given its known findings (tilegate.families.spec.Finding).

A finding stands, and the check raises KnownFinding (the strict xfail catches only that), when
the build breaks exactly the finding's rules and is no worse than the finding's ``worst`` figures;
or when a GPU case fails the finding's check in the finding's way (non-finite output for a NaN
finding, a max-error ratio within its worst, the error text of a lowering finding). Anything
else that fails is a plain failure: fixed in part, broken further, or broken another way.
"""

from __future__ import annotations

from tilegate.families.case import KernelBuild
from tilegate.families.spec import Finding, Kernel
from tilegate.gfx942.isa import LDS_PER_CU, IsaReading
from tilegate.gfx942.isa_checks import (
    NARROW_LDS_READS,
    Violation,
    describe,
    load_overlap,
    rules_broken,
)

AT_LEAST = {"waves_per_simd", "load_overlap"}  # lower is worse; every other metric: higher is worse
# the adapter's LDS estimate may be this far from the lowered figure
ESTIMATE_SLACK = 0.10


class KnownFinding(AssertionError):
    """A build or case fails exactly as its known finding says."""


def over_budget(case: KernelBuild, lowered_lds: int) -> list[Violation]:
    """The LDS budget, judged on the lowered figure (TileLang's dynamic shared memory, what a
    launch asks for): a config over a gfx942 workgroup's 64 KiB cannot launch on MI300X, and is
    not built further. The adapter's estimate is named beside it, and decides nothing."""
    if lowered_lds <= LDS_PER_CU:
        return []
    return [
        Violation(
            "lds-budget",
            f"{case.name}: lowered {lowered_lds} B of LDS > {LDS_PER_CU} per workgroup (the "
            f"adapter estimates {case.lds_estimate}): it cannot launch on MI300X, no code object "
            "built",
        )
    ]


def estimate_off(case: KernelBuild, lowered_lds: int) -> list[Violation]:
    """The adapter's LDS estimate against the lowered figure, for every config that lowered: a
    hint further than ESTIMATE_SLACK from it is the adapter's error, to fix there."""
    off = abs(case.lds_estimate - lowered_lds) / max(lowered_lds, 1)
    if off <= ESTIMATE_SLACK:
        return []
    return [
        Violation(
            "lds-estimate",
            f"{case.name}: the adapter estimates {case.lds_estimate} B of LDS, lowered "
            f"{lowered_lds} B: off by {off:.0%} (> {ESTIMATE_SLACK:.0%}); fix the adapter's "
            "lds_estimate (the lowered figure judges the budget)",
        )
    ]


def isa_metrics(case: KernelBuild, lowered_lds: int, report: IsaReading | None) -> dict[str, float]:
    """The figures a finding's ``worst`` may bound; a build stopped after lowering (over the LDS
    budget) has its lowered LDS figure only."""
    found: dict[str, float] = {"lds_bytes": lowered_lds}
    if report is not None:
        found |= {
            "vgpr_spill_count": report.vgpr_spill_count,
            "private_segment_bytes": report.private_segment_bytes,
            "lds_bytes": report.lds_bytes,
            "waves_per_simd": report.occupancy.waves_per_simd,
            "narrow_lds_reads": sum(
                n for p in NARROW_LDS_READS for n in report.histogram(p).values()
            ),
            "load_overlap": load_overlap(report),
            "loads_not_overlapped": report.latency.loads_not_overlapped,
            "barriers_per_iteration": report.latency.barriers,
        }
    return found


def worse_than(finding: Finding, measured: dict[str, float]) -> list[str]:
    bad = []
    for metric, worst in finding.worst:
        value = measured.get(metric)
        if value is None:
            bad.append(f"{metric}: not measured here, the finding bounds it")
        elif (value < worst) if metric in AT_LEAST else (value > worst):
            bad.append(f"{metric} = {value}, the finding admits {worst}")
    return bad


def judge_build(
    kernel: Kernel,
    findings: list[Finding],
    broken: list[Violation],
    measured: dict[str, float],
) -> None:
    known = frozenset().union(*(f.rules for f in findings))
    if known and broken:
        if rules_broken(broken) != known:
            raise AssertionError(
                f"{kernel.name}: the known finding broke {sorted(known)}, now "
                f"{sorted(rules_broken(broken))}:\n{describe(broken)}"
            )
        worse = [w for f in findings for w in worse_than(f, measured)]
        if worse:
            raise AssertionError(
                f"{kernel.name}: worse than its known finding: "
                f"{'; '.join(worse)}\n{describe(broken)}"
            )
        raise KnownFinding(describe(broken))
    assert not broken, describe(broken)


def judge_case(
    kernel: Kernel,
    case: str,
    rule: str,
    message: str,
    *,
    nonfinite: bool = False,
    max_ratio: float = 0.0,
) -> None:
    """A failed GPU check of ``rule``: the known finding, if one covers it in its way; else a
    failure."""
    for f in kernel.findings_for_case(case, rule):
        if rule not in f.rules or (f.nonfinite and not nonfinite):
            continue
        if worse_than(f, {"max_ratio": max_ratio}):
            continue
        raise KnownFinding(message)
    raise AssertionError(message)


def lowering_finding(kernel: Kernel, case: str, rule: str, exc: Exception) -> Finding | None:
    text = f"{type(exc).__name__}: {exc}"
    return next(
        (
            f
            for f in kernel.findings_for_case(case, rule)
            if "lowering" in f.rules and f.error is not None and f.error in text
        ),
        None,
    )
