"""ISA artifacts per config (code object, listing, metrics JSON), the committed golden
snapshots they are compared with, and the summary table printed at the end of a run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tilegate import REPO_ROOT
from tilegate.codeobj import CodeObject
from tilegate.isa import IsaReport

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


def golden_path(name: str, toolchain_kind: str) -> Path:
    return GOLDEN_ROOT / toolchain_kind / f"{name}.json"


def golden_diff(expected: dict, actual: dict) -> list[str]:
    keys = sorted(set(expected) | set(actual))
    return [f"{k}: golden {expected.get(k)!r} -> now {actual.get(k)!r}" for k in keys if expected.get(k) != actual.get(k)]


def isa_summary_lines(artifacts: Path) -> list[str]:
    files = sorted((artifacts / ISA_DIR).glob("*.json"))
    if not files:
        return []
    rows = [("config", "VGPR", "AGPR", "LDS B", "WG/CU", "waves/SIMD", "limit", "MFMA", "ds_read_u16")]
    for f in files:
        m = json.loads(f.read_text())
        occ = m["occupancy"]
        rows.append((f.stem, str(m["vgpr_count"]), str(m["agpr_count"]), str(m["lds_bytes"]),
                     str(occ["workgroups_per_cu"]), f"{occ['waves_per_simd']:.2f}", occ["limited_by"],
                     str(sum(m["mfma"].values())), str(m["lds_reads"].get("ds_read_u16", 0))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]


def clear_isa_artifacts(artifacts: Path) -> None:
    shutil.rmtree(artifacts / ISA_DIR, ignore_errors=True)
