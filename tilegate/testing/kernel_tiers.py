"""The gate's tiers for kernels it did not write: a test module, collected from the gate's suite
(suite/families/test_kernels.py) and added by the plugin to the run of any project that names
adapted kernels (the ``tilegate.kernels`` entry points, ``--tilegate-kernels``,
``tilegate_kernels``).

  provenance    the package and version (or file) are there, the factory is, the source's sha256
  capabilities  each value of the gate's axes the kernel leaves out is a named skip; each it
                declares is built by some problem or run by some case
  compile       gfx942 lowering and code object per problem x config; a config whose lowered LDS
                is over the budget is an error, and no code object is built; the adapter's
                estimate (a hint, deciding nothing) must be within 10% of the lowered figure;
                the code object launches the threads the config declares
  isa           the hard rules and the speed proxies against the adapter's ISA expectations
  numerics      (GPU) the family's cases (sparse-mla, dense, paged: spec.FAMILIES) against FP32,
                relative to plain torch in the same precision: the worst of 3 launches, which
                must agree bit for bit, and nothing written outside the output
  determinism   (GPU) two runs of one case give the same bits
  sanitize      (GPU, opt-in) memcheck over the family's cases, racecheck and initcheck over a few
A known finding (the adapter's Finding) is a strict expected failure: it must break exactly its
rules, so it stays visible, and the run turns red when it is fixed (or when anything else breaks).
"""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest
import torch

from tilegate.artifacts.records import KernelSourceRecord
from tilegate.artifacts.writer import record_numerics, write, write_isa_artifacts
from tilegate.families import gpu
from tilegate.families.case import KernelBuild, cases, load_module
from tilegate.families.child import child_cases, chosen_cases
from tilegate.families.discover import discover, origin_of
from tilegate.families.spec import Kernel, KernelDeclarationError
from tilegate.families.verdicts import (
    KnownFinding,
    estimate_off,
    isa_metrics,
    judge_build,
    judge_case,
    lowering_finding,
    over_budget,
)
from tilegate.gfx942.isa import LDS_PER_CU, launch_threads
from tilegate.gfx942.isa_checks import (
    check_all,
    check_lds_read_width,
    check_max_barriers,
    check_min_load_overlap,
    check_min_waves,
    check_without_loop,
)
from tilegate.testing.reproduce import command as reproduce_command
from tilegate.testing.reproduce import current_test_id
from tilegate.testing.skips import missing, nothing_to_run

TARGET = "gfx942"
# The gate's axes: what its families and ISA rules can judge. Values a kernel leaves out are named
# skips.
AXES = {
    "dtype": ("float16", "bfloat16", "float8_e4m3", "v4-fp8"),
    "head_dim": (64, 128, 512, 576),
    "mask": ("causal", "full", "sliding-window", "sparse-topk"),
    "feature": ("sink", "topk-length", "dual-cache"),
}
LAUNCHES = 3  # numerics judges the worst of these launches, and requires them to agree bit for bit
_KERNELS = pytest.StashKey[list]()


def selected(config: pytest.Config) -> list[Kernel]:
    if _KERNELS not in config.stash:
        config.stash[_KERNELS] = discover(
            [*config.getini("tilegate_kernels"), *(config.getoption("tilegate_kernels") or [])]
        )
    return config.stash[_KERNELS]


def _finding_marks(findings) -> list:
    return [
        pytest.mark.xfail(raises=KnownFinding, strict=True, reason=f.reason) for f in findings[:1]
    ]


