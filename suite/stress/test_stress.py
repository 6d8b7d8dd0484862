"""Stress tier (opt-in: -m stress; run it alone, -n 0): races on the asynchronous paths, which
compute-sanitizer does not see (wgmma reads shared memory through descriptors, cp.async and TMA
write it through the async proxy).

Every kernel and every config of every table the GPU runs that has an asynchronous path
(kernels/configs.py asynchronous_paths) runs on shapes that keep its pipeline full
(tilegate/fixtures/stress_cases.py). Its first launch must match FP32 as in the numerics tier;
then REPEATS more launches on the same inputs must match the first bit for bit, alone, and again
with a second stream copying on the GPU (tilegate/harness/stress.py). Planted races in each
asynchronous path of the extend kernel (kernels/paged_extend.py) must be caught.
"""

import os

import pytest
import torch
from suite_helpers import DEVICE, with_configs

from tilegate import runtime
from tilegate.artifacts.records import PLANTED, StressRecord
from tilegate.artifacts.writer import write
from tilegate.fixtures import stress_cases as cases
from tilegate.gate.builds import phase_builds
from tilegate.gate.planted import PREFETCH_DEFECTS, WARPGROUP_DEFECTS
from tilegate.gate.registry import KERNELS, KernelSpec
from tilegate.harness.stress import CompetingCopies, StressPass, cuda_source_shows, repeat_bitwise
from tilegate.harness.stress_workloads import workload
from tilegate.kernels.configs import EXTEND_TABLES, TARGETS, asynchronous_paths, configs_for
from tilegate.platform import detect, local_target
from tilegate.testing import skips

# Repeats per pass, from the H200 (docs/gpu-tiers.md, "Stress"): the rarest planted race
# (v_read_before_ready) differed in 4 of 300 repeats alone and 12 of 300 beside the copies in its
# worst of 10 runs, so one run of the tier misses it with probability about 1e-7.
# TILEGATE_STRESS_REPEATS may raise it (a rare race being chased), never lower it.
REPEATS = 300
# About 32x the slowest test on the H200 (3.7 s), scaled with the repeats: a pipeline deadlocked on
# an mbarrier is ended, and named, by the watchdog.
DEADLINE_S = 120
HEAD_DIMS = (64, 128)


def repeats() -> int:
    wanted = int(os.environ.get("TILEGATE_STRESS_REPEATS", REPEATS))
    if wanted < REPEATS:
        raise ValueError(
            f"TILEGATE_STRESS_REPEATS={wanted}: the tier's {REPEATS} repeats can be raised, not "
            "lowered"
        )
    return wanted


pytestmark = [pytest.mark.deadline(DEADLINE_S * repeats() / REPEATS)]


def _spec(case: cases.StressCase) -> KernelSpec:
    """The registered kernel a case's family launches first (decode: the split step, the one with
    the key loop)."""
    return KERNELS[phase_builds(case.phase, case.shape)[0].kernel]


def _config_table(marks) -> str:
    return next(m.args[0] for m in marks if m.name == "config_target")


def _asynchronous_params() -> list:
    """Every config with an asynchronous path in a build for some target (gfx942's run lowered
    for sm90 on the H200)."""
    params = []
    for head_dim in HEAD_DIMS:
        for case in cases.stress_cases(head_dim):
            params += [
                p
                for p in with_configs([case], tables=_spec(case).config_tables, phase=case.phase)
                if any(
                    asynchronous_paths(case.phase, p.values[1], built_for) for built_for in TARGETS
                )
            ]
    return params


@pytest.fixture(scope="module")
def competitor():
    copies = CompetingCopies(torch.device(DEVICE))
    yield copies
    del copies.src, copies.dst
    cases.dense_inputs.cache_clear()  # the last case's inputs (a GiB for decode) go with the module
    cases.paged_inputs.cache_clear()


def _stress(
    work, first, name: str, record: dict, competitor: CompetingCopies, artifacts_dir
) -> list[StressPass]:
    """The alone pass, then the competing pass with copies sized to one launch each; both
    recorded."""
    n = repeats()
    alone = repeat_bitwise(work.launch, first, n)
    competitor.calibrate(alone.seconds / alone.repeats)
    shared = repeat_bitwise(work.launch, first, n, competitor)
    for label, p in (("alone", alone), ("copies", shared)):
        write(
            artifacts_dir,
            StressRecord(
                f"{name}-{label}",
                **record,
                competitor=p.competitor,
                repeats=p.repeats,
                differing=p.differing,
                most_elements_differing=p.most_elements_differing,
                seconds=round(p.seconds, 3),
            ),
        )
    return [alone, shared]


