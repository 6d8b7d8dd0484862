#!/usr/bin/env python3
"""A gate run's artifacts as GitHub-flavoured markdown, for the job's summary page.

    python3 scripts/step_summary.py [ARTIFACTS ...] [-o FILE] [--title TITLE] [--annotate]

ARTIFACTS is a folder a run wrote (default: artifacts/, whose ``latest`` link names the newest run:
the link is read as text and must name a folder of artifacts/runs/); several (the shards of one gate
run) are summarised as one: one verdict over all their JUnit XML (each pytest command writes one,
tox.ini), then each folder's tables. The verdict comes first: passed, failed or skipped, every
failing test with its one-line reason, the skip reasons counted; then the tier tables, the TileLang
0.1.12 run's included. Planted-bug records (their names say "planted") are expected to fail and are
shown as caught or not caught. The markdown is appended to FILE, else to $GITHUB_STEP_SUMMARY, else
written to stdout; --annotate also prints a GitHub ``::error`` annotation per failing test. TITLE
(default $TILEGATE_SUMMARY_TITLE, else the job's name) heads it. Never fails the job over a summary.

Stdlib only, so it runs in an `if: always()` step even when set-up failed: it puts its own
checkout's root first on sys.path and imports tilegate.artifacts.records (the records' types) and
tilegate.artifacts.render (every rendering of them, the terminal summary's too), which import
nothing but the standard library (suite/library/test_step_summary.py runs it with no
site-packages)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# this checkout's tilegate, installed or not
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tilegate.artifacts import render
from tilegate.artifacts.records import (
    COUNTERS_DIR,
    ERROR,
    PERF_DIR,
    PLANTED,
    SANITIZE_DIR,
    Outcome,
    junit_files,
    plain_files,
    read_junit,
    read_plain_text,
    run_folder,
    venv_run_dir,
)

TL012 = venv_run_dir("0.1.12")  # tilegate/harness/tilelang_venv.py's run, under artifacts/


def markdown_tables(root: Path, folder: str, title: str, shown: str = "") -> list[str]:
    """perf/*.md and counters/*.md are the tiers' own tables (tilegate/harness/perf/driver.py
    table(), suite/counters/test_counters.py): shown as written, as text in a code block (the
    code under test wrote them: rendered, they could say anything), with the chart beside one
    where there is one."""
    lines = []
    for md in plain_files(root / folder, "*.md"):
        lines += [
            f"#### {render.code(md.stem)}",
            "",
            *render.code_block(read_plain_text(md).splitlines()),
            "",
        ]
        if shown and md.with_suffix(".png").is_file():
            lines += [
                f"Chart: {render.code(f'{shown}/{folder}/{md.stem}.png')}{render.run_link()}.",
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
        rows.append([render.Code(log.stem), verdict])
    return (
        [
            "### Sanitizers (compute-sanitizer; `planted-*` runs must report)",
            "",
            *render.table(["run", "verdict"], rows),
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
    isa = render.isa_section(sub)
    return [
        "### TileLang 0.1.12 (SGLang 0.5.23's pin): compile + ISA",
        "",
        *render.verdict_lines(outcomes, int(junit.is_file())),
        *(isa[2:] if isa else []),
    ]


def tier_tables(root: Path, shown: str) -> list[str]:
    sections = [
        render.isa_section,
        render.numerics_section,
        render.memory_section,
        lambda r: render.drift_section(r, shown),
        render.agreement_section,
        lambda r: markdown_tables(
            r, PERF_DIR, "Performance (ratio = peer time / kernel time, same process)", shown
        ),
        sanitize_section,
        render.stress_section,
        lambda r: markdown_tables(r, COUNTERS_DIR, "Hardware counters"),
        tl012_section,
        render.foreign_section,
    ]
    body = []
    for section in sections:
        try:
            body += section(root)
        # one broken file hides no more than its section; the summary never fails
        except Exception as e:
            body += [
                "> step\\_summary: a section was left out: "
                f"{render.code(f'{type(e).__name__}: {e}')}"
            ]
        if body and body[-1] != "":
            body.append("")
    return body


def outcomes_of(roots: list[Path]) -> tuple[list[Outcome], int]:
    files = [f for root in roots for f in junit_files(root)]
    outcomes = []
    for f in files:
        try:
            outcomes += read_junit(f)
        # ET.ParseError is a SyntaxError: a truncated file
        except (OSError, SyntaxError, ValueError) as e:
            outcomes.append(Outcome(f"{f.name}", ERROR, f"unreadable JUnit XML: {e}"))
    return outcomes, len(files)


def summary(
    roots: list[Path], shown: list[str], title: str, outcomes: list[Outcome], files: int
) -> list[str]:
    lines = [f"## tilegate: {render.text(title)}", "", *render.verdict_lines(outcomes, files)]
    for root, name in zip(roots, shown):
        body = tier_tables(root, name)
        if len(roots) > 1:
            lines += [f"### {render.code(name)}", ""]
        lines += body or [f"No tier records in {render.code(name + '/')}.", ""]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "artifacts", nargs="*", default=["artifacts"], help="the run's artifacts folder(s)"
    )
    parser.add_argument(
        "-o",
        "--output",
        help="markdown file to append to (default: $GITHUB_STEP_SUMMARY, else stdout)",
    )
    parser.add_argument(
        "--title",
        default=os.environ.get("TILEGATE_SUMMARY_TITLE") or os.environ.get("GITHUB_JOB", "gate"),
    )
    parser.add_argument(
        "--annotate", action="store_true", help="print a ::error annotation per failing test"
    )
    args = parser.parse_args()
    # a developer's artifacts/: its latest run
    roots = [run_folder(Path(a)) for a in args.artifacts]
    outcomes, files = outcomes_of(roots)
    text = (
        "\n".join(
            summary(
                roots, [a.rstrip("/") or "/" for a in args.artifacts], args.title, outcomes, files
            )
        )
        + "\n"
    )
    out = args.output or os.environ.get("GITHUB_STEP_SUMMARY")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.annotate:
        print("\n".join(render.error_annotations(outcomes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
