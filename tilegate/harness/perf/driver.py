"""The perf tier: run tilegate/harness/perf/child.py, tabulate and chart its records, and judge each
kernel's speed ratio to its peer against the device's committed baseline
(suite/baselines/perf/<device>.json).

What is judged is ``ratio`` = peer time / kernel time, both measured in the same process and run:
a shared, noisy machine moves both. The tolerance is each record's own measured noise: when a
baseline is recorded, the child runs twice, and the record allows a fall of
max(TOLERANCE_FLOOR, NOISE_FACTOR x the largest relative spread of its ratio seen between those
runs or within one: ``within_run_noise``). A tolerance must stay under TOLERANCE_CAP, so that a 10%
slowdown (a ratio falling by 9.1%) is seen on every row: a row noisier than that is refused at
recording, naming it, rather than given a tolerance it cannot keep.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT
from tilegate.harness.baseline import BaselineStore, Regression
from tilegate.harness.perf import protocol

BASELINES = BaselineStore(REPO_ROOT / "suite" / "baselines" / "perf", "records")
TOLERANCE_FLOOR, NOISE_FACTOR, TOLERANCE_CAP = 0.04, 2.0, 0.07


class TooNoisy(RuntimeError):
    """A baseline would need a tolerance over TOLERANCE_CAP for some row."""


class PerfRunFailed(RuntimeError):
    """The perf child ended without its JSON line."""


def run_child(log: Path, *args: str, timeout_s: float = 1500) -> dict:
    cmd = protocol.child_command(*args)
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + proc.stderr)
    doc = protocol.read_record(proc.stdout)
    if proc.returncode or doc is None:
        raise PerfRunFailed(
            f"perf child exited {proc.returncode} without its record (log: "
            f"{log}):\n{proc.stderr[-3000:]}"
        )
    return doc


def key(record: dict) -> str:
    return f"{record['phase']} | {record['case']} | {record['config']}"


def table(doc: dict) -> list[str]:
    lines = [
        f"device: {doc['device']}; device-to-device copy {doc['copy_gbps']:.0f} GB/s (read + "
        "write)",
        "",
        "| phase | case | config | ms | peer ms | kernel | peer | ratio | spread |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["records"]:
        extra = f" ({r['value'] / doc['copy_gbps']:.0%} of copy)" if r["unit"] == "GB/s" else ""
        lines.append(
            f"| {r['phase']} | {r['case']} | {r['config']} | {r['ms']:.3f} | {r['peer_ms']:.3f} | "
            f"{r['value']:.0f} {r['unit']}{extra} | {r['peer_value']:.0f} | {r['ratio']:.2f}x | "
            f"{r['ratio_spread']:.1%} |"
        )
    host = doc.get("host") or {}
    if "error" in host:
        lines += ["", f"decode host time per call: not measured ({host['error']})"]
    elif host:
        lines += [
            "",
            f"decode host time per call: eager {host['eager_us']:.0f} us, graph replay "
            f"{host['replay_us']:.0f} us",
        ]
    return lines


def chart(doc: dict, path: Path) -> Path | None:
    """Kernel vs peer, one bar pair per record; None where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    recs = doc["records"]
    fig, ax = plt.subplots(figsize=(max(6, len(recs) * 0.7), 4))
    xs = range(len(recs))
    ax.bar([x - 0.2 for x in xs], [r["ratio"] for r in recs], 0.4, label="kernel / peer speed")
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(
        list(xs),
        [f"{r['phase']}\n{r['case']}\n{r['config']}" for r in recs],
        fontsize=6,
        rotation=90,
    )
    ax.set_ylabel("peer time / kernel time")
    ax.set_title(f"tilegate perf on {doc['device']}")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_artifacts(runs: list[dict], out: Path) -> None:
    """The run's records (perf.json), the first run's table (perf.md: the step summary shows it)
    and chart."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "perf.json").write_text(json.dumps(runs, indent=1))
    (out / "perf.md").write_text("\n".join(table(runs[0])) + "\n")
    chart(runs[0], out / "perf.png")


def load_baseline(device: str) -> dict | None:
    return BASELINES.load(device)


TRIM_FROM_ROUNDS = 5


def within_run_noise(record: dict) -> float:
    """How far a run's ratio moves within the run. The ratio is the median of the rounds' ratios, so
    one stray round (a clock step, a neighbour's burst) does not move it; with TRIM_FROM_ROUNDS or
    more rounds the highest and lowest are left out here too. With fewer (the serving benchmark's
    rounds), or a record without its rounds, the whole spread counts."""
    rounds = sorted(record.get("round_ratios") or ())
    if len(rounds) < TRIM_FROM_ROUNDS:
        return record["ratio_spread"]
    middle = rounds[1:-1]
    return (middle[-1] - middle[0]) / record["ratio"]


def baseline_from(runs: list[dict]) -> dict:
    """Each record's ratio (median of the runs) and tolerance from the noise the runs showed."""
    out = {}
    for k in {key(r) for run in runs for r in run["records"]}:
        seen = [r for run in runs for r in run["records"] if key(r) == k]
        ratios = sorted(r["ratio"] for r in seen)
        mid = ratios[len(ratios) // 2]
        between = (ratios[-1] - ratios[0]) / mid
        noise = max(between, *(within_run_noise(r) for r in seen))
        out[k] = {
            "ratio": mid,
            "noise": noise,
            "tolerance": max(TOLERANCE_FLOOR, NOISE_FACTOR * noise),
        }
    return out


def update_baseline(device: str, runs: list[dict]) -> Path:
    baseline = baseline_from(runs)
    noisy = {k: v for k, v in baseline.items() if v["tolerance"] > TOLERANCE_CAP}
    if noisy:
        raise TooNoisy(
            f"no baseline recorded: these rows' noise needs a tolerance over {TOLERANCE_CAP:.0%}, "
            "so a 10% slowdown could pass:\n"
            + "\n".join(f"  {k}: noise {v['noise']:.1%}" for k, v in sorted(noisy.items()))
        )
    return BASELINES.merge(device, baseline)


def regressions(doc: dict, baseline: dict, owns=None) -> list[Regression]:
    """Every record whose ratio fell below its baseline by more than the record's tolerance, or
    that has no baseline entry; and, where ``owns(key)`` says a baseline row belongs to this run,
    every such row the run did not measure (a peer that stopped importing drops its rows)."""
    bad = []
    for r in doc["records"]:
        base = baseline.get(key(r))
        if base is None:
            bad.append(Regression(key(r), "ratio", r["ratio"], None, ""))
        elif r["ratio"] < base["ratio"] * (1 - base["tolerance"]):
            bad.append(
                Regression(
                    key(r),
                    "ratio",
                    r["ratio"],
                    base["ratio"],
                    f"-{base['tolerance']:.0%}",
                    f"measured noise {base['noise']:.1%}",
                )
            )
    measured = {key(r) for r in doc["records"]}
    for k, base in sorted(baseline.items()):
        if owns is not None and owns(k) and k not in measured:
            bad.append(Regression(k, "ratio", None, base["ratio"], "", "not measured in this run"))
    return bad


def is_serving_key(k: str) -> bool:
    """The serving benchmark's rows (suite/perf/test_serving_bench.py) share the device's file."""
    return k.startswith("serving | ")


def capped(baseline: dict) -> dict:
    """``baseline`` with every tolerance at most TOLERANCE_CAP: the planted slowdown is judged by
    the bound a recorded baseline may hold, also against a run's own healthy figures."""
    return {k: v | {"tolerance": min(v["tolerance"], TOLERANCE_CAP)} for k, v in baseline.items()}
