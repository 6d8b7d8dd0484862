"""A run's records (tilegate/artifacts/records.py), rendered: each form in one place. The JSON a
record is stored as; the terminal summary (tilegate/testing/pytest_plugin.py's
pytest_terminal_summary); the GitHub step summary's markdown (scripts/step_summary.py), verdict
first. The terminal and the step summary read the same files back and show the same cells
(isa_cells, numerics_by_dtype, mib).

Standard library only, like records.py: the step summary imports it without the gate installed.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tilegate.artifacts.records import (
    COUNTERS_DIR,
    ERROR,
    FAILED,
    JUNIT_DIR,
    PASSED,
    PERF_DIR,
    PLANTED,
    SANITIZE_DIR,
    SKIPPED,
    AgreementRecord,
    DriftRecord,
    IsaRecord,
    KernelSourceRecord,
    MemoryRecord,
    NumericsRecord,
    Outcome,
    Record,
    StressRecord,
    load,
    plain_files,
    read_junit,
    read_plain_text,
    venv_run_dir,
    verdict,
)


def to_json(record: Record) -> str:
    """The record's file: every field but its name (the file's), keys sorted (the golden
    snapshots' format)."""
    return json.dumps(record.data(), indent=1, sort_keys=True, default=str) + "\n"


# --- the cells both summaries show ----------------------------------------------------------

ISA_COLUMNS = [
    "config",
    "VGPR",
    "AGPR",
    "LDS B",
    "WG/CU",
    "waves/SIMD",
    "limit",
    "MFMA",
    "ds_read_u16",
    "loop cycles",
    "loads not overlapped",
    "barriers/iter",
    "reduction LDS trips",
]


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def _of(part, whole) -> str:
    """ "2/8"; "-" for a record from before the figures existed."""
    return "-" if part is None or whole is None else f"{part}/{whole}"


def isa_cells(r: IsaRecord) -> list[str]:
    occ = r.occupancy
    return [
        r.name,
        str(r.vgpr_count),
        str(r.agpr_count),
        str(r.lds_bytes),
        str(occ["workgroups_per_cu"]),
        f"{occ['waves_per_simd']:.2f}",
        str(occ["limited_by"]),
        str(sum(r.mfma.values())),
        str(r.lds_reads.get("ds_read_u16", 0)),
        str(r.inner_loop_cycles),
        _of(r.loads_not_overlapped, r.inner_loop_loads),
        _or_dash(r.barriers_per_iteration),
        _or_dash(r.reduction_lds_round_trips),
    ]


@dataclass(frozen=True)
class NumericsSummary:
    """One dtype's numerics records: how many are within bound, and the worst of each ratio."""

    dtype: str
    checks: int
    within_bound: int
    worst_max: NumericsRecord
    worst_mean: NumericsRecord


def numerics_by_dtype(records: list[NumericsRecord]) -> list[NumericsSummary]:
    out = []
    for dtype in sorted({r.dtype for r in records}):
        group = [r for r in records if r.dtype == dtype]
        out.append(
            NumericsSummary(
                dtype,
                len(group),
                sum(bool(r.passed) for r in group),
                max(group, key=lambda r: r.max_ratio),
                max(group, key=lambda r: r.mean_ratio),
            )
        )
    return out


def mib(n: int, decimals: int) -> str:
    return f"{n / 2**20:.{decimals}f}"


DRIFT_TITLE = "mean error relative to |ref|; 'x base' = ratio to plain torch in the same dtype"


# --- the terminal summary -------------------------------------------------------------------


def terminal_sections(artifacts: Path) -> list[tuple[str, list[str]]]:
    """(title, lines) per section; a section with no lines is not shown."""
    return [
        ("gfx942 ISA summary", isa_lines(load(artifacts, IsaRecord))),
        ("numerics, memory and drift summary", runtime_lines(artifacts)),
        ("token agreement summary", indented_tables(load(artifacts, AgreementRecord))),
    ]


def isa_lines(records: list[IsaRecord]) -> list[str]:
    if not records:
        return []
    rows = [ISA_COLUMNS, *map(isa_cells, records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(ISA_COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]


def runtime_lines(artifacts: Path) -> list[str]:
    lines = [
        f"numerics {s.dtype}: {s.checks} checks, {s.within_bound} within bound; "
        f"worst max-error ratio {s.worst_max.max_ratio:.3f} ({s.worst_max.name}), "
        f"worst mean-error ratio {s.worst_mean.mean_ratio:.3f} ({s.worst_mean.name})  [<= 1 passes]"
        for s in numerics_by_dtype(load(artifacts, NumericsRecord))
    ]
    lines += [
        f"memory {m.name}: inputs+output {mib(m.io_bytes, 0)} MiB, "
        f"allocated during the call {mib(m.extra_bytes_during_call, 2)} MiB"
        for m in load(artifacts, MemoryRecord)
    ]
    for d in load(artifacts, DriftRecord):
        lines += [
            f"drift {d.name} ({DRIFT_TITLE}):",
            *("  " + line for line in d.table),
            f"  plot: {d.plot(artifacts)}",
        ]
    return lines


def indented_tables(records: list[AgreementRecord]) -> list[str]:
    return [line for r in records for line in (f"{r.name}:", *("  " + row for row in r.table))]


# --- the step summary (GitHub-flavoured markdown) -------------------------------------------

# Everything below writes what the code under test wrote (names, reasons, tables) into a page
# GitHub renders: each string goes through text() or code(), so it shows as itself and can never
# start a line, a table row, a heading, a link or HTML of its own.


def _visible(value: object) -> str:
    """Line breaks and other control characters as escapes (\\u000a): one line, always."""
    return "".join(
        ch if ch.isprintable() or ch == " " else f"\\u{ord(ch):04x}" for ch in str(value)
    )


# what starts something inline (emphasis, code, a link or image, HTML, an entity, strikethrough, a
# table cell); each is backslash-escaped, as CommonMark lets any ASCII punctuation be. A bare URL
# may still show as a link: its text is the URL.
# Block syntax (headings, lists, quotes) needs a line start, and a cell is never one.
INLINE_MARKUP = set("\\`*_[]<!|~&")  # ">" alone opens nothing inline


def text(value: object) -> str:
    """Markdown that renders as ``value``'s characters: one line, no markup of its own."""
    return "".join("\\" + ch if ch in INLINE_MARKUP else ch for ch in _visible(value))


def code(value: object) -> str:
    """An inline code span holding ``value``: a backtick fence longer than any run inside it, and
    ``|`` escaped (GFM splits table cells before it reads code spans)."""
    body = _visible(value).replace("|", "\\|")
    fence = "`" * (max(map(len, re.findall("`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


class Code(str):
    """A table value shown as code (a record's or a test's name); any other value is text()."""


def cell(value: object) -> str:
    return code(value) if isinstance(value, Code) else text(value)


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def code_block(lines: list[str]) -> list[str]:
    """Lines shown as written, in a fence no line inside can close."""
    shown = [_visible(ln) for ln in lines]
    fence = "`" * max(
        3, max((len(run) for ln in shown for run in re.findall("`+", ln)), default=0) + 1
    )
    return [f"{fence}text", *shown, fence]


def run_link() -> str:
    env = os.environ
    if all(k in env for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")):
        repository = f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}"
        url = f"{repository}/actions/runs/{env['GITHUB_RUN_ID']}#artifacts"
        return f" in [this run's artifacts]({url})"
    return ""


def isa_section(root: Path) -> list[str]:
    rows = [[Code(name), *rest] for name, *rest in map(isa_cells, load(root, IsaRecord))]
    return (
        [f"### gfx942 ISA ({len(rows)} code objects)", "", *table(ISA_COLUMNS, rows)]
        if rows
        else []
    )


def numerics_section(root: Path) -> list[str]:
    rows = [
        [
            s.dtype,
            s.checks,
            s.within_bound,
            s.worst_max.max_ratio,
            Code(s.worst_max.name),
            s.worst_mean.mean_ratio,
            Code(s.worst_mean.name),
        ]
        for s in numerics_by_dtype(load(root, NumericsRecord))
    ]
    if not rows:
        return []
    header = [
        "dtype",
        "checks",
        "within bound",
        "worst max-error ratio",
        "at",
        "worst mean-error ratio",
        "at",
    ]
    lines = table(header, [[*r[:3], f"{r[3]:.3f}", r[4], f"{r[5]:.3f}", r[6]] for r in rows])
    return ["### Numerics (error ratio to plain torch in the same dtype; <= 1 passes)", "", *lines]


def stress_section(root: Path) -> list[str]:
    """Each stress pass: repeats differing from the first launch (``planted`` runs must differ)."""
    rows = [
        [
            Code(r.name),
            r.verdict,
            r.competitor or "alone",
            r.repeats,
            r.differing,
            f"{r.fraction:.3f}",
            r.most_elements_differing,
            f"{r.seconds:.1f}",
        ]
        for r in load(root, StressRecord)
    ]
    if not rows:
        return []
    header = [
        "run",
        "verdict",
        "sharing the GPU",
        "repeats",
        "differing",
        "fraction",
        "most elements differing",
        "seconds",
    ]
    return [
        "### Stress (every repeat bit for bit against the first launch; a `planted-*` test needs a "
        "pass "
        "that catches it)",
        "",
        *table(header, rows),
    ]


def kernel_sources_section(root: Path) -> list[str]:
    """Per adapted kernel: its source and sha256, and each finding the gate holds against it
    (docs/kernel-families.md has them as reports, with the commands that reproduce them)."""
    out = []
    for r in load(root, KernelSourceRecord):
        out += [
            f"### Adapted kernel {code(r.name)}",
            "",
            f"{text(r.source)}, source sha256 {code(str(r.sha256)[:16])}",
            "",
        ]
        rows = [
            [
                ", ".join(f["rules"]),
                f["reason"],
                "; ".join(
                    f"{k}: {', '.join(v)}"
                    for k, v in f.items()
                    if k in ("problems", "configs", "cases", "tilelang", "gpu")
                )
                or "every build",
            ]
            for f in r.findings
        ]
        out += (
            [*table(["rules broken", "finding", "where"], rows), ""]
            if rows
            else ["No finding.", ""]
        )
    if out:  # in the environment that has the kernels' package (SGLang's: .venv-sglang)
        out += [
            'Reproduce: `python -m pytest suite/families/test_kernels.py -m "compile or '
            'isa" -rxX` (gfx942), '
            '`-m "gpu and numerics"` on a GPU; reports and figures: docs/kernel-families.md',
            "",
        ]
    return out


def memory_section(root: Path) -> list[str]:
    rows = [
        [Code(m.name), mib(m.io_bytes, 0), mib(m.extra_bytes_during_call, 2)]
        for m in load(root, MemoryRecord)
    ]
    header = ["case", "inputs+output MiB", "allocated during the call MiB"]
    return ["### Memory", "", *table(header, rows)] if rows else []


def planted_lines(lines: list[str]) -> tuple[str, list[str]]:
    """A planted bug's table: caught if any row or bound failed; its FAIL cells read as caught."""
    caught = any("FAIL" in ln or ln.startswith("bound:") for ln in lines)
    label = "expected to fail: caught" if caught else "expected to fail: NOT caught"
    return label, [ln.replace("FAIL: ", "caught: ") for ln in lines]


def text_tables(
    records: list[DriftRecord] | list[AgreementRecord], title: str, root: Path, shown: str = ""
) -> list[str]:
    """Records that carry their terminal table (drift, agreement), as written; a plot beside one
    is linked."""
    lines = []
    for r in records:
        rows, heading = r.table, f"#### {code(r.name)}"
        if PLANTED in r.name:
            label, rows = planted_lines(rows)
            heading += f" (planted bug, {label})"
        lines += [heading, "", *code_block(rows), ""]
        if shown and (root / r.folder / f"{r.name}.png").exists():
            lines += [f"Plot: {code(f'{shown}/{r.folder}/{r.name}.png')}{run_link()}.", ""]
    return [f"### {title}", "", *lines] if lines else []


def drift_section(root: Path, shown: str) -> list[str]:
    return text_tables(load(root, DriftRecord), f"Drift ({DRIFT_TITLE})", root, shown)


def agreement_section(root: Path) -> list[str]:
    return text_tables(load(root, AgreementRecord), "Token agreement (greedy, against FP32)", root)


def verdict_lines(outcomes: list[Outcome], files: int) -> list[str]:
    """The verdict first, then every failing test with its reason, then the skip reasons counted."""
    kinds = Counter(o.kind for o in outcomes)
    counts = ", ".join(f"{kinds[k]} {k}" for k in (FAILED, ERROR, PASSED, SKIPPED) if kinds[k])
    v = verdict(outcomes, files)
    if not files:
        return [
            f"**Verdict: {v}**: no JUnit XML under `{JUNIT_DIR}/` (pytest did not finish, or never "
            "started:"
            " see the job log)",
            "",
        ]
    lines = [f"**Verdict: {v}** ({counts}; {files} pytest command{'s' if files != 1 else ''})", ""]
    bad = [o for o in outcomes if o.kind in (FAILED, ERROR)]
    if bad:
        lines += ["| failing test | reason |", "|---|---|"]
        lines += [
            f"| {code(o.test)} | {text(('error: ' if o.kind == ERROR else '') + o.reason)} |"
            for o in bad
        ]
        lines.append("")
    skips = Counter(o.reason for o in outcomes if o.kind == SKIPPED)
    if skips:
        lines += [
            "<details><summary>skipped, by reason</summary>",
            "",
            "| tests | reason |",
            "|---|---|",
        ]
        lines += [f"| {n} | {text(reason)} |" for reason, n in skips.most_common()]
        lines += ["", "</details>", ""]
    return lines


def _escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (toolkit's issueCommand): data, and property values."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def error_annotations(outcomes: list[Outcome]) -> list[str]:
    """One ``::error`` workflow command per failing test, at its file and line where the XML has
    them: printed to a step's output, it marks the test's line in the pull request's files."""
    out = []
    for o in outcomes:
        if o.kind not in (FAILED, ERROR):
            continue
        props = [f"title={_escape(o.test, prop=True)}"]
        if o.file:
            props.insert(0, f"file={_escape(o.file, prop=True)}")
            if o.line:
                props.insert(1, f"line={o.line}")
        out.append(f"::error {','.join(props)}::{_escape(o.reason)}")
    return out


# -- the step summary page (scripts/step_summary.py writes it) --------------------------------

TL012 = venv_run_dir("0.1.12")  # tilegate/harness/tilelang_venv.py's run, under artifacts/


def markdown_tables(root: Path, folder: str, title: str, shown: str = "") -> list[str]:
    """perf/*.md and counters/*.md are the tiers' own tables (tilegate/harness/perf/driver.py
    table(), suite/counters/test_counters.py): shown as written, as text in a code block (the
    code under test wrote them: rendered, they could say anything), with the chart beside one
    where there is one."""
    lines = []
    for md in plain_files(root / folder, "*.md"):
        lines += [
            f"#### {code(md.stem)}",
            "",
            *code_block(read_plain_text(md).splitlines()),
            "",
        ]
        if shown and md.with_suffix(".png").is_file():
            lines += [
                f"Chart: {code(f'{shown}/{folder}/{md.stem}.png')}{run_link()}.",
                "",
            ]
    return [f"### {title}", "", *lines] if lines else []


def sanitize_section(root: Path) -> list[str]:
    rows = []
    for log in plain_files(root / SANITIZE_DIR, "*.log"):
        verdict = next(
            (
                ln.strip("= ").strip()
                for ln in read_plain_text(log).splitlines()
                if "ERROR SUMMARY:" in ln or "RACECHECK SUMMARY:" in ln
            ),
            "no summary line (crashed or timed out)",
        )
        if PLANTED in log.stem:
            clean = verdict.startswith(("0 errors", "0 hazards")) or "no summary" in verdict
            verdict = f"expected to report: {'NOT caught' if clean else 'caught'} ({verdict})"
        rows.append([Code(log.stem), verdict])
    return (
        [
            "### Sanitizers (compute-sanitizer; `planted-*` runs must report)",
            "",
            *table(["run", "verdict"], rows),
        ]
        if rows
        else []
    )


def tl012_section(root: Path) -> list[str]:
    """The compile + ISA tiers under TileLang 0.1.12 (suite/compat/test_compat_tilelang.py's
    nested run)."""
    sub = root / TL012
    junit = sub / "junit.xml"
    if sub.is_symlink() or not sub.is_dir():
        return []
    outcomes = read_junit(junit) if junit.is_file() else []
    isa = isa_section(sub)
    return [
        "### TileLang 0.1.12 (SGLang 0.5.23's pin): compile + ISA",
        "",
        *verdict_lines(outcomes, int(junit.is_file())),
        *(isa[2:] if isa else []),
    ]


def tier_tables(root: Path, shown: str) -> list[str]:
    sections = [
        isa_section,
        numerics_section,
        memory_section,
        lambda r: drift_section(r, shown),
        agreement_section,
        lambda r: markdown_tables(
            r, PERF_DIR, "Performance (ratio = peer time / kernel time, same process)", shown
        ),
        sanitize_section,
        stress_section,
        lambda r: markdown_tables(r, COUNTERS_DIR, "Hardware counters"),
        tl012_section,
        kernel_sources_section,
    ]
    body = []
    for section in sections:
        try:
            body += section(root)
        # one broken file hides no more than its section; the summary never fails
        except Exception as e:
            body += [
                f"> step\\_summary: a section was left out: {code(f'{type(e).__name__}: {e}')}"
            ]
        if body and body[-1] != "":
            body.append("")
    return body


def step_summary(
    roots: list[Path], shown: list[str], title: str, outcomes: list[Outcome], files: int
) -> list[str]:
    lines = [f"## tilegate: {text(title)}", "", *verdict_lines(outcomes, files)]
    for root, name in zip(roots, shown):
        body = tier_tables(root, name)
        if len(roots) > 1:
            lines += [f"### {code(name)}", ""]
        lines += body or [f"No tier records in {code(name + '/')}.", ""]
    return lines
