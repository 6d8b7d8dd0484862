"""Performance tier (opt-in: -m perf): each kernel's speed as a ratio to torch SDPA measured in the
same process (tilegate/harness/perf/child.py), judged against the device's committed baseline
(suite/baselines/perf/<device>.json; record one with --update-perf-baseline). The table, the
JSON record and a chart go to artifacts/perf/. Speed is measured here, never asserted by a timed
test elsewhere.
"""

import subprocess
import sys

import pytest

from tilegate.harness.perf import driver as perf
from tilegate.paths import REPO_ROOT
from tilegate.report import PERF_DIR


def gpu_perf(test):
    """The perf tier's marks: opt-in, GPU, one worker for every perf test (they share the runs)."""
    for mark in (pytest.mark.perf, pytest.mark.gpu, pytest.mark.deadline(2400), pytest.mark.xdist_group("perf")):
        test = mark(test)
    return test


@pytest.fixture(scope="session")
def perf_runs(request, artifacts_dir):
    """The healthy workload's runs: one, or two when recording a baseline (their spread is the noise)."""
    out = artifacts_dir / PERF_DIR
    times = 2 if request.config.getoption("--update-perf-baseline") else 1
    runs = [perf.run_child(out / f"perf-{i}.log") for i in range(times)]
    perf.write_artifacts(runs, out)
    return runs


@gpu_perf
def test_speed_ratios_within_baseline(request, platform, perf_runs, artifacts_dir):
    print("\n" + "\n".join(perf.table(perf_runs[0])))
    device = platform.device_name or platform.describe()
    if request.config.getoption("--update-perf-baseline"):
        path = perf.update_baseline(device, perf_runs)
        noise = {k: f"{v['noise']:.1%} -> allowed fall {v['tolerance']:.0%}" for k, v in perf.baseline_from(perf_runs).items()}
        print(f"baseline recorded: {path}\n" + "\n".join(f"  {k}: {v}" for k, v in sorted(noise.items())))
        return
    baseline = perf.load_baseline(device)
    if baseline is None:
        pytest.skip(f"no perf baseline for {device}: table in {artifacts_dir / 'perf'}; record one with --update-perf-baseline")
    problems = perf.regressions(perf_runs[0], baseline["records"])
    assert not problems, f"slower than {device}'s baseline:\n" + "\n".join(map(str, problems))


@gpu_perf
def test_planted_slow_variant_is_flagged(platform, perf_runs, artifacts_dir):
    slow = perf.run_child(artifacts_dir / PERF_DIR / "perf-extra_exp.log", "--defect", "extra_exp", "--families", "prefill")
    print("\n" + "\n".join(perf.table(slow)))
    committed = perf.load_baseline(platform.device_name or platform.describe())
    # judged by the committed baseline where there is one, else by this run's healthy figures
    baseline = committed["records"] if committed else perf.baseline_from(perf_runs)
    flagged = [p for p in perf.regressions(slow, baseline) if not p.missing_baseline]
    assert flagged, "the planted extra_exp variant (two more transcendentals per score) passed the perf check"


# The tabulating and judging, on the CPU.

def _doc(ratio: float, spread: float = 0.01) -> dict:
    rec = {"family": "prefill", "case": "3782 causal", "config": "m64n64w4", "ms": 1.0, "peer_ms": ratio,
           "unit": "TFLOP/s", "value": 300.0, "peer_value": 300.0 / ratio, "ratio": ratio, "ratio_spread": spread}
    dec = rec | {"family": "decode", "case": "32x8192", "unit": "GB/s", "value": 3000.0, "peer_value": 3900.0}
    return {"device": "NVIDIA H200", "copy_gbps": 4300.0, "records": [rec, dec], "host": {"eager_us": 40.0, "replay_us": 8.0}}


def test_tolerance_comes_from_the_measured_noise():
    base = perf.baseline_from([_doc(0.80, 0.01), _doc(0.84, 0.02)])
    entry = base["prefill | 3782 causal | m64n64w4"]
    assert entry["noise"] == pytest.approx(0.04 / 0.84)  # between the runs, larger than within either
    assert entry["tolerance"] == pytest.approx(3 * 0.04 / 0.84)
    quiet = perf.baseline_from([_doc(0.80, 0.001), _doc(0.80, 0.001)])["prefill | 3782 causal | m64n64w4"]
    assert quiet["tolerance"] == perf.TOLERANCE_FLOOR


def test_a_fall_past_the_tolerance_is_flagged_and_noise_is_not():
    base = perf.baseline_from([_doc(0.80), _doc(0.80)])  # 5% floor
    assert perf.regressions(_doc(0.78), base) == []
    flagged = perf.regressions(_doc(0.70), base)
    assert [(r.figure, r.value, r.baseline) for r in flagged] == [("ratio", 0.70, 0.80)] * 2, flagged
    assert perf.regressions(_doc(0.8), {})[0].missing_baseline


def test_table_and_chart(tmp_path):
    lines = perf.table(_doc(0.8))
    assert any("70% of copy" in ln for ln in lines) and "graph replay 8 us" in lines[-1]
    assert perf.chart(_doc(0.8), tmp_path / "perf.png").stat().st_size > 1000


def test_the_step_summary_shows_the_perf_table(tmp_path):
    # It once showed perf.json's header fields only (device, torch, copy bandwidth): no kernel, no ratio.
    perf.write_artifacts([_doc(0.8)], tmp_path / PERF_DIR)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "step_summary.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env={})
    assert proc.returncode == 0, proc.stderr
    assert "| prefill | 3782 causal | m64n64w4 | 1.000 | 0.800 | 300 TFLOP/s | 375 | 0.80x | 1.0% |" in proc.stdout
    assert "decode host time per call: eager 40 us, graph replay 8 us" in proc.stdout
    assert f"Chart: `{tmp_path}/perf/perf.png`" in proc.stdout
