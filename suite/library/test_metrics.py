"""The judges are judged first: each verdict and detector can fail, on synthetic data."""

import math

import pytest
import torch

from tilegate.references.drift import DriftSeries, fp16_accumulation_flags
from tilegate.references.metrics import errors, judge, loglog_slope


def _ref_and_baseline(seed=0):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(4, 64, 8, 64, generator=g)
    return ref, ref.half()  # rounding to fp16: what a same-precision result costs at least


def test_judge_passes_an_output_as_good_as_the_baseline():
    ref, base = _ref_and_baseline()
    out = (ref + 0.5 * (base.float() - ref)).half()  # a different, no worse, rounding
    assert judge(out, ref, base).passed


def test_judge_fails_five_times_the_baseline_error():
    ref, base = _ref_and_baseline()
    noise = (
        torch.randn(ref.shape, generator=torch.Generator().manual_seed(1))
        * 5
        * (base.float() - ref).abs().mean()
    )
    verdict = judge((ref + noise).half(), ref, base)
    assert not verdict.passed and verdict.mean_ratio > 1


def test_judge_fails_one_wrong_element():
    ref, base = _ref_and_baseline()
    out = base.clone()
    out[0, 0, 0, 0] += 0.25
    assert not judge(out, ref, base).passed


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_judge_fails_non_finite_output(bad):
    ref, base = _ref_and_baseline()
    out = base.clone()
    out[1, 2, 3, 4] = bad
    verdict = judge(out, ref, base)
    assert not verdict.passed and verdict.max_ratio == math.inf


def test_errors_are_relative_to_the_reference_magnitude():
    ref = torch.full((10,), 2.0)
    e = errors(ref + 0.02, ref)
    assert e.mean_rel == pytest.approx(0.01)


def test_loglog_slope_recovers_a_power_law():
    lengths = [1024, 2048, 4096, 8192]
    assert loglog_slope(lengths, [3e-4 * n**0.5 for n in lengths]) == pytest.approx(0.5)


def test_drift_detector_passes_baseline_like_growth_and_flags_faster_growth():
    lengths = (1024, 2048, 4096, 8192, 16384, 32768)
    base = tuple(1e-3 * (n / 1024) ** 0.25 for n in lengths)
    good = DriftSeries("fp32", lengths, tuple(0.6 * b for b in base), base)
    bad = DriftSeries(
        "fp16-acc", lengths, tuple(b * (n / 1024) ** 0.5 for b, n in zip(base, lengths)), base
    )
    assert fp16_accumulation_flags(good) == []
    flags = fp16_accumulation_flags(bad)
    assert flags and "32768 tokens" in flags[-1]
    assert bad.kernel_slope > good.kernel_slope + 0.4
