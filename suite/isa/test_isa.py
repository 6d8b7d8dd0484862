"""ISA tier: each gfx942 code object is what was meant, and matches its golden snapshot.

One test a rule, named after it (tilegate/gfx942/isa_checks.py, RULES): ``-k fp16_accumulation``
runs that rule on every build, and a failure names the rule, what it holds and what the build
shows."""

import functools
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
from tilegate.gfx942.isa_checks import RULES, KernelIsa, Rule, check_all, describe, rules_broken

GFX942_CASES = cases("gfx942")
ACC16_CASES = fp16_accum_cases("gfx942")


@functools.cache
def _reading(builder, case):
    return builder.isa_reading(case)


def _rule_test(rule: Rule):
    @pytest.mark.parametrize("case", build_params(GFX942_CASES))
    def test(builder, case):
        spec = KERNELS[case.kernel]
        expected = KernelIsa(
            case.shape.dtype, case.shape.head_dim, spec.uses_mfma, spec.wide_global_loads
        )
        broken = rule.check(_reading(builder, case), expected)
        assert not broken, f"{rule.name}: {rule.holds}; {case.name} shows:\n" + describe(broken)

    test.__name__ = test.__qualname__ = f"test_{rule.name}"
    test.__doc__ = f"Every gfx942 build: {rule.holds}."
    return test


for _rule in RULES:
    globals()[f"test_{_rule.name}"] = _rule_test(_rule)


@pytest.mark.parametrize("case", build_params(ACC16_CASES))
def test_fp16_accumulation_variant_is_flagged(builder, artifacts_dir, case):
    report = builder.isa_reading(case)
    write_isa_artifacts(case.name, builder.code_object(case), report, artifacts_dir)
    assert rules_broken(check_all(report, case.shape.dtype)) == {"fp16-accumulation"}


@pytest.mark.parametrize("case", build_params(GFX942_CASES + ACC16_CASES))
def test_matches_golden_snapshot(builder, artifacts_dir, update_golden, golden_reason, case):
    report = _reading(builder, case)
    write_isa_artifacts(case.name, builder.code_object(case), report, artifacts_dir)
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
