"""Performance tier (opt-in: -m perf): each kernel's speed as a ratio to torch SDPA measured in the
same process (tilegate/harness/perf/child.py), judged against the device's committed baseline
(suite/baselines/perf/<device>.json; record one with --update-perf-baseline). The table, the
JSON record and a chart go to artifacts/perf/. Speed is measured here, never asserted by a timed
test elsewhere.
"""

import pytest

from tilegate.artifacts.writer import PERF_DIR
from tilegate.harness.perf import driver as perf
from tilegate.testing import skips


def gpu_perf(test):
    """The perf tier's marks: opt-in, GPU, one worker for every perf test (they share the runs)."""
    for mark in (pytest.mark.gpu, pytest.mark.deadline(2400), pytest.mark.xdist_group("perf")):
        test = mark(test)
    return test


@pytest.fixture(scope="session")
def perf_runs(request, artifacts_dir):
    """The healthy workload's runs: one, or two when recording a baseline (their spread is the
    noise)."""
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
        noise = {
            k: f"{v['noise']:.1%} -> allowed fall {v['tolerance']:.0%}"
            for k, v in perf.baseline_from(perf_runs).items()
        }
        print(
            f"baseline recorded: {path}\n"
            + "\n".join(f"  {k}: {v}" for k, v in sorted(noise.items()))
        )
        return
    baseline = perf.load_baseline(device)
    if baseline is None:
        skips.missing(
            f"no perf baseline for {device}: table in {artifacts_dir / 'perf'}; record one with "
            "--update-perf-baseline"
        )
    problems = perf.regressions(
        perf_runs[0], baseline["records"], owns=lambda k: not perf.is_serving_key(k)
    )
    assert not problems, f"slower than {device}'s baseline:\n" + "\n".join(map(str, problems))


PLANTED_SLOWDOWN = 0.10


@gpu_perf
def test_planted_slowdown_is_flagged_on_every_row(platform, perf_runs, artifacts_dir):
    slow = perf.run_child(
        artifacts_dir / PERF_DIR / "perf-slowdown.log", "--slowdown", str(PLANTED_SLOWDOWN)
    )
    print("\n" + "\n".join(perf.table(slow)))
    committed = perf.load_baseline(platform.device_name or platform.describe())
    # judged by the committed baseline where there is one, else by this run's healthy figures
    baseline = perf.capped(committed["records"] if committed else perf.baseline_from(perf_runs))
    healthy_rows = {perf.key(r) for r in perf_runs[0]["records"]}
    assert healthy_rows and {perf.key(r) for r in slow["records"]} == healthy_rows, (
        "the slow variant's run measured other rows than the healthy run"
    )
    flagged = {p.key for p in perf.regressions(slow, baseline) if not p.missing_baseline}
    missed = [perf.key(r) for r in slow["records"] if perf.key(r) not in flagged]
    assert not missed, (
        f"a planted {PLANTED_SLOWDOWN:.0%} slowdown passed the perf check on:\n" + "\n".join(missed)
    )
