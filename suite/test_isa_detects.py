"""The ISA rules fail kernels built wrong on purpose: a check that cannot fail is no check."""

import pytest

from tilegate.fixtures import planted_kernels as planted
from tilegate.fixtures.compile_cases import cases
from tilegate.isa_checks import check_all, check_speed_proxies, rules_broken


@pytest.mark.isa
@pytest.mark.slow  # a big build: started first (conftest.py), not left for the end of the run
def test_spilling_kernel_is_flagged(builder):
    report = builder.isa_report(planted.SPILLS)
    assert "spill" in rules_broken(check_all(report, "float16"))
    assert report.vgpr_spill_count > 0 and report.count("scratch_") > 0


@pytest.mark.isa
@pytest.mark.slow  # a big build: started first (conftest.py), not left for the end of the run
def test_lds_overflow_is_flagged(builder):
    # Passes the pre-compile estimate (exactly 64 KiB of tiles); the real LDS does not fit.
    case = planted.LDS_OVERFLOW
    case.prim_func()  # no ConfigError: only the code object's LDS figure can catch it
    report = builder.isa_report(case)
    assert report.lds_bytes > 64 * 1024
    assert "lds-budget" in rules_broken(check_all(report, "float16"))


@pytest.mark.isa
@pytest.mark.slow  # a big build: started first (conftest.py), not left for the end of the run
def test_kernel_without_mfma_is_flagged(builder):
    report = builder.isa_report(planted.NO_MFMA)
    assert rules_broken(check_all(report, "float16")) == {"mfma"}


FP16_CASE = next(c for c in cases("gfx942") if c.shape.dtype == "float16")


@pytest.mark.isa
@pytest.mark.xdist_group(f"build-{FP16_CASE.name}")  # the worker that builds it anyway (suite_helpers.build_params)
def test_mfma_of_the_wrong_input_type_is_flagged(builder):
    report = builder.isa_report(FP16_CASE)
    assert check_all(report, "float16") == []
    assert rules_broken(check_all(report, "bfloat16")) == {"mfma"}


@pytest.mark.isa
@pytest.mark.slow  # a big build: started first (conftest.py), not left for the end of the run
def test_slow_tile_layout_breaks_the_speed_proxies(builder):
    report = builder.isa_report(planted.SLOW_LAYOUT)
    assert check_all(report, "float16") == []  # a correct kernel: only the speed proxies see it
    assert rules_broken(check_speed_proxies(report, 128)) == {"lds-read-width", "waves-per-simd"}
