"""The verdict of a gate run, read from the JUnit XML its pytest commands wrote (tox passes
--junitxml=<artifacts>/junit/<env>-<n>.xml to each): for scripts/step_summary.py. Stdlib only.

A failure's one-line reason is pytest's message (the assertion's text) up to its own ``assert``
echo, on one line, cut at REASON_CHARS. Annotations are GitHub workflow commands (``::error file=..::``):
printed to a step's output, they mark the failing test's line in the pull request's files.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

JUNIT_DIR = "junit"  # tilegate/report.py's JUNIT_DIR
REASON_CHARS = 300
FAILED, ERROR, SKIPPED, PASSED = "failed", "error", "skipped", "passed"


@dataclass(frozen=True)
class Outcome:
    test: str  # module::name, as pytest names it
    kind: str  # FAILED, ERROR, SKIPPED or PASSED
    reason: str = ""  # one line: why it failed or skipped
    file: str | None = None  # junit_family xunit1 records the test's file and line
    line: int | None = None


def _reason(element) -> str:
    """The message's lines up to pytest's own ``assert ...`` echo, joined: a message that ends in
    ':' is followed by what it announces (the golden snapshot's changed fields, say)."""
    text = (element.get("message") or element.text or "").strip()
    lines = []
    for ln in (ln.strip() for ln in text.splitlines()):
        if ln.startswith(("assert ", "where ", "+  where")):
            break
        if ln:
            lines.append(ln)
    joined = " ".join(lines) or element.tag
    return joined if len(joined) <= REASON_CHARS else joined[:REASON_CHARS - 3] + "..."


def read(path: Path) -> list[Outcome]:
    out = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = re.sub(r"@[\w.\-]+$", "", tc.get("name", ""))  # xdist's --dist loadgroup adds "@<group>"
        test = f"{tc.get('classname', '')}::{name}".lstrip(":")
        line = tc.get("line")
        where = {"file": tc.get("file"), "line": int(line) + 1 if line and line.isdigit() else None}  # 0-based in the XML
        marks = {child.tag: child for child in tc if child.tag in ("failure", "error", "skipped")}
        if "failure" in marks:
            out.append(Outcome(test, FAILED, _reason(marks["failure"]), **where))
        elif "error" in marks:
            out.append(Outcome(test, ERROR, _reason(marks["error"]), **where))
        elif "skipped" in marks:
            out.append(Outcome(test, SKIPPED, _reason(marks["skipped"]), **where))
        else:
            out.append(Outcome(test, PASSED, **where))
    return out


def junit_files(root: Path) -> list[Path]:
    return sorted((root / JUNIT_DIR).glob("*.xml"))


def verdict(outcomes: list[Outcome], files: int) -> str:
    if not files:
        return "no test results"
    kinds = Counter(o.kind for o in outcomes)
    if kinds[FAILED] or kinds[ERROR]:
        return FAILED
    return PASSED if kinds[PASSED] else SKIPPED


def verdict_lines(outcomes: list[Outcome], files: int) -> list[str]:
    """The verdict first, then every failing test with its reason, then the skip reasons counted."""
    kinds = Counter(o.kind for o in outcomes)
    counts = ", ".join(f"{kinds[k]} {k}" for k in (FAILED, ERROR, PASSED, SKIPPED) if kinds[k])
    v = verdict(outcomes, files)
    if not files:
        return [f"**Verdict: {v}**: no JUnit XML under `{JUNIT_DIR}/` (pytest did not finish, or never started:"
                " see the job log)", ""]
    lines = [f"**Verdict: {v}** ({counts}; {files} pytest command{'s' if files != 1 else ''})", ""]
    bad = [o for o in outcomes if o.kind in (FAILED, ERROR)]
    if bad:
        lines += ["| failing test | reason |", "|---|---|"]
        lines += [f"| `{o.test}` | {_cell(('error: ' if o.kind == ERROR else '') + o.reason)} |" for o in bad]
        lines.append("")
    skips = Counter(o.reason for o in outcomes if o.kind == SKIPPED)
    if skips:
        lines += ["<details><summary>skipped, by reason</summary>", "", "| tests | reason |", "|---|---|"]
        lines += [f"| {n} | {_cell(reason)} |" for reason, n in skips.most_common()]
        lines += ["", "</details>", ""]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (toolkit's issueCommand): data, and property values."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotations(outcomes: list[Outcome]) -> list[str]:
    """One ``::error`` command per failing test, at its file and line where the XML has them."""
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
