#!/usr/bin/env python3
"""A gate run's artifacts as GitHub-flavoured markdown, for the job's summary page.

    python3 scripts/step_summary.py [ARTIFACTS ...] [-o FILE] [--title TITLE] [--annotate]

ARTIFACTS is a folder a run wrote (default: artifacts/); several (the shards of one gate run) are
summarised as one: one verdict over all their JUnit XML, then each folder's tables. The verdict
comes first (scripts/summary_junit.py): passed, failed or skipped, every failing test with its
one-line reason, the skip reasons counted; then the tier tables, the TileLang 0.1.12 run's
included. Planted-bug records (their names say "planted") are expected to fail and are shown as
caught or not caught. The markdown is appended to FILE, else to $GITHUB_STEP_SUMMARY, else
written to stdout; --annotate also prints a GitHub ``::error`` annotation per failing test.
TITLE (default $TILEGATE_SUMMARY_TITLE, else the job's name) heads it. Never fails the job over
a summary.

Stdlib only, so it runs in an `if: always()` step even when set-up failed. The JSON formats are
tilegate/report.py's; the project is not imported (tilegate.report pulls in tilelang through
tilegate.toolchain), so the folder names below must follow report.py's ISA_DIR, NUMERICS_DIR, ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import summary_junit  # beside this script

ISA, NUMERICS, MEMORY, DRIFT, AGREEMENT, PERF = "isa", "numerics", "memory", "drift", "agreement", "perf"
TL012 = "tilelang-0.1.12"  # tilegate/harness/tilelang_venv.py's run, under artifacts/
PLANTED = "planted"  # in the name of every planted-bug record: it must fail
SANITIZE, COUNTERS = "sanitize", "counters"  # tilegate/harness/sanitizer.py's logs; suite/test_counters.py's tables


def records(folder: Path) -> list[tuple[str, object]]:
    out = []
    for f in sorted(folder.glob("*.json")):
        try:
            out.append((f.stem, json.loads(f.read_text())))
        except (OSError, ValueError) as e:
            raise ValueError(f"{folder.name}/{f.name}: {e}") from e
    return out


def cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def code_block(lines: list[str]) -> list[str]:
    return ["```text", *lines, "```"]


def isa_section(root: Path) -> list[str]:
    rows = []
    for name, m in records(root / ISA):  # report.snapshot(): IsaReport.metrics() + compiler
        occ = m["occupancy"]
        rows.append([f"`{name}`", m["vgpr_count"], m["agpr_count"], m["lds_bytes"], occ["workgroups_per_cu"],
                     f"{occ['waves_per_simd']:.2f}", occ["limited_by"], sum(m["mfma"].values()),
                     m["lds_reads"].get("ds_read_u16", 0), m.get("inner_loop_cycles")])
    header = ["config", "VGPR", "AGPR", "LDS B", "WG/CU", "waves/SIMD", "limit", "MFMA", "ds_read_u16", "loop cycles"]
    return [f"### gfx942 ISA ({len(rows)} code objects)", "", *table(header, rows)] if rows else []


def numerics_section(root: Path) -> list[str]:
    recs = [r | {"name": n} for n, r in records(root / NUMERICS)]
    rows = []
    for dtype in sorted({r["dtype"] for r in recs}):
        group = [r for r in recs if r["dtype"] == dtype]
        worst_max = max(group, key=lambda r: r["max_ratio"])
        worst_mean = max(group, key=lambda r: r["mean_ratio"])
        rows.append([dtype, len(group), sum(bool(r["passed"]) for r in group),
                     f"{worst_max['max_ratio']:.3f} (`{worst_max['name']}`)",
                     f"{worst_mean['mean_ratio']:.3f} (`{worst_mean['name']}`)"])
    if not rows:
        return []
    header = ["dtype", "checks", "within bound", "worst max-error ratio", "worst mean-error ratio"]
    return ["### Numerics (error ratio to plain torch in the same dtype; <= 1 passes)", "", *table(header, rows)]


def memory_section(root: Path) -> list[str]:
    rows = [[f"`{n}`", f"{m['io_bytes'] / 2**20:.0f}", f"{m['extra_bytes_during_call'] / 2**20:.2f}"]
            for n, m in records(root / MEMORY)]
    header = ["case", "inputs+output MiB", "allocated during the call MiB"]
    return ["### Memory", "", *table(header, rows)] if rows else []


def run_link() -> str:
    env = os.environ
    if all(k in env for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")):
        url = f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}#artifacts"
        return f" in [this run's artifacts]({url})"
    return ""


def planted_lines(lines: list[str]) -> tuple[str, list[str]]:
    """A planted bug's table: caught if any row or bound failed; its FAIL cells read as caught."""
    caught = any("FAIL" in ln or ln.startswith("bound:") for ln in lines)
    verdict = "expected to fail: caught" if caught else "expected to fail: NOT caught"
    return verdict, [ln.replace("FAIL: ", "caught: ") for ln in lines]


