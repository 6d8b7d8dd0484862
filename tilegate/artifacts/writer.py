"""What the tiers write to the artifacts folder: per gfx942 build its code object, listing and
IsaRecord; per check its numerics, memory, drift or agreement record
(tilegate/artifacts/records.py, as tilegate/artifacts/render.py renders them); and the clearing
of an earlier run's records."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

# the folders' names too: the tiers that write files of their own import them here
from tilegate.artifacts.records import (
    AGREEMENT_DIR,
    COUNTERS_DIR,
    DRIFT_DIR,
    ISA_DIR,
    JUNIT_DIR,
    KERNEL_SOURCES_DIR,
    MEMORY_DIR,
    NUMERICS_DIR,
    PERF_DIR,
    SANITIZE_DIR,
    STRESS_DIR,
    AgreementRecord,
    DriftRecord,
    IsaRecord,
    MemoryRecord,
    NumericsRecord,
    Record,
)
from tilegate.artifacts.render import to_json

if TYPE_CHECKING:
    from tilegate.gfx942.code_object import CodeObject
    from tilegate.gfx942.isa import IsaReading


def write(artifacts: Path, record: Record) -> Path:
    out = artifacts / record.folder
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{record.name}.json"
    path.write_text(to_json(record))
    return path


def write_isa_artifacts(name: str, obj: CodeObject, report: IsaReading, artifacts: Path) -> Path:
    out = artifacts / ISA_DIR
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(obj.hsaco, out / f"{name}.hsaco")
    shutil.copyfile(obj.listing, out / f"{name}.s")
    return write(artifacts, IsaRecord.from_report(name, report))


def clear_run_artifacts(artifacts: Path) -> None:
    """Records from an earlier run must not reach this run's summary. A gate run of several
    pytest commands (tox -e rocm) clears once, at its first: the later ones pass
    --keep-artifacts."""
    for folder in (
        ISA_DIR,
        NUMERICS_DIR,
        MEMORY_DIR,
        DRIFT_DIR,
        AGREEMENT_DIR,
        PERF_DIR,
        SANITIZE_DIR,
        COUNTERS_DIR,
        STRESS_DIR,
        KERNEL_SOURCES_DIR,
        JUNIT_DIR,
    ):
        shutil.rmtree(artifacts / folder, ignore_errors=True)


def record_numerics(
    artifacts: Path,
    name: str,
    dtype: str,
    verdict,
    *,
    test_id: str = "",
    target: str = "",
    seed: int | None = None,
    site: str = "",
) -> None:
    """``verdict``: a tilegate.references.metrics.Verdict; ``site``: its worst element's place in
    the kernel's tiling (tilegate/gate/tile_site.py)."""
    write(
        artifacts,
        NumericsRecord(
            name,
            dtype=dtype,
            passed=verdict.passed,
            max_ratio=verdict.max_ratio,
            mean_ratio=verdict.mean_ratio,
            max_err=verdict.kernel.max_abs,
            mean_err=verdict.kernel.mean_abs,
            baseline_max_err=verdict.baseline.max_abs,
            baseline_mean_err=verdict.baseline.mean_abs,
            test_id=test_id,
            target=target,
            seed=seed,
            worst_index=list(verdict.worst.index) if verdict.worst else None,
            worst_site=site,
            nonfinite_rows=verdict.nonfinite.rows if verdict.nonfinite else 0,
        ),
    )


def record_memory(artifacts: Path, name: str, io_bytes: int, extra_bytes: int) -> None:
    write(artifacts, MemoryRecord(name, io_bytes=io_bytes, extra_bytes_during_call=extra_bytes))


def write_drift(artifacts: Path, name: str, series: list) -> None:
    """``series``: tilegate.references.drift.DriftSeries; their record, and its plot beside it."""
    from tilegate.references.drift import table_lines

    record = DriftRecord(name, series=[s.as_dict() for s in series], table=table_lines(series))
    write(artifacts, record)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in series:
        ax.loglog(
            s.lengths, s.kernel_rel_err, "o-", label=f"{s.label} (slope {s.kernel_slope:.2f})"
        )
    ax.loglog(
        series[0].lengths,
        series[0].baseline_rel_err,
        "k--",
        label=f"plain torch, same dtype (slope {series[0].baseline_slope:.2f})",
    )
    ax.set_xlabel("sequence length")
    ax.set_ylabel("mean |out - ref| / mean |ref|")
    ax.set_title(f"drift vs FP32 reference: {name}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(record.plot(artifacts), dpi=110)
    plt.close(fig)


def record_agreement(
    artifacts: Path, name: str, results: list, table: list[str] | None = None
) -> None:
    """``results``: Agreement records (or subclasses); ``table``: their lines,
    agreement.table_lines' by default."""
    from tilegate.references.agreement import table_lines

    lines = table if table is not None else table_lines(results)
    write(artifacts, AgreementRecord(name, results=[r.as_dict() for r in results], table=lines))
