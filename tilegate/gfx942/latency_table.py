"""The latency-proxy table of docs/results.md, read from the committed golden snapshots: what the
docs say about each gfx942 build is what the ISA tier compares against (scripts/doc_tables.py
writes it; suite/library/test_readme_rules.py fails when the two differ)."""

from __future__ import annotations

import json

from tilegate.gfx942.golden import GOLDEN_ROOT, REFERENCE_TOOLCHAIN

KERNELS = (
    ("flash_fwd", "prefill"),
    ("paged_extend", "extend"),
    ("paged_decode_split", "decode split"),
)
COLUMNS = (
    "kernel",
    "d",
    "config",
    "loads not overlapped",
    "barriers/iter",
    "reduction LDS trips",
    "llvm-mca cycles",
    "waves/SIMD",
    "VGPR",
    "ds_read_u16",
)


def latency_rows(tilelang: str, dtype: str = "fp16") -> list[list[str]]:
    """One row per causal ``dtype`` build (fp32 accumulation) of each kernel, in table order."""
    folder = GOLDEN_ROOT / REFERENCE_TOOLCHAIN / f"tilelang-{tilelang}"
    rows = []
    for kernel, label in KERNELS:
        for d in (64, 128):
            for path in sorted(folder.glob(f"{kernel}-causal-gqa32x8-d{d}-{dtype}-*.json")):
                config = path.stem.rsplit("-", 1)[1]
                if config == "acc16":
                    continue  # the fp16-accumulating twins exist to be caught, not to be fast
                s = json.loads(path.read_text())
                rows.append(
                    [
                        label,
                        str(d),
                        config,
                        f"{s['loads_not_overlapped']} of {s['inner_loop_loads']}",
                        str(s["barriers_per_iteration"]),
                        str(s["reduction_lds_round_trips"]),
                        "llvm-mca hung"
                        if s["inner_loop_cycles"] is None
                        else f"{s['inner_loop_cycles']:g}",
                        f"{s['occupancy']['waves_per_simd']:g}",
                        str(s["vgpr_count"]),
                        str(s["lds_reads"].get("ds_read_u16", 0)),
                    ]
                )
    return rows


def latency_table(tilelang: str) -> list[str]:
    rows = [list(COLUMNS), ["---"] * len(COLUMNS), *latency_rows(tilelang)]
    return ["| " + " | ".join(row) + " |" for row in rows]
