"""Hardware-counter tier (opt-in: -m counters): shared-memory bank conflicts, achieved occupancy
and, for decode, DRAM throughput per kernel x config, judged against the device's committed baseline
(suite/baselines/counters/<device>.json; record one with --update-counter-baseline).

NVIDIA: ncu. MI300X: rocprofv3 (LDS bank-conflict stall cycles per LDS instruction, waves, fetched
bytes).
The table goes to artifacts/counters/<phase>.md and .json.
"""

import json

import pytest

from tilegate.artifacts.writer import COUNTERS_DIR
from tilegate.gate.registry import PHASES
from tilegate.harness.counters import driver as counters
from tilegate.testing import skips

pytestmark = pytest.mark.deadline(1200)


def _judge(request, platform, launches, artifacts_dir, phase):
    out = artifacts_dir / COUNTERS_DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{phase}.md").write_text("\n".join(counters.table(launches)) + "\n")
    (out / f"{phase}.json").write_text(json.dumps([vars(launch) for launch in launches], indent=1))
    print("\n".join(counters.table(launches)))
    assert launches, f"no {phase} launch was profiled"
    device = platform.device_name or platform.describe()
    if request.config.getoption("--update-counter-baseline"):
        print(f"baseline recorded: {counters.update_baseline(device, launches)}")
        return
    baseline = counters.load_baseline(device)
    if baseline is None:
        skips.missing(
            f"no counter baseline for {device}: table in {out}; record one with "
            "--update-counter-baseline"
        )
    missing = [launch.key for launch in launches if launch.key not in baseline["launches"]]
    assert not missing, (
        f"no baseline entry for {missing}: record them with --update-counter-baseline"
    )
    problems = {
        launch.key: found
        for launch in launches
        if (found := counters.regressions(launch, baseline["launches"][launch.key]))
    }
    assert not problems, f"counters regressed against {device}'s baseline: {problems}"


@pytest.mark.cuda
@pytest.mark.gpu
@pytest.mark.parametrize("phase", sorted(PHASES))
def test_ncu_counters_within_baseline(request, platform, artifacts_dir, phase):
    try:
        launches = counters.run_ncu(phase, artifacts_dir / COUNTERS_DIR / f"ncu-{phase}.log")
    except counters.CountersNotReadable as exc:
        skips.missing(str(exc))
    _judge(request, platform, launches, artifacts_dir, phase)


@pytest.mark.rocm
@pytest.mark.gpu
@pytest.mark.parametrize("phase", sorted(PHASES))
def test_rocprof_counters_within_baseline(request, platform, artifacts_dir, phase):
    launches = counters.run_rocprof(phase, artifacts_dir / COUNTERS_DIR / f"rocprof-{phase}")
    _judge(request, platform, launches, artifacts_dir, phase)


# The parsing and judging, on the CPU.
