"""Hardware counters of the gate's kernels: read with ncu (NVIDIA) or rocprofv3 (ROCm), reduced
to a few figures per kernel x config, and judged against a committed per-device baseline.

Figures (NVIDIA):
  ld_conflicts_per_request  shared-memory bank conflicts per shared load instruction (LSU and
  ldmatrix)
  st_conflicts_per_request  the same for stores
  occupancy_pct             achieved occupancy: active warps as % of the SM's peak
  dram_pct                  DRAM throughput as % of peak (reported for every kernel, judged for
  decode)
Figures (MI300X, rocprofv3; counter definitions from rocprofiler-sdk's counter_defs.yaml, gfx942):
  lds_conflict_cycles_per_instruction  SQ_LDS_BANK_CONFLICT (cycles the LDS stalled on bank
  conflicts) per SQ_INSTS_LDS (LDS instructions issued)
  waves        SQ_WAVES: waves launched (reported, not judged)
  fetch_bytes  FETCH_SIZE (kilobytes fetched from video memory: the gfx942 expression ends
  in /1024) x 1024 (reported, not judged)

Baselines live in suite/baselines/counters/<device>.json, written by --update-counter-baseline.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT
from tilegate.harness.baseline import BaselineStore, Regression
from tilegate.harness.counters import protocol, rocprofv3
from tilegate.harness.counters.dispatches import Dispatch, Launch, ProfilerError, name_launches

BASELINES = BaselineStore(REPO_ROOT / "suite" / "baselines" / "counters", "launches")

NCU_METRICS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "smsp__inst_executed_op_ldsm.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
)
# One pass: rocprofv3 --pmc fails the job if the set cannot be collected at once (its --help and
# docs). Four SQ counters of the SQ block's 8 and FETCH_SIZE's three TCC counters (TCC_BUBBLE,
# TCC_EA0_RDREQ, TCC_EA0_RDREQ_32B) of the TCC block's 4 (aqlprofile gfx9_block_info.h), so one
# pass by that count; `rocprofv3-avail pmc-check` on the MI300X is the check that decides.
ROCPROF_COUNTERS = (
    "SQ_LDS_BANK_CONFLICT",
    "SQ_INSTS_LDS",
    "SQ_WAVES",
    "FETCH_SIZE",
)
ROCPROF_FORMAT = "csv"  # the tool sums each counter's dimension instances itself in the CSV

# How far a figure may move against its baseline before the gate fails, and why that far:
#  - bank conflicts per request depend only on the code and the launch shape: deterministic up to
#    rounding, so 10% (+0.02 absolute, for figures near 0) catches a new conflict pattern;
#  - achieved occupancy and DRAM throughput are sampled while the kernel runs and move a few
#    percent run to run on a shared machine: 15% below the baseline is a real loss.
TOLERANCES = {
    "ld_conflicts_per_request": ("max", 0.10, 0.02),
    "st_conflicts_per_request": ("max", 0.10, 0.02),
    "occupancy_pct": ("min", 0.15, 0.0),
    "dram_pct": ("min", 0.15, 0.0),
    "lds_conflict_cycles_per_instruction": ("max", 0.10, 0.02),  # not yet measured on MI300X
}
JUDGED_DRAM = ("paged_decode_split",)  # bandwidth is the figure of merit for decode only


def find_ncu() -> str | None:
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_profiler(kind: str) -> str | None:
    """Why this machine's profiler cannot run, or None."""
    if kind == "cuda" and find_ncu() is None:
        return (
            "no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin: it reads the NVIDIA "
            "counters"
        )
    if kind == "rocm" and shutil.which("rocprofv3") is None:
        return "no rocprofv3 on PATH: it reads the MI300X counters (ROCm 6.3+: --pmc)"
    return None


class CountersNotReadable(ProfilerError):
    """The profiler runs but may not read counters here (permissions, or a virtualised GPU)."""


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None  # "n/a": the metric does not exist on this GPU


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None:
        return None
    return num / den if den else 0.0


def ncu_figures(metrics: dict) -> dict:
    counted = [
        v
        for k in ("smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_ldsm.sum")
        if (v := metrics.get(k)) is not None
    ]
    loads = sum(counted) if counted else None
    return {
        "ld_conflicts_per_request": _ratio(
            metrics.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"), loads
        ),
        "st_conflicts_per_request": _ratio(
            metrics.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
            metrics.get("smsp__inst_executed_op_shared_st.sum"),
        ),
        "occupancy_pct": metrics.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "dram_pct": metrics.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "time_us": _ratio(metrics.get("gpu__time_duration.sum"), 1000.0),
    }