def _asynchronous_build(case: cases.StressCase, cfg) -> tuple[str, ...]:
    """The paths the build for this GPU takes (none: a one-line skip); on CUDA each must show in
    its source."""
    paths = asynchronous_paths(case.phase, cfg, local_target())
    if not paths:
        skips.missing(f"{cfg.name} built for {local_target()} has no asynchronous path")
    if detect().kind == "cuda":
        source = runtime.compiled(_spec(case).factory, case.shape, cfg).get_kernel_source()
        missing = [p for p in paths if not cuda_source_shows(p, source)]
        assert not missing, (
            f"{cfg.name} declares {missing}, which its build does not show: the stress tier would "
            "repeat a synchronous kernel (kernels/configs.py asynchronous_paths)"
        )
    return paths


@pytest.mark.gpu
@pytest.mark.parametrize("case, cfg", _asynchronous_params())
def test_every_repeat_matches_the_first_launch(case, cfg, competitor, artifacts_dir, request):
    paths = _asynchronous_build(case, cfg)
    work = workload(case, cfg, DEVICE)
    first = work.launch().clone()
    verdict = work.judge(first)
    assert verdict.passed, f"the first launch is off FP32: {verdict.explain()}"
    record = {
        "kernel": case.phase,
        "config": cfg.name,
        "target": _config_table(request.node.iter_markers()),
        "first_within_bound": True,
    }
    for p in _stress(work, first, request.node.callspec.id, record, competitor, artifacts_dir):
        assert p.differing == 0, (
            f"{p.differing} of {p.repeats} repeats differ from the first launch "
            f"({p.competitor or 'alone'}; up to "
            f"{p.most_elements_differing} elements): a race on {', '.join(paths)}"
        )


# -- planted races: each must be caught (the first launch off FP32, or a repeat off the first) ----


def _planted_params() -> list:
    case = next(c for c in cases.stress_cases(128) if c.phase == "extend")
    wanted = [(d, "sm90", "m192n128w12-ws") for d in WARPGROUP_DEFECTS]
    wanted += [
        (d, target, name)
        for d in PREFETCH_DEFECTS
        for target, name in (("sm90", "m128n128w8-pf"), ("gfx942", "m128n64w4"))
    ]
    params = []
    for defect, target, name in wanted:
        cfg = next(c for c in configs_for(target, 128, EXTEND_TABLES) if c.name == name)
        builds = (
            *phase_builds("extend", case.shape, cfg),
            *phase_builds("extend", case.shape, cfg, defect=defect),
        )
        marks = [
            pytest.mark.builds(*builds),
            pytest.mark.config_target(target),
            pytest.mark.xdist_group(f"extend-{target}-{case.shape.name}-{name}"),
        ]
        test_id = f"{defect.value}-{target}-{name}"
        params.append(pytest.param(case, cfg, defect, id=test_id, marks=marks))
    return params


def _planted_passes(case, cfg, defect, competitor, artifacts_dir, request):
    """(the first launch's verdict against FP32, the two passes), recorded as planted runs."""
    work = workload(case, cfg, DEVICE, defect)
    first = work.launch().clone()
    verdict = work.judge(first)
    record = {
        "kernel": f"{case.phase} ({defect.value})",
        "config": cfg.name,
        "target": _config_table(request.node.iter_markers()),
        "first_within_bound": verdict.passed,
    }
    return verdict, _stress(
        work, first, f"{PLANTED}-{request.node.callspec.id}", record, competitor, artifacts_dir
    )


def _counts(passes) -> str:
    return ", ".join(
        f"{p.differing}/{p.repeats} repeats differing ({p.competitor or 'alone'})" for p in passes
    )


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("case, cfg, defect", _planted_params())
def test_planted_race_is_caught(case, cfg, defect, competitor, artifacts_dir, request):
    verdict, passes = _planted_passes(case, cfg, defect, competitor, artifacts_dir, request)
    assert not verdict.passed or any(p.differing for p in passes), (
        f"planted race {defect} not caught: the first launch within bound ({verdict.explain()}), "
        f"and {_counts(passes)}"
    )


@pytest.mark.gpu
@pytest.mark.rocm
@pytest.mark.parametrize(
    "case, cfg, defect", [p for p in _planted_params() if _config_table(p.marks) == "gfx942"]
)
def test_planted_prefetch_race_makes_repeats_differ_under_rocm(
    case, cfg, defect, competitor, artifacts_dir, request
):
    """The ROCm harness (HIP streams, the bitwise comparison) must see a timing-dependent race.
    The HIP build of this planted kernel also lacks the barriers HIP puts before each cross-wave
    reduction (kernels/paged_extend.py): a wider race than the CUDA one, so its repeats, not the
    FP32 judge, decide."""
    _, passes = _planted_passes(case, cfg, defect, competitor, artifacts_dir, request)
    assert any(p.differing for p in passes), (
        f"planted race {defect}: no repeat differed ({_counts(passes)})"
    )
