"""The ISA rules fail kernels built wrong on purpose: a check that cannot fail is no check."""

from collections import Counter
from dataclasses import replace

import pytest
from suite_helpers import build_params

from tilegate.fixtures import planted_kernels as planted
from tilegate.fixtures.compile_cases import cases
from tilegate.gfx942.isa import IsaReading
from tilegate.gfx942.isa_checks import (
    RULES,
    KernelIsa,
    Violation,
    check_all,
    check_speed_proxies,
    describe,
    rules_broken,
)
from tilegate.gfx942.latency import LatencyProxies
from tilegate.gfx942.toolchain import GFX942_TARGET_ID


# a big build: started first (tilegate/testing/pytest_plugin.py), not left for the end of the run
@pytest.mark.slow
def test_spilling_kernel_is_flagged(builder):
    report = builder.isa_reading(planted.SPILLS)
    assert "spill" in rules_broken(check_all(report, "float16"))
    assert report.vgpr_spill_count > 0 and report.count("scratch_") > 0


# a big build: started first (tilegate/testing/pytest_plugin.py), not left for the end of the run
@pytest.mark.slow
def test_lds_overflow_is_flagged(builder):
    # Passes the pre-compile estimate (exactly 64 KiB of tiles); the real LDS does not fit.
    case = planted.LDS_OVERFLOW
    case.prim_func()  # no ConfigError: only the code object's LDS figure can catch it
    report = builder.isa_reading(case)
    assert report.lds_bytes > 64 * 1024
    assert "lds-budget" in rules_broken(check_all(report, "float16"))


# a big build: started first (tilegate/testing/pytest_plugin.py), not left for the end of the run
@pytest.mark.slow
def test_kernel_without_mfma_is_flagged(builder):
    report = builder.isa_reading(planted.NO_MFMA)
    assert rules_broken(check_all(report, "float16")) == {"mfma"}


FP16_CASE = next(c for c in cases("gfx942") if c.shape.dtype == "float16")


# the worker that builds it anyway (suite_helpers.build_params)
@pytest.mark.xdist_group(f"build-{FP16_CASE.name}")
def test_mfma_of_the_wrong_input_type_is_flagged(builder):
    report = builder.isa_reading(FP16_CASE)
    assert check_all(report, "float16") == []
    assert rules_broken(check_all(report, "bfloat16")) == {"mfma"}


# a big build: started first (tilegate/testing/pytest_plugin.py), not left for the end of the run
@pytest.mark.slow
def test_slow_tile_layout_breaks_the_speed_proxies(builder):
    report = builder.isa_reading(planted.SLOW_LAYOUT)
    assert check_all(report, "float16") == []  # a correct kernel: only the speed proxies see it
    assert rules_broken(check_speed_proxies(report, 128)) == {
        "lds-read-width",
        "waves-per-simd",
        "load-overlap",
    }


@pytest.mark.parametrize("case", build_params(planted.LOAD_THEN_WAIT))
def test_load_then_wait_order_breaks_the_overlap_proxy(builder, case):
    """Without the register prefetch each key block's loads are waited for before any MFMA issues:
    a correct kernel that only the overlap proxy sees."""
    report = builder.isa_reading(case)
    assert check_all(report, "float16") == []
    assert rules_broken(check_speed_proxies(report, 128)) == {"load-overlap"}
    assert report.latency.loads_not_overlapped == report.latency.loads > 0


def _report(**instructions: int) -> IsaReading:
    """A code object that breaks no rule but what ``instructions`` make it break."""
    return IsaReading(
        target_id=f"amdgcn-amd-amdhsa--{GFX942_TARGET_ID}",
        elf_flags="0x54c, gfx942, xnack-, sramecc+",
        code_object_version=5,
        wavefront_size=64,
        vgpr_count=128,
        agpr_count=0,
        sgpr_count=32,
        vgpr_spill_count=0,
        sgpr_spill_count=0,
        private_segment_bytes=0,
        uses_dynamic_stack=False,
        static_lds_bytes=0,
        dynamic_lds_bytes=16384,
        threads=256,
        compiler="none",
        inner_loop_cycles=None,
        instructions=Counter(instructions),
    )


def test_a_kernel_excused_128_bit_loads_is_still_held_to_the_sub_dword_rule():
    # The global-load-width rule has two halves, two checks: wide_global_loads=False (a kernel that
    # reads fp32 one element per thread) skips the 128-bit one only.
    assert check_all(_report(v_mfma_f32_16x16x16_f16=8, global_load_dwordx4=4), "float16") == []
    narrow = _report(v_mfma_f32_16x16x16_f16=8, global_load_ushort=2)
    assert check_all(narrow, "float16") == [
        Violation("global-load-width", "global_load_ushort x2"),
        Violation("global-load-width", "no 128-bit global loads"),
    ]
    excused = check_all(narrow, "float16", wide_global_loads=False)
    assert excused == [Violation("global-load-width", "global_load_ushort x2")]
    # as an ISA test's message shows it
    assert describe(excused) == "global-load-width: global_load_ushort x2"


# One reading per rule (RULES, tilegate/gfx942/isa_checks.py), healthy but for what breaks that
# rule: every rule's test (suite/isa/test_isa.py, -k <rule>) can fail, and fails alone.
_HEALTHY = {"v_mfma_f32_16x16x16_f16": 8, "global_load_dwordx4": 4}
BREAKING = {
    "code_object_identity": replace(_report(**_HEALTHY), elf_flags="0x54c, gfx942, xnack+"),
    "no_spills": replace(_report(**_HEALTHY), vgpr_spill_count=3),
    "lds_budget": replace(_report(**_HEALTHY), dynamic_lds_bytes=70000),
    "occupancy": replace(_report(**_HEALTHY), threads=1024, vgpr_count=512),
    "mfma": _report(global_load_dwordx4=4),
    "global_load_width": _report(v_mfma_f32_16x16x16_f16=8),
    "fp16_accumulation": replace(
        _report(**_HEALTHY, v_pk_fma_f16=16), loop_instructions=Counter(v_pk_fma_f16=16)
    ),
    "lds_read_width": _report(**_HEALTHY, ds_read_u16=64),
    # one wave a workgroup, and LDS for one workgroup a CU: a quarter of a wave a SIMD
    "waves_per_simd": replace(_report(**_HEALTHY), threads=64, dynamic_lds_bytes=60000),
    "load_overlap": replace(_report(**_HEALTHY), latency=LatencyProxies(4, 2, 1, 0, mfmas=8)),
}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rule_fails_a_code_object_built_to_break_it(rule):
    expected = KernelIsa("float16", 128)
    assert rule.check(_report(**_HEALTHY), expected) == []
    reading = BREAKING[rule.name]
    assert rule.check(reading, expected), f"{rule.name} passed a code object that breaks it"
    others = [r.name for r in RULES if r.name != rule.name and r.check(reading, expected)]
    assert others == FOLLOWS.get(rule.name, []), others


# What breaking one rule breaks with it: LDS past the budget fits no workgroup on a CU, and a CU
# with no workgroup has no waves.
FOLLOWS = {"lds_budget": ["occupancy", "waves_per_simd"], "occupancy": ["waves_per_simd"]}


def test_every_rule_has_a_breaking_code_object():
    assert sorted(BREAKING) == sorted(r.name for r in RULES)
