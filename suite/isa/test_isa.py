"""ISA tier: each gfx942 code object is what was meant, and matches its golden snapshot."""

import json

import pytest
import tilelang
from suite_helpers import build_params

from tilegate.artifacts.records import IsaRecord
from tilegate.artifacts.render import to_json
from tilegate.artifacts.writer import write_isa_artifacts
from tilegate.fixtures.compile_cases import cases, fp16_accum_cases
from tilegate.gate.registry import KERNELS
from tilegate.gfx942.golden import (
    REFERENCE_TOOLCHAIN,
    TOOLCHAIN_INDEPENDENT,
    UpdateRefused,
    golden_diff,
    golden_path,
    updated_snapshot,
)
from tilegate.gfx942.isa_checks import check_all, check_speed_proxies, describe, rules_broken

GFX942_CASES = cases("gfx942")
ACC16_CASES = fp16_accum_cases("gfx942")


@pytest.mark.parametrize("case", build_params(GFX942_CASES))
def test_gfx942_isa(builder, artifacts_dir, case):
    report = builder.isa_reading(case)
    write_isa_artifacts(case.name, builder.code_object(case), report, artifacts_dir)
    spec = KERNELS[case.kernel]
    broken = check_all(
        report, case.shape.dtype, uses_mfma=spec.uses_mfma, wide_global_loads=spec.wide_global_loads
    )
    assert not broken, describe(broken)
    slow = check_speed_proxies(report, case.shape.head_dim)
    assert not slow, describe(slow)


@pytest.mark.parametrize("case", build_params(ACC16_CASES))
def test_fp16_accumulation_variant_is_flagged(builder, artifacts_dir, case):
    report = builder.isa_reading(case)
    write_isa_artifacts(case.name, builder.code_object(case), report, artifacts_dir)
    assert rules_broken(check_all(report, case.shape.dtype)) == {"fp16-accumulation"}


@pytest.mark.parametrize("case", build_params(GFX942_CASES + ACC16_CASES))
def test_matches_golden_snapshot(builder, update_golden, golden_reason, case):
    report = builder.isa_reading(case)
    toolchain = builder.code_object(case).toolchain
    path = golden_path(case.name, toolchain.kind, tilelang.__version__)
    # the artifacts' isa/<case>.json
    actual = json.loads(to_json(IsaRecord.from_report(case.name, report)))
    if update_golden:
        try:
            snapshot = updated_snapshot(
                json.loads(path.read_text()) if path.is_file() else None, actual, golden_reason
            )
        except UpdateRefused as refused:
            pytest.fail(f"{path.name} not updated: {refused}")
        if snapshot is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
        return
    fields = None  # every field, against this toolchain's own snapshot
    if not path.is_file():
        # A toolchain with no snapshot yet (ROCm's, on the MI300X runner) is held to what any
        # LLVM must reproduce, against the reference toolchain's snapshot.
        path, fields = (
            golden_path(case.name, REFERENCE_TOOLCHAIN, tilelang.__version__),
            TOOLCHAIN_INDEPENDENT,
        )
    assert path.is_file(), (
        f"no golden ISA snapshot {path}: review this build, then record it with --update-golden"
    )
    diff = golden_diff(json.loads(path.read_text()), actual, fields)
    scope = (
        ""
        if fields is None
        else f" (toolchain-independent fields; {toolchain.kind} has no snapshot of its own)"
    )
    assert not diff, (
        f"ISA changed against {path.name}{scope} (review, then --update-golden):\n" + describe(diff)
    )
