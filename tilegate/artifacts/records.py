"""The records a run leaves in its artifacts folder, typed: one JSON file per check (ISA, numerics,
memory, drift, agreement) and the JUnit XML of each pytest command. tilegate/artifacts/render.py
renders them (the JSON files, the terminal summary, the step summary); tilegate/artifacts/writer.py
writes them.

Standard library only, and nothing else of tilegate at run time: scripts/step_summary.py reads
these in an ``if: always()`` step, where the gate's environment may never have been set up.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from tilegate.gfx942.isa import IsaReading

ISA_DIR, NUMERICS_DIR, MEMORY_DIR, DRIFT_DIR, AGREEMENT_DIR = (
    "isa",
    "numerics",
    "memory",
    "drift",
    "agreement",
)
# the opt-in tiers' tables and logs
PERF_DIR, SANITIZE_DIR, COUNTERS_DIR = "perf", "sanitize", "counters"
STRESS_DIR = "stress"
KERNEL_SOURCES_DIR = (
    "kernel-sources"  # kernels the gate did not write: provenance and known findings
)
# each pytest command's --junitxml under tox (tox.ini): the step summary's verdict
JUNIT_DIR = "junit"
# a developer's runs (tilegate/testing/run_records.py): artifacts/runs/<time>-<pid>/, and the link
# artifacts/latest to the newest
RUNS, LATEST = "runs", "latest"
RUN_NAME = re.compile(r"\d{8}T\d{6}-\d+")
PLANTED = "planted"  # in the name of every planted-bug record: it must fail


def venv_run_dir(version: str) -> str:
    """The folder, under artifacts/, of the compile + ISA tiers' run under another TileLang
    (suite/compat/test_compat_tilelang.py): its own isa/ records and junit.xml."""
    return f"tilelang-{version}"


@dataclass(frozen=True)
class Record:
    """<artifacts>/<folder>/<name>.json holds every field but ``name``."""

    folder: ClassVar[str]
    name: str

    def data(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}

    @classmethod
    def from_data(cls: type[R], name: str, data: dict[str, Any]) -> R:
        """Fields another commit's gate added are left out; a field this one needs and the file
        lacks is a TypeError (the step summary then names the file it could not show)."""
        known = {f.name for f in fields(cls)} - {"name"}
        return cls(name=name, **{k: v for k, v in data.items() if k in known})


R = TypeVar("R", bound=Record)


# The step summary reads records that the code under test wrote: it follows no link and reads no
# file that is not regular, nor more of one than this (a record is kilobytes; a log a few MiB).
RECORD_CAP = 64 * 2**20


def plain_files(folder: Path, pattern: str) -> list[Path]:
    """The entries ``folder/pattern`` that are not folders, sorted, if ``folder`` is a folder and
    not a link to one. A link or device among them is listed: read_plain refuses it, by name."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
    except OSError:
        return []
    return sorted(f for f in folder.glob(pattern) if not stat.S_ISDIR(os.lstat(f).st_mode))


