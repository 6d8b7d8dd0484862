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
tilegate.artifacts.render (every rendering of them, the terminal summary's and this page's
sections too), which import
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
from tilegate.artifacts.records import ERROR, Outcome, junit_files, read_junit, run_folder


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
            render.step_summary(
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