def text_tables(root: Path, folder: str, title: str, shown: str = "") -> list[str]:
    """drift/*.json and agreement/*.json carry their terminal table as a `table` list of lines."""
    lines = []
    for name, d in records(root / folder):
        rows, heading = d["table"], f"#### `{name}`"
        if PLANTED in name:
            verdict, rows = planted_lines(rows)
            heading += f" (planted bug, {verdict})"
        lines += [heading, "", *code_block(rows), ""]
        if shown and (root / folder / f"{name}.png").exists():
            lines += [f"Plot: `{shown}/{folder}/{name}.png`{run_link()}.", ""]
    return [f"### {title}", "", *lines] if lines else []


def markdown_tables(root: Path, folder: str, title: str, shown: str = "") -> list[str]:
    """perf/*.md and counters/*.md are the tiers' own markdown tables (tilegate/harness/perf.py
    table(), suite/test_counters.py): shown as written, with the chart beside one where there is one."""
    lines = []
    for md in sorted((root / folder).glob("*.md")):
        lines += [f"#### `{md.stem}`", "", *md.read_text().splitlines(), ""]
        if shown and md.with_suffix(".png").exists():
            lines += [f"Chart: `{shown}/{folder}/{md.stem}.png`{run_link()}.", ""]
    return [f"### {title}", "", *lines] if lines else []


def sanitize_section(root: Path) -> list[str]:
    rows = []
    for log in sorted((root / SANITIZE).glob("*.log")):
        verdict = next((ln.strip("= ").strip() for ln in log.read_text(errors="replace").splitlines()
                        if "ERROR SUMMARY:" in ln or "RACECHECK SUMMARY:" in ln), "no summary line (crashed or timed out)")
        if PLANTED in log.stem:
            clean = verdict.startswith(("0 errors", "0 hazards")) or "no summary" in verdict
            verdict = f"expected to report: {'NOT caught' if clean else 'caught'} ({verdict})"
        rows.append([f"`{log.stem}`", verdict])
    return ["### Sanitizers (compute-sanitizer; `planted-*` runs must report)", "", *table(["run", "verdict"], rows)] if rows else []


def tl012_section(root: Path) -> list[str]:
    """The compile + ISA tiers under TileLang 0.1.12 (suite/test_compat_tilelang.py's nested run)."""
    sub = root / TL012
    junit = sub / "junit.xml"
    if not sub.is_dir():
        return []
    outcomes = summary_junit.read(junit) if junit.is_file() else []
    isa = isa_section(sub)
    return ["### TileLang 0.1.12 (SGLang 0.5.23's pin): compile + ISA", "",
            *summary_junit.verdict_lines(outcomes, int(junit.is_file())), *(isa[2:] if isa else [])]


def tier_tables(root: Path, shown: str) -> list[str]:
    sections = [isa_section, numerics_section, memory_section,
                lambda r: text_tables(r, DRIFT, "Drift (mean error relative to |ref|; 'x base' = ratio to plain "
                                      "torch in the same dtype)", shown),
                lambda r: text_tables(r, AGREEMENT, "Token agreement (greedy, against FP32)"),
                lambda r: markdown_tables(r, PERF, "Performance (ratio = peer time / kernel time, same process)", shown),
                sanitize_section, lambda r: markdown_tables(r, COUNTERS, "Hardware counters"), tl012_section]
    body = []
    for section in sections:
        try:
            body += section(root)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, SyntaxError) as e:  # one broken file hides no more
            body += [f"> step_summary: a section was left out: `{type(e).__name__}: {e}`"]
        if body and body[-1] != "":
            body.append("")
    return body


def outcomes_of(roots: list[Path]) -> tuple[list, int]:
    files = [f for root in roots for f in summary_junit.junit_files(root)]
    outcomes = []
    for f in files:
        try:
            outcomes += summary_junit.read(f)
        except (OSError, SyntaxError) as e:  # ET.ParseError is a SyntaxError: a truncated file
            outcomes.append(summary_junit.Outcome(f"{f.name}", summary_junit.ERROR, f"unreadable JUnit XML: {e}"))
    return outcomes, len(files)


def render(roots: list[Path], shown: list[str], title: str, outcomes: list, files: int) -> list[str]:
    lines = [f"## tilegate: {title}", "", *summary_junit.verdict_lines(outcomes, files)]
    for root, name in zip(roots, shown):
        body = tier_tables(root, name)
        if len(roots) > 1:
            lines += [f"### `{name}`", ""]
        lines += body or [f"No tier records in `{name}/`.", ""]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("artifacts", nargs="*", default=["artifacts"], help="the run's artifacts folder(s)")
    parser.add_argument("-o", "--output", help="markdown file to append to (default: $GITHUB_STEP_SUMMARY, else stdout)")
    parser.add_argument("--title", default=os.environ.get("TILEGATE_SUMMARY_TITLE") or os.environ.get("GITHUB_JOB", "gate"))
    parser.add_argument("--annotate", action="store_true", help="print a ::error annotation per failing test")
    args = parser.parse_args()
    roots = [Path(a) for a in args.artifacts]
    outcomes, files = outcomes_of(roots)
    text = "\n".join(render(roots, [a.rstrip("/") or "/" for a in args.artifacts], args.title, outcomes, files)) + "\n"
    out = args.output or os.environ.get("GITHUB_STEP_SUMMARY")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.annotate:
        print("\n".join(summary_junit.annotations(outcomes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