def read_plain(path: Path, cap: int = RECORD_CAP) -> bytes:
    """The bytes of ``path``, a regular file opened without following a link, of at most ``cap``
    bytes; anything else is an OSError that names why."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(f"{path.name}: a symbolic link, not followed") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name}: not a regular file")
        if info.st_size > cap:
            raise OSError(f"{path.name}: {info.st_size} bytes, over the {cap}-byte cap")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(cap + 1)[:cap]
    finally:
        os.close(fd)


def read_plain_text(path: Path, cap: int = RECORD_CAP) -> str:
    return read_plain(path, cap).decode("utf-8", errors="replace")


def load(artifacts: Path, kind: type[R]) -> list[R]:
    """Every record of ``kind`` under ``artifacts``, by name."""
    out = []
    for f in plain_files(artifacts / kind.folder, "*.json"):
        try:
            out.append(kind.from_data(f.stem, json.loads(read_plain(f))))
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"{kind.folder}/{f.name}: {e}") from e
    return out


@dataclass(frozen=True)
class IsaRecord(Record):
    """One gfx942 code object: tilegate.gfx942.isa.IsaReading.metrics() and the compiler that
    built it. Its JSON is the golden snapshot's format (suite/golden/,
    tilegate/gfx942/golden.py)."""

    folder: ClassVar[str] = ISA_DIR
    compiler: str
    target_id: str
    code_object_version: int
    wavefront_size: int
    vgpr_count: int
    agpr_count: int
    sgpr_count: int
    vgpr_spill_count: int
    sgpr_spill_count: int
    private_segment_bytes: int
    lds_bytes: int
    threads: int
    occupancy: dict[str, Any]  # tilegate.gfx942.isa.Occupancy as a dict
    mfma: dict[str, int]  # instruction histograms
    lds_reads: dict[str, int]
    global_loads: dict[str, int]
    scratch: int
    inner_loop_cycles: float | None = None  # llvm-mca, per iteration
    # the inner loop's latency proxies (tilegate/gfx942/latency.py); None in a record from before
    # them
    inner_loop_loads: int | None = None
    loads_not_overlapped: int | None = None
    barriers_per_iteration: int | None = None
    reduction_lds_round_trips: int | None = None

    @classmethod
    def from_report(cls, name: str, report: IsaReading) -> IsaRecord:
        # a metric with no field is a TypeError
        return cls(name=name, compiler=report.compiler, **report.metrics())


@dataclass(frozen=True)
class NumericsRecord(Record):
    """One numerics check: error ratios to plain torch in the same dtype (<= 1 passes), the
    errors, and where it was and where it failed: the test, the config table's target, the inputs'
    seed, the worst element and its site in the tiling (tilegate/gate/tile_site.py), the rows
    holding NaN/Inf."""

    folder: ClassVar[str] = NUMERICS_DIR
    dtype: str
    passed: bool
    max_ratio: float
    mean_ratio: float
    max_err: float
    mean_err: float
    baseline_max_err: float
    baseline_mean_err: float
    test_id: str = ""
    target: str = ""
    seed: int | None = None
    worst_index: list[int] | None = None
    worst_site: str = ""
    nonfinite_rows: int = 0


@dataclass(frozen=True)
class StressRecord(Record):
    """One stress pass (tilegate/harness/stress.py): the same launch repeated, each output compared
    bit for bit with the first; ``competitor`` names what shared the GPU ("" when alone)."""

    folder: ClassVar[str] = STRESS_DIR
    kernel: str
    config: str
    target: str  # the config table's
    competitor: str
    first_within_bound: bool  # the first launch against FP32 (the numerics judge)
    repeats: int
    differing: int  # repeats whose output differs from the first in any bit
    most_elements_differing: int
    seconds: float

    @property
    def fraction(self) -> float:
        return self.differing / self.repeats if self.repeats else 0.0

    @property
    def verdict(self) -> str:
        """Of this pass. A planted race's test needs one of its passes (or the first launch) to
        catch it."""
        caught = self.differing > 0 or not self.first_within_bound
        if PLANTED in self.name:
            return f"planted race: {'caught' if caught else 'not seen'} in this pass"
        return "DIFFERS" if caught else "same bits, within bound"


@dataclass(frozen=True)
class MemoryRecord(Record):
    folder: ClassVar[str] = MEMORY_DIR
    io_bytes: int  # inputs and output
    extra_bytes_during_call: int


@dataclass(frozen=True)
class DriftRecord(Record):
    """Error growth with sequence length: DriftSeries.as_dict() each, and their table's lines
    (tilegate.references.drift.table_lines: rendered where the series are, shown as written)."""

    folder: ClassVar[str] = DRIFT_DIR
    series: list[dict[str, Any]]
    table: list[str]

    def plot(self, artifacts: Path) -> Path:
        return artifacts / self.folder / f"{self.name}.png"


@dataclass(frozen=True)
class AgreementRecord(Record):
    """Token agreement: Agreement.as_dict() each (or a subclass's), and their table's lines."""

    folder: ClassVar[str] = AGREEMENT_DIR
    results: list[dict[str, Any]]
    table: list[str]


# --- test outcomes, from the JUnit XML each pytest command writes --------------------------

REASON_CHARS = 300
FAILED, ERROR, SKIPPED, PASSED = "failed", "error", "skipped", "passed"


@dataclass(frozen=True)
class Outcome:
    test: str  # module::name, as pytest names it
    kind: str  # FAILED, ERROR, SKIPPED or PASSED
    reason: str = ""  # one line: why it failed or skipped
    file: str | None = None  # junit_family xunit1 records the test's file and line
    line: int | None = None


def _reason(element: ET.Element) -> str:
    """pytest's message (the assertion's text) up to its own ``assert ...`` echo, on one line, cut
    at REASON_CHARS: a message that ends in ':' is followed by what it announces (the golden
    snapshot's changed fields, say)."""
    text = (element.get("message") or element.text or "").strip()
    lines = []
    for ln in (ln.strip() for ln in text.splitlines()):
        if ln.startswith(("assert ", "where ", "+  where")):
            break
        if ln:
            lines.append(ln)
    joined = " ".join(lines) or element.tag
    return joined if len(joined) <= REASON_CHARS else joined[: REASON_CHARS - 3] + "..."


def read_junit(path: Path) -> list[Outcome]:
    out = []
    for tc in ET.fromstring(read_plain(path)).iter("testcase"):
        # xdist's --dist loadgroup adds "@<group>"
        name = re.sub(r"@[\w.\-]+$", "", tc.get("name", ""))
        test = f"{tc.get('classname', '')}::{name}".lstrip(":")
        raw = tc.get("line")
        # 0-based in the XML
        file, line = tc.get("file"), (int(raw) + 1 if raw and raw.isdigit() else None)
        marks = {child.tag: child for child in tc if child.tag in ("failure", "error", "skipped")}
        if "failure" in marks:
            out.append(Outcome(test, FAILED, _reason(marks["failure"]), file, line))
        elif "error" in marks:
            out.append(Outcome(test, ERROR, _reason(marks["error"]), file, line))
        elif "skipped" in marks:
            out.append(Outcome(test, SKIPPED, _reason(marks["skipped"]), file, line))
        else:
            out.append(Outcome(test, PASSED, "", file, line))
    return out


def junit_files(root: Path) -> list[Path]:
    return plain_files(root / JUNIT_DIR, "*.xml")


def verdict(outcomes: list[Outcome], files: int) -> str:
    if not files:
        return "no test results"
    kinds = Counter(o.kind for o in outcomes)
    if kinds[FAILED] or kinds[ERROR]:
        return FAILED
    return PASSED if kinds[PASSED] else SKIPPED


@dataclass(frozen=True)
class KernelSourceRecord(Record):
    """An adapted kernel as this run found it (tilegate.families): its source and sha256, and the
    findings its adapter declares, each with the builds or cases it covers."""

    folder: ClassVar[str] = KERNEL_SOURCES_DIR
    source: str
    sha256: str
    findings: list[dict[str, Any]]

    @classmethod
    def of(cls, kernel) -> KernelSourceRecord:  # a tilegate.families.Kernel
        def scope(f) -> dict[str, Any]:
            found = {
                k: sorted(v)
                for k in ("problems", "configs", "cases")
                if (v := getattr(f, k)) is not None
            }
            return found | {k: [v] for k in ("tilelang", "gpu") if (v := getattr(f, k)) is not None}

        return cls(
            kernel.name,
            source=kernel.provenance.label,
            sha256=kernel.provenance.sha256(),
            findings=[
                {"rules": sorted(f.rules), "reason": f.reason, **scope(f)} for f in kernel.findings
            ],
        )


def latest_run(root: Path) -> Path | None:
    """The run folder ``root/latest`` names, read as text (a link is never followed): None when it
    is missing or names anything but a folder of ``root/runs``."""
    try:
        target = os.readlink(root / LATEST)
    except OSError:
        return None
    name = target.removeprefix(f"{RUNS}/")
    if target != f"{RUNS}/{name}" or not RUN_NAME.fullmatch(name):
        return None
    return root / RUNS / name


def run_folder(root: Path) -> Path:
    """The folder a reader of ``root`` wants: the run ``root/latest`` names, else ``root`` itself (a
    run folder named by --artifacts)."""
    return latest_run(root) or root
