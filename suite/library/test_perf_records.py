"""The perf tier's parts that need no GPU: the tolerance from recorded noise, the regression
verdict, the table, chart and step summary."""

import subprocess
import sys

import pytest

from tilegate.artifacts.writer import PERF_DIR
from tilegate.gate.paths import REPO_ROOT
from tilegate.harness.perf import driver as perf


def _doc(ratio: float, spread: float = 0.01) -> dict:
    rec = {
        "phase": "prefill",
        "case": "3782 causal",
        "config": "m64n64w4",
        "ms": 1.0,
        "peer_ms": ratio,
        "unit": "TFLOP/s",
        "value": 300.0,
        "peer_value": 300.0 / ratio,
        "ratio": ratio,
        "ratio_spread": spread,
    }
    dec = rec | {
        "phase": "decode",
        "case": "32x8192",
        "unit": "GB/s",
        "value": 3000.0,
        "peer_value": 3900.0,
    }
    return {
        "device": "NVIDIA H200",
        "copy_gbps": 4300.0,
        "records": [rec, dec],
        "host": {"eager_us": 40.0, "replay_us": 8.0},
    }


def test_tolerance_comes_from_the_measured_noise():
    base = perf.baseline_from([_doc(0.80, 0.01), _doc(0.82, 0.02)])
    entry = base["prefill | 3782 causal | m64n64w4"]
    # between the runs, larger than within either
    assert entry["noise"] == pytest.approx(0.02 / 0.82)
    assert entry["tolerance"] == pytest.approx(perf.NOISE_FACTOR * 0.02 / 0.82)
    quiet = perf.baseline_from([_doc(0.80, 0.001), _doc(0.80, 0.001)])[
        "prefill | 3782 causal | m64n64w4"
    ]
    assert quiet["tolerance"] == perf.TOLERANCE_FLOOR


def _rounds(doc: dict, ratios: list[float]) -> dict:
    for rec in doc["records"]:
        rec["round_ratios"] = ratios
    return doc


def test_one_stray_round_does_not_set_the_noise_two_do(tmp_path, monkeypatch):
    """The judged ratio is the median of the rounds: one stray round leaves it where it was, so the
    noise leaves out the highest and lowest round. Two stray rounds on one side move the median,
    and then the noise shows it."""
    monkeypatch.setattr(perf, "BASELINES", perf.BaselineStore(tmp_path, "records"))
    one = _rounds(_doc(1.00, 0.045), [1.000, 1.002, 0.955, 0.998, 1.001])  # one round 4.5% low
    assert perf.within_run_noise(one["records"][0]) == pytest.approx(0.003)
    assert perf.update_baseline("NVIDIA H200", [one, one]).exists()
    two = _rounds(_doc(1.00, 0.045), [1.000, 1.002, 0.955, 0.960, 1.001])
    assert perf.within_run_noise(two["records"][0]) == pytest.approx(0.041)
    with pytest.raises(perf.TooNoisy, match=r"noise 4\.1%"):
        perf.update_baseline("NVIDIA H200", [two, two])
    # the serving benchmark's few rounds: every round counts
    few = _rounds(_doc(1.00, 0.045), [1.000, 0.955, 1.001])
    assert perf.within_run_noise(few["records"][0]) == 0.045


def test_a_row_too_noisy_to_see_ten_percent_gets_no_baseline(tmp_path, monkeypatch):
    monkeypatch.setattr(perf, "BASELINES", perf.BaselineStore(tmp_path, "records"))
    with pytest.raises(perf.TooNoisy, match=r"prefill \| 3782 causal \| m64n64w4: noise 5\.9%"):
        perf.update_baseline("NVIDIA H200", [_doc(0.80), _doc(0.85)])
    assert not list(tmp_path.iterdir())
    assert perf.update_baseline("NVIDIA H200", [_doc(0.80), _doc(0.81)]).exists()


@pytest.mark.parametrize("noise", [0.0, 0.01, 0.02, 0.034])
def test_a_ten_percent_slowdown_falls_past_every_tolerance_a_baseline_can_hold(noise):
    # the slow variant takes 1.10x the time: its ratio is 1/1.10 of the healthy one, less a
    # healthy run's own noise
    base = perf.baseline_from([_doc(0.80, noise), _doc(0.80, noise)])
    entry = base["prefill | 3782 causal | m64n64w4"]
    assert entry["tolerance"] <= perf.TOLERANCE_CAP
    slowed = 0.80 / 1.10 * (1 + noise / 2)
    assert len(perf.regressions(_doc(slowed), base)) == 2


def test_a_fall_past_the_tolerance_is_flagged_and_noise_is_not():
    base = perf.baseline_from([_doc(0.80), _doc(0.80)])  # 4% floor
    assert perf.regressions(_doc(0.78), base) == []
    flagged = perf.regressions(_doc(0.70), base)
    assert [(r.figure, r.value, r.baseline) for r in flagged] == [("ratio", 0.70, 0.80)] * 2, (
        flagged
    )
    assert perf.regressions(_doc(0.8), {})[0].missing_baseline


def test_table_and_chart(tmp_path):
    lines = perf.table(_doc(0.8))
    assert any("70% of copy" in ln for ln in lines) and "graph replay 8 us" in lines[-1]
    assert perf.chart(_doc(0.8), tmp_path / "perf.png").stat().st_size > 1000


def test_the_step_summary_shows_the_perf_table(tmp_path):
    # It once showed perf.json's header fields only (device, torch, copy bandwidth): no kernel, no
    # ratio.
    perf.write_artifacts([_doc(0.8)], tmp_path / PERF_DIR)
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "step_summary.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={},
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "| prefill | 3782 causal | m64n64w4 | 1.000 | 0.800 | 300 TFLOP/s | 375 | 0.80x | 1.0% |"
        in proc.stdout
    )
    assert "decode host time per call: eager 40 us, graph replay 8 us" in proc.stdout
    assert f"Chart: `{tmp_path}/perf/perf.png`" in proc.stdout


def test_a_baseline_row_a_run_did_not_measure_is_flagged_where_the_run_owns_it():
    base = perf.baseline_from([_doc(0.80), _doc(0.80)])
    base["serving | batch | tilelang vs triton"] = {"ratio": 1.0, "noise": 0.0, "tolerance": 0.04}
    only_prefill = _doc(0.80)
    only_prefill["records"] = only_prefill["records"][:1]  # the decode row vanished
    missing = perf.regressions(only_prefill, base, owns=lambda k: not perf.is_serving_key(k))
    assert [(r.key, r.value) for r in missing] == [("decode | 32x8192 | m64n64w4", None)]
    assert perf.regressions(only_prefill, base) == []  # no owner given: rows are only judged


def test_the_planted_slowdown_is_judged_with_tolerances_capped():
    noisy = perf.baseline_from([_doc(0.80, 0.05), _doc(0.80, 0.05)])  # 10% tolerance uncapped
    capped = perf.capped(noisy)
    assert {v["tolerance"] for v in capped.values()} == {perf.TOLERANCE_CAP}
    assert len(perf.regressions(_doc(0.80 / 1.10), capped)) == 2
    assert perf.regressions(_doc(0.80 / 1.10), noisy) == []