def parse_ncu_csv(text: str) -> list[Dispatch]:
    """ncu --csv output -> one Dispatch ({metric: value}) per profiled launch, in launch order."""
    start = text.find('"ID","Process ID"')
    if start < 0:
        raise ProfilerError("ncu printed no metrics table")
    kernels: dict[int, str] = {}
    metrics: dict[int, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        if not row.get("ID", "").isdigit():
            continue
        kernels[int(row["ID"])] = row["Kernel Name"]
        metrics.setdefault(int(row["ID"]), {})[row["Metric Name"]] = _number(row["Metric Value"])
    return [Dispatch(i, kernels[i], metrics[i]) for i in sorted(metrics)]


def run_ncu(phase: str, log: Path, timeout_s: float = 900) -> list[Launch]:
    ncu = find_ncu()
    if ncu is None:
        raise ProfilerError("ncu not found on PATH or in /usr/local/cuda/bin")
    cmd = [
        ncu,
        "--csv",
        "--metrics",
        ",".join(NCU_METRICS),
        "--kernel-name",
        f"regex:{protocol.PROFILED}",
        *protocol.child_command(phase),
    ]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(" ".join(cmd) + "\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if "ERR_NVGPUCTRPERM" in proc.stdout + proc.stderr:
        raise CountersNotReadable(
            "ncu may not read GPU counters here (ERR_NVGPUCTRPERM: needs admin or "
            "NVreg_RestrictProfilingToAdminUsers=0)"
        )
    if proc.returncode or not protocol.finished(proc.stdout):
        raise ProfilerError(
            f"ncu run of {phase} failed (exit {proc.returncode}); log {log}:\n{proc.stderr[-3000:]}"
        )
    return name_launches(
        protocol.launch_names(proc.stdout),
        parse_ncu_csv(proc.stdout),
        ncu_figures,
        f"ncu ({phase})",
    )


def rocprof_figures(counters: dict) -> dict:
    """A counter absent from rocprofv3's output gives None for the figures that need it."""
    return {
        "lds_conflict_cycles_per_instruction": _ratio(
            counters.get("SQ_LDS_BANK_CONFLICT"), counters.get("SQ_INSTS_LDS")
        ),
        "waves": counters.get("SQ_WAVES"),
        # FETCH_SIZE is in kilobytes of 1024 bytes: its gfx942 expression divides bytes by 1024
        "fetch_bytes": None if (kib := counters.get("FETCH_SIZE")) is None else kib * 1024,
    }


def run_rocprof(phase: str, out_dir: Path, timeout_s: float = 900) -> list[Launch]:
    rocprof = shutil.which("rocprofv3")
    if rocprof is None:
        raise ProfilerError("rocprofv3 not found on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.rglob(f"{phase}_{rocprofv3.OUTPUTS[ROCPROF_FORMAT]}"):
        stale.unlink()  # a previous run's file would be read as this run's
    # Flags as rocprofv3.py's argparse defines them (rocm-systems@1b1610fc): --pmc (nargs="*"),
    # --kernel-include-regex, --output-format (csv, json, ...), -d/--output-directory,
    # -o/--output-file; "--" before the application.
    cmd = [
        rocprof,
        "--pmc",
        *ROCPROF_COUNTERS,
        "--kernel-include-regex",
        protocol.PROFILED,
        "--output-format",
        ROCPROF_FORMAT,
        "-d",
        str(out_dir),
        "-o",
        phase,
        "--",
        *protocol.child_command(phase),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    (out_dir / f"{phase}.log").write_text(
        " ".join(cmd) + "\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr
    )
    if proc.returncode or not protocol.finished(proc.stdout):
        raise ProfilerError(
            f"rocprofv3 run of {phase} failed (exit {proc.returncode}); see {out_dir}:\n"
            f"{proc.stderr[-3000:]}"
        )
    return name_launches(
        protocol.launch_names(proc.stdout),
        rocprofv3.read(out_dir, phase, ROCPROF_FORMAT),
        rocprof_figures,
        f"rocprofv3 ({phase})",
    )


def load_baseline(device: str) -> dict | None:
    return BASELINES.load(device)


def update_baseline(device: str, launches: list[Launch]) -> Path:
    """Merge ``launches`` into the device's baseline file (other kernels' entries stay). A judged
    figure the profiler gave no value for is refused: a baseline without it would never judge it."""
    unread = [
        f"{launch.key} {k}"
        for launch in launches
        for k, v in launch.figures.items()
        if k in TOLERANCES and v is None
    ]
    if unread:
        raise ProfilerError(f"no value to record for {unread}: a counter is missing")
    return BASELINES.merge(
        device,
        {
            launch.key: {
                k: v for k, v in launch.figures.items() if k in TOLERANCES and v is not None
            }
            for launch in launches
        },
    )


def regressions(launch: Launch, baseline: dict) -> list[Regression]:
    """What moved past its tolerance against ``baseline`` (the launch's entry)."""
    found = []
    for figure, base in baseline.items():
        if figure not in TOLERANCES or (figure == "dram_pct" and launch.kernel not in JUDGED_DRAM):
            continue
        value = launch.figures.get(figure)
        direction, rel, absolute = TOLERANCES[figure]
        worse = value is None or (
            value > base * (1 + rel) + absolute if direction == "max" else value < base * (1 - rel)
        )
        if worse:
            bound = f"+{rel:.0%} +{absolute}" if direction == "max" else f"-{rel:.0%}"
            found.append(Regression(launch.key, figure, value, base, bound))
    return found


def table(launches: list[Launch]) -> list[str]:
    """A markdown table of every launch's figures."""
    names = sorted({k for launch in launches for k in launch.figures})
    lines = ["| kernel | config | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for launch in launches:
        cells = [("n/a" if (v := launch.figures.get(n)) is None else f"{v:.3g}") for n in names]
        lines.append(f"| {launch.kernel} | {launch.config} | " + " | ".join(cells) + " |")
    return lines
