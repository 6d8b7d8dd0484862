"""ISA artifacts per config (code object, listing, metrics JSON), the committed golden
snapshots they are compared with, and the summary table printed at the end of a run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tilegate.codeobj import CodeObject
from tilegate.isa import IsaReport
from tilegate.paths import REPO_ROOT

GOLDEN_ROOT = REPO_ROOT / "suite" / "golden" / "gfx942"
ISA_DIR = "isa"


def snapshot(report: IsaReport) -> dict:
    return {"compiler": report.compiler, **report.metrics()}


def write_isa_artifacts(name: str, obj: CodeObject, report: IsaReport, artifacts: Path) -> Path:
    out = artifacts / ISA_DIR
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(obj.hsaco, out / f"{name}.hsaco")
    shutil.copyfile(obj.listing, out / f"{name}.s")
    path = out / f"{name}.json"
    path.write_text(json.dumps(snapshot(report), indent=1, sort_keys=True) + "\n")
    return path


# The toolchain every commit's CI records snapshots with (scripts/install-gfx942-toolchain.sh).
REFERENCE_TOOLCHAIN = "debian-cross"
# What a kernel's code object shows whichever LLVM built it: the matrix instructions, no
# spills, its LDS (TileLang's figure) and the occupancy they allow. A toolchain with no
# snapshot of its own (ROCm's on the MI300X runner, at first) is held to these.
TOOLCHAIN_INDEPENDENT = ("mfma", "vgpr_spill_count", "sgpr_spill_count", "private_segment_bytes", "scratch",
                         "lds_bytes", "occupancy")


def golden_path(name: str, toolchain_kind: str, tilelang_version: str) -> Path:
    """Snapshots are per toolchain and per TileLang version: each emits different code."""
    return GOLDEN_ROOT / toolchain_kind / f"tilelang-{tilelang_version}" / f"{name}.json"


# The inner loop's llvm-mca estimate is judged by its rise, not by equality: a kernel that got
# cheaper passes. llvm-mca is deterministic for a given code object and toolchain (rebuilds gave
# the same figures), so a rise past this fraction fails the golden test.
CYCLES_FIELD, CYCLES_RISE_LIMIT = "inner_loop_cycles", 0.10


def golden_diff(expected: dict, actual: dict, fields=None) -> list[str]:
    keys = sorted(fields or set(expected) | set(actual))
    diff = [f"{k}: golden {expected.get(k)!r} -> now {actual.get(k)!r}" for k in keys
            if k != CYCLES_FIELD and expected.get(k) != actual.get(k)]
    if CYCLES_FIELD in keys:
        diff += cycles_rise(expected.get(CYCLES_FIELD), actual.get(CYCLES_FIELD))
    return diff


def cycles_rise(golden: float | None, now: float | None) -> list[str]:
    if golden is None or now is None:
        return [] if golden == now else [f"{CYCLES_FIELD}: golden {golden!r} -> now {now!r}"]
    if now > golden * (1 + CYCLES_RISE_LIMIT):
        return [f"{CYCLES_FIELD}: inner loop {golden} -> {now} cycles per iteration "
                f"(+{now / golden - 1:.0%}, over the {CYCLES_RISE_LIMIT:.0%} allowed)"]
    return []


def isa_summary_lines(artifacts: Path) -> list[str]:
    files = sorted((artifacts / ISA_DIR).glob("*.json"))
    if not files:
        return []
    rows = [("config", "VGPR", "AGPR", "LDS B", "WG/CU", "waves/SIMD", "limit", "MFMA", "ds_read_u16", "loop cycles")]
    for f in files:
        m = json.loads(f.read_text())
        occ = m["occupancy"]
        rows.append((f.stem, str(m["vgpr_count"]), str(m["agpr_count"]), str(m["lds_bytes"]),
                     str(occ["workgroups_per_cu"]), f"{occ['waves_per_simd']:.2f}", occ["limited_by"],
                     str(sum(m["mfma"].values())), str(m["lds_reads"].get("ds_read_u16", 0)),
                     str(m.get("inner_loop_cycles"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]


def clear_run_artifacts(artifacts: Path) -> None:
    """Records from an earlier run must not reach this run's summary. A gate run of several
    pytest commands (tox -e rocm) clears once, at its first: the later ones pass --keep-artifacts."""
    for folder in (ISA_DIR, NUMERICS_DIR, MEMORY_DIR, DRIFT_DIR, AGREEMENT_DIR, PERF_DIR, SANITIZE_DIR, COUNTERS_DIR,
                   JUNIT_DIR):
        shutil.rmtree(artifacts / folder, ignore_errors=True)


# --- numerics, memory and drift records: one JSON per check, summarised at the end -----

NUMERICS_DIR, MEMORY_DIR, DRIFT_DIR = "numerics", "memory", "drift"
PERF_DIR, SANITIZE_DIR, COUNTERS_DIR = "perf", "sanitize", "counters"  # the opt-in tiers' tables and logs
JUNIT_DIR = "junit"  # each pytest command's --junitxml under tox (tox.ini): the step summary's verdict


def _write_json(artifacts: Path, folder: str, name: str, data: dict) -> None:
    out = artifacts / folder
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def record_numerics(artifacts: Path, name: str, dtype: str, verdict) -> None:
    _write_json(artifacts, NUMERICS_DIR, name, {
        "dtype": dtype, "passed": verdict.passed, "max_ratio": verdict.max_ratio, "mean_ratio": verdict.mean_ratio,
        "max_err": verdict.kernel.max_abs, "mean_err": verdict.kernel.mean_abs,
        "baseline_max_err": verdict.baseline.max_abs, "baseline_mean_err": verdict.baseline.mean_abs,
    })


def record_memory(artifacts: Path, name: str, io_bytes: int, extra_bytes: int) -> None:
    _write_json(artifacts, MEMORY_DIR, name, {"io_bytes": io_bytes, "extra_bytes_during_call": extra_bytes})


def write_drift(artifacts: Path, name: str, series: list) -> None:
    from tilegate.references.drift import table_lines

    _write_json(artifacts, DRIFT_DIR, name, {"series": [s.as_dict() for s in series], "table": table_lines(series)})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in series:
        ax.loglog(s.lengths, s.kernel_rel_err, "o-", label=f"{s.label} (slope {s.kernel_slope:.2f})")
    ax.loglog(series[0].lengths, series[0].baseline_rel_err, "k--", label=f"plain torch, same dtype (slope {series[0].baseline_slope:.2f})")
    ax.set_xlabel("sequence length")
    ax.set_ylabel("mean |out - ref| / mean |ref|")
    ax.set_title(f"drift vs FP32 reference: {name}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(artifacts / DRIFT_DIR / f"{name}.png", dpi=110)
    plt.close(fig)


def runtime_summary_lines(artifacts: Path) -> list[str]:
    lines = []
    records = [json.loads(f.read_text()) | {"name": f.stem} for f in sorted((artifacts / NUMERICS_DIR).glob("*.json"))]
    for dtype in sorted({r["dtype"] for r in records}):
        rows = [r for r in records if r["dtype"] == dtype]
        worst_max = max(rows, key=lambda r: r["max_ratio"])
        worst_mean = max(rows, key=lambda r: r["mean_ratio"])
        lines.append(f"numerics {dtype}: {len(rows)} checks, {sum(r['passed'] for r in rows)} within bound; "
                     f"worst max-error ratio {worst_max['max_ratio']:.3f} ({worst_max['name']}), "
                     f"worst mean-error ratio {worst_mean['mean_ratio']:.3f} ({worst_mean['name']})  [<= 1 passes]")
    for f in sorted((artifacts / MEMORY_DIR).glob("*.json")):
        m = json.loads(f.read_text())
        lines.append(f"memory {f.stem}: inputs+output {m['io_bytes'] / 2**20:.0f} MiB, "
                     f"allocated during the call {m['extra_bytes_during_call'] / 2**20:.2f} MiB")
    for f in sorted((artifacts / DRIFT_DIR).glob("*.json")):
        lines.append(f"drift {f.stem} (mean error relative to |ref|; 'x base' = ratio to plain torch in the same dtype):")
        lines += ["  " + line for line in json.loads(f.read_text())["table"]]
        lines.append(f"  plot: {f.with_suffix('.png')}")
    return lines


AGREEMENT_DIR = "agreement"


def record_agreement(artifacts: Path, name: str, results: list, table: list[str] | None = None) -> None:
    """``results``: Agreement records (or subclasses); ``table``: their lines, agreement.table_lines' by default."""
    from tilegate.references.agreement import table_lines

    lines = table if table is not None else table_lines(results)
    _write_json(artifacts, AGREEMENT_DIR, name, {"results": [r.as_dict() for r in results], "table": lines})


def agreement_summary_lines(artifacts: Path) -> list[str]:
    lines = []
    for f in sorted((artifacts / AGREEMENT_DIR).glob("*.json")):
        lines.append(f"{f.stem}:")
        lines += ["  " + line for line in json.loads(f.read_text())["table"]]
    return lines