def _build_param(case: KernelBuild, compiling: bool):
    """The compile test knows one rule, the LDS budget; the ISA test every rule."""
    findings = [
        f
        for f in case.kernel.findings_for(case.problem, case.cfg)
        if not compiling or "lds-budget" in f.rules
    ]
    return pytest.param(
        case,
        marks=[pytest.mark.xdist_group(f"build-{case.name}"), *_finding_marks(findings)],
        id=case.name,
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    kernels = selected(metafunc.config)
    none = [
        nothing_to_run(
            "no adapted kernel named: a tilegate.kernels entry point, "
            "--tilegate-kernels=MODULE or tilegate_kernels in the ini"
        )
    ]
    if "declared_kernel" in metafunc.fixturenames:
        metafunc.parametrize(
            "declared_kernel", [pytest.param(k, id=k.name) for k in kernels] or none
        )
    if "kernel_axis" in metafunc.fixturenames:
        metafunc.parametrize(
            "kernel_axis",
            [
                pytest.param((k, axis, v), id=f"{k.name}-{axis}-{v}")
                for k in kernels
                for axis, values in AXES.items()
                for v in values
            ]
            or none,
        )
    if "kernel_build" in metafunc.fixturenames:
        compiling = metafunc.function.__name__ == "test_kernel_compile"
        metafunc.parametrize(
            "kernel_build",
            [_build_param(c, compiling) for k in kernels for c in cases(k, TARGET)] or none,
        )
    if "kernel_gpu_case" in metafunc.fixturenames:
        if kernels and not any(k.family for k in kernels):
            none = [
                nothing_to_run(
                    "no named adapted kernel has a GPU family (Kernel.family): CPU tiers only"
                )
            ]
        rule = "determinism" if "determinism" in metafunc.function.__name__ else "numerics"
        metafunc.parametrize(
            "kernel_gpu_case",
            [p for k in kernels for c in _gpu_cases(k, rule) for p in _gpu_params(k, c, rule)]
            or none,
        )


def _gpu_cases(kernel: Kernel, rule: str) -> list:
    """The family's cases of a GPU tier: every one for numerics, its DETERMINISM_CASES (each name
    one of its cases, or collecting the tier is an error naming it) for determinism."""
    if rule == "numerics" or not kernel.family:
        return gpu.family_cases(kernel)
    family = kernel.family_module()
    return gpu.named_cases(kernel, family.DETERMINISM_CASES, f"{family.__name__}.DETERMINISM_CASES")


def _gpu_params(kernel: Kernel, case, rule: str) -> list:
    """A GPU case's params, one for each of the kernel's launch options (tilegate.families.own:
    the gate's own kernels run each case with every config of their tables): its findings; the cases
    of one build share an xdist worker, so that the build compiles once; a long case is slow, so
    it starts first; an option from a config table runs where that table's programs run."""
    family = kernel.family_module()
    build = family.build_of(case)
    params = []
    # a case the kernel leaves out is one named skip, whatever its options
    options = (None,) if gpu.feature_missing(kernel, case) else gpu.options(kernel, case)
    for option in options:
        group = "-".join(x for x in (kernel.name, build, option and option.group) if x)
        marks = [
            *_finding_marks(kernel.findings_for_case(case.name, rule)),
            *([pytest.mark.xdist_group(f"kernel-{group}")] if build else []),
            *([pytest.mark.slow] if family.is_slow(case) else []),
        ]
        label = f"{kernel.name}-{case.name}"
        if option is not None:
            label += f"-{option.label}"
            marks += [pytest.mark.builds(*option.builds)] if option.builds else []
            marks += [pytest.mark.config_target(option.target)] if option.target else []
        params.append(pytest.param((kernel, case, option), id=label, marks=marks))
    return params


def _skip_if_missing(kernel: Kernel) -> None:
    if reason := kernel.provenance.missing_reason():
        missing(f"{kernel.name}: {reason}")


@pytest.mark.compile
def test_kernel_provenance(declared_kernel, artifacts_dir):
    _skip_if_missing(declared_kernel)
    module = load_module(declared_kernel)
    assert hasattr(module, declared_kernel.factory), (
        f"{module.__name__} has no {declared_kernel.factory}"
    )
    write(artifacts_dir, KernelSourceRecord.of(declared_kernel))


@pytest.mark.compile
def test_kernel_capabilities(kernel_axis):
    kernel, axis, value = kernel_axis
    if reason := kernel.capabilities.left_out(kernel.name, **{axis: value}):
        missing(reason)
    if axis == "feature":
        feature_of = gpu.features_of(kernel)
        used = [c for c in gpu.family_cases(kernel) if feature_of.get(c.kind) == value]
    elif kernel.problems:  # each declared value is built for gfx942 by some problem
        used = [p for p in kernel.problems if getattr(p, axis) == value]
    else:  # a kernel whose builds another tier judges (own.py): some case of its family runs it
        used = [c for c in gpu.family_cases(kernel) if gpu.case_axes(kernel, c).get(axis) == value]
    assert used, (
        f"{kernel.name} declares {axis} {value!r}, and no problem or case of it exercises that"
    )


@pytest.mark.compile
def test_kernel_compile(builder, kernel_build):
    case = kernel_build
    _skip_if_missing(case.kernel)
    findings = [
        f for f in case.kernel.findings_for(case.problem, case.cfg) if "lds-budget" in f.rules
    ]
    lds = builder.lowered(case).lds_bytes  # lowering only: the budget is judged before a build
    broken = [*estimate_off(case, lds), *over_budget(case, lds)]
    judge_build(case.kernel, findings, broken, isa_metrics(case, lds, None))
    assert not findings, (
        f"{case.name}: its LDS-budget finding no longer holds: lowered {lds} B, within {LDS_PER_CU}"
    )
    obj = builder.code_object(case)
    check_threads(case, obj)
    assert obj.hsaco.is_file()


@pytest.mark.isa
def test_kernel_isa(builder, artifacts_dir, kernel_build):
    kernel, case = kernel_build.kernel, kernel_build
    _skip_if_missing(kernel)
    findings = kernel.findings_for(case.problem, case.cfg)
    lds = builder.lowered(case).lds_bytes
    if over := over_budget(case, lds):
        judge_build(kernel, findings, over, isa_metrics(case, lds, None))
    check_threads(case, builder.code_object(case))
    report = builder.isa_reading(case)
    write_isa_artifacts(case.name, builder.code_object(case), report, artifacts_dir)
    isa = kernel.isa
    broken = check_all(
        report,
        isa.mfma_input or "",
        uses_mfma=isa.mfma_input is not None,
        wide_global_loads=isa.wide_global_loads,
    )
    broken += [
        *check_lds_read_width(report),
        *check_min_waves(
            report,
            isa.waves_floor(case.problem.head_dim),
            f"{case.name} (head_dim {case.problem.head_dim})",
        ),
        *check_latency_proxies(report, isa, case),
    ]
    judge_build(kernel, findings, broken, isa_metrics(case, lds, report))


def check_threads(case: KernelBuild, obj) -> None:
    """The config's threads are the ones its code object launches: the ISA tier counts waves per
    SIMD from them, and the factory takes its own (a keyword in the config's kwargs, or its
    default), which the gate does not read."""
    built = launch_threads(obj)
    if built != case.cfg.threads:
        raise KernelDeclarationError(
            f"{case.name}: config {case.cfg.name} declares threads={case.cfg.threads}, and its "
            f"code object launches {built} (.max_flat_workgroup_size, T.Kernel's threads); the "
            f"adapter at {case.kernel.declared_at}: give the Config the threads the factory "
            "launches (waves per SIMD are counted from them)"
        )


def check_latency_proxies(report, isa, case: KernelBuild) -> list:
    """The adapter's latency expectations, those it declares (None: not judged), on the build's
    inner loop: where there is none they cannot be judged, and fail, unless the adapter declares
    the build without one (isa.without_loop), which then must have none. A kernel that does
    matrix products (isa.mfma_input) is judged on a loop that issues MFMAs: any other is not its
    key loop."""
    what, mfma = case.name, isa.mfma_input is not None
    if (case.problem.name, case.cfg.name) in isa.without_loop:
        return check_without_loop(report, what, mfma=mfma)
    return [
        *(
            check_min_load_overlap(report, isa.min_load_overlap, what, mfma=mfma)
            if isa.min_load_overlap is not None
            else []
        ),
        *(
            check_max_barriers(report, isa.max_barriers_per_iteration, what, mfma=mfma)
            if isa.max_barriers_per_iteration is not None
            else []
        ),
    ]


@pytest.mark.gpu
@pytest.mark.numerics
def test_kernel_numerics(kernel_gpu_case, artifacts_dir):
    from tilegate.references.metrics import judge

    kernel, case, option = kernel_gpu_case
    _skip_if_missing(kernel)
    if reason := gpu.feature_missing(kernel, case):
        missing(reason)
    prepared = gpu.prepare(kernel, case, option=option)
    # before any launch: a kernel that writes its inputs is judged against the inputs it was given
    ref, base = gpu.reference(kernel, prepared), gpu.baseline(kernel, prepared)
    outs = [_run_known(kernel, case.name, "numerics", prepared)] + [
        gpu.run(kernel, prepared) for _ in range(LAUNCHES - 1)
    ]
    verdict = max(
        (judge(out, ref, base, kernel.family_module().AXES) for out in outs),
        key=lambda v: (v.max_ratio, v.mean_ratio),
    )
    # a race that misses one launch shows here
    differ = sum((outs[0] != out).sum().item() for out in outs[1:])
    stray = gpu.stray_writes(kernel, prepared)
    closed = gpu.closed_form_failure(kernel, case, prepared, outs[0], ref)
    verdict = dataclasses.replace(
        verdict, passed=verdict.passed and not differ and not stray and not closed
    )
    verdict = _with_context(verdict, kernel, case, option, artifacts_dir)
    if not verdict.passed:
        message = (
            verdict.explain()
            + (f"\n{differ} outputs differ across {LAUNCHES} launches" if differ else "")
            + (f"\n{stray}" if stray else "")
            + (f"\n{closed}" if closed else "")
        )
        judge_case(
            kernel,
            case.name,
            "numerics",
            message,
            nonfinite=not all(torch.isfinite(o).all() for o in outs),
            max_ratio=verdict.max_ratio,
        )


def _with_context(verdict, kernel: Kernel, case, option, artifacts_dir):
    """``verdict`` with what a kernel engineer acts on (the failing element's site in the tiling,
    where the option gives one, the inputs' seed, the config table, the one command that reruns
    the test), recorded with the test's id and target."""
    test_id, seed = current_test_id(), gpu.seed(kernel, case)
    at, tiles = verdict.failure_index, option and option.tiles
    site = gpu.site(kernel, case, at, tiles) if at is not None and tiles else ""
    target = (option and option.target) or ""
    rerun = f"{reproduce_command(test_id)} --tilegate-kernels={origin_of(kernel)}"
    lines = [
        *([f"site: {site}"] if site else []),
        f"inputs: seed {seed}" + (f"; config table {target}" if target else ""),
        f"reproduce: {rerun}",
    ]
    name = f"{kernel.name}-{case.name}" + (f"-{option.label}" if option else "")
    record_numerics(
        artifacts_dir,
        name,
        gpu.record_dtype(kernel, case),
        verdict,
        test_id=test_id,
        target=target,
        seed=seed,
        site=site,
    )
    return dataclasses.replace(verdict, context="\n".join("  " + line for line in lines))


def _run_known(kernel: Kernel, case: str, rule: str, prepared):
    """The launch; a kernel that does not build, where a finding says so, is that finding."""
    try:
        return gpu.run(kernel, prepared)
    except Exception as exc:
        if lowering_finding(kernel, case, rule, exc):  # its error, and no other
            raise KnownFinding(f"{type(exc).__name__}: {str(exc)[:400]}") from exc
        raise


@pytest.mark.gpu
@pytest.mark.numerics
def test_kernel_determinism(kernel_gpu_case):
    kernel, case, option = kernel_gpu_case
    _skip_if_missing(kernel)
    if reason := gpu.feature_missing(kernel, case):
        missing(reason)
    prepared = gpu.prepare(kernel, case, option=option)
    first = _run_known(kernel, case.name, "determinism", prepared)
    second = gpu.run(kernel, prepared)
    differ = (first != second).sum().item()  # NaN != NaN: a NaN output counts as differing
    if differ:
        judge_case(
            kernel,
            case.name,
            "determinism",
            f"{differ} of {first.numel()} outputs differ between two runs on the same inputs",
        )


# each family's cases per tool: its SANITIZED_CASES
SANITIZERS = ("memcheck", "racecheck", "initcheck")


@pytest.mark.gpu
@pytest.mark.cuda  # compute-sanitizer; MI300X's HIP ASan run of these cases is not written yet
@pytest.mark.sanitize
@pytest.mark.parametrize("tool", SANITIZERS)
def test_kernel_sanitizer(declared_kernel, tool, artifacts_dir, monkeypatch):
    from tilegate.harness.sanitize.driver import run_sanitized

    _skip_if_missing(declared_kernel)
    if declared_kernel.family is None:
        missing(f"{declared_kernel.name}: no GPU family (CPU tiers only)")
    family = declared_kernel.family_module()
    # a name no case carries is an error here, not a skip for want of a case
    wanted, named_by = family.SANITIZED_CASES[tool], f"{family.__name__}.SANITIZED_CASES[{tool!r}]"
    chosen = chosen_cases(declared_kernel, wanted, named_by)
    if not any(gpu.feature_missing(declared_kernel, c) is None for c in chosen):
        missing(f"{declared_kernel.name}: its capabilities leave out every case {tool} runs")
    runnable = child_cases(declared_kernel, wanted, named_by)
    if not runnable:
        pytest.xfail(
            f"{declared_kernel.name}: every case is a known lowering finding here; nothing to "
            "sanitize"
        )
    log = artifacts_dir / "sanitize" / f"{declared_kernel.name}-{tool}.log"
    child = [
        sys.executable,
        "-m",
        "tilegate.families.child",
        origin_of(declared_kernel),
        declared_kernel.name,
        *(c.name for c in runnable),
    ]
    # the child imports the adapter as this process did (pytest's pythonpath ini included)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    result = run_sanitized(tool, [], log, child=child)
    assert result.completed, f"the child did not finish its cases: {log}"
    assert result.errors == 0, (
        f"{tool}: {result.errors} errors over {declared_kernel.name}'s cases: {log}"
    )
