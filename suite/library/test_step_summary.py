"""scripts/step_summary.py over what a run really leaves: JUnit XML written by pytest itself (a
nested run of a few generated tests), the tier records, a planted-bug table. The verdict comes
first, then each failing test with its reason; failures become annotations at their file and
line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from isolated_pytest import PYTEST_WITHOUT_INI

from tilegate.artifacts import render
from tilegate.artifacts.records import (
    AGREEMENT_DIR,
    JUNIT_DIR,
    IsaRecord,
    MemoryRecord,
    NumericsRecord,
    StressRecord,
    load,
)
from tilegate.artifacts.writer import write
from tilegate.gate.paths import REPO_ROOT

SUMMARY = REPO_ROOT / "scripts" / "step_summary.py"
TESTS = """
import pytest

def test_green():
    assert 1 + 1 == 2

def test_planted_kernel_is_wrong():
    max_err = 4.2
    assert max_err <= 1.0, f"max err ratio {max_err} > 1"

@pytest.mark.skip(reason="no GPU: this check runs kernels")
def test_needs_a_gpu():
    pass
"""


def _junit(tmp: Path, name: str, select: str | None = None) -> Path:
    """A real pytest run over TESTS, its JUnit XML in <tmp>/artifacts/junit/<name>.xml."""
    (tmp / "tests").mkdir(parents=True, exist_ok=True)
    (tmp / "tests" / "test_generated.py").write_text(TESTS)
    out = tmp / "artifacts" / JUNIT_DIR / f"{name}.xml"
    where = f"tests/test_generated.py::{select}" if select else "tests"
    cmd = [
        *PYTEST_WITHOUT_INI,
        "-p",
        "no:xdist",
        "--rootdir",
        str(tmp),
        "-o",
        "junit_family=xunit1",
        f"--junitxml={out}",
        where,
    ]
    # TMPDIR: the failing run keeps its run folder (tilegate/testing/pytest_plugin.py), here with
    # the test's files
    subprocess.run(
        cmd, cwd=tmp, capture_output=True, timeout=120, env=os.environ | {"TMPDIR": str(tmp)}
    )
    assert out.is_file()
    return tmp / "artifacts"


def _summary(*folders, title="cpu (TileLang 0.1.15)") -> tuple[str, str]:
    """The summary (markdown, then the annotations) as the workflow's step prints it, and stderr."""
    proc = subprocess.run(
        [sys.executable, str(SUMMARY), *map(str, folders), "--annotate"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
        | {"TILEGATE_SUMMARY_TITLE": title},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


@pytest.fixture
def failing(tmp_path) -> Path:
    return _junit(tmp_path, "cpu")


def test_a_failing_run_says_so_first_and_names_the_test_and_its_reason(failing, tmp_path):
    text, _ = _summary(failing)
    lines = [ln for ln in text.splitlines() if ln]
    assert lines[0] == "## tilegate: cpu (TileLang 0.1.15)"
    assert lines[1] == "**Verdict: failed** (1 failed, 1 passed, 1 skipped; 1 pytest command)"
    row = next(ln for ln in lines if "test_planted_kernel_is_wrong" in ln)
    assert "max err ratio 4.2 > 1" in row
    assert any("| 1 | no GPU: this check runs kernels |" in ln for ln in lines)
    annotation = next(ln for ln in lines if ln.startswith("::error "))
    assert annotation.startswith(
        "::error file=tests/test_generated.py,line=7,title=tests.test_generated%3A%3Atest_planted"
    )
    assert "max err ratio 4.2 > 1" in annotation


def test_a_green_run_and_the_shards_of_one_run_summarised_together(tmp_path):
    green = _junit(tmp_path / "shard-1", "rocm-1", select="test_green")
    other = _junit(tmp_path / "shard-2", "rocm-1", select="test_needs_a_gpu")
    text, _ = _summary(green, other, title="MI300X gate (both shards)")
    assert "**Verdict: passed** (1 passed, 1 skipped; 2 pytest commands)" in text
    assert f"### `{green}`" in text and f"### `{other}`" in text
    assert "::error" not in text


def test_a_run_that_wrote_no_results_still_says_what_it_is(tmp_path):
    text, _ = _summary(tmp_path)
    assert "**Verdict: no test results**" in text.splitlines()[2]


def test_planted_bug_tables_read_as_expected_failures(failing):
    rows = ["prompt  verdict", "retrieval-8192  FAIL: tokens diverge at step 8"]
    (failing / AGREEMENT_DIR).mkdir()
    for name, table in (
        ("sglang-gpu-planted-scale10-long-context", rows),
        ("sglang-gpu-planted-missed", ["a  ok"]),
    ):
        (failing / AGREEMENT_DIR / f"{name}.json").write_text(
            json.dumps({"results": [], "table": table})
        )
    text, _ = _summary(failing)
    assert (
        "`sglang-gpu-planted-scale10-long-context` (planted bug, expected to fail: caught)" in text
    )
    assert "caught: tokens diverge at step 8" in text and "FAIL: tokens" not in text
    assert "`sglang-gpu-planted-missed` (planted bug, expected to fail: NOT caught)" in text


def test_the_tilelang_0_1_12_run_has_its_own_section(failing):
    nested = _junit(failing.parent / "tl012", "x", select="test_green")
    (failing / "tilelang-0.1.12").mkdir()
    (nested / JUNIT_DIR / "x.xml").rename(failing / "tilelang-0.1.12" / "junit.xml")
    text, _ = _summary(failing)
    section = text[text.index("### TileLang 0.1.12") :]
    assert "**Verdict: passed** (1 passed; 1 pytest command)" in section


ISA = IsaRecord(
    "flash_fwd-causal-d128-fp16-m128n64w4",
    compiler="clang",
    target_id="amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
    code_object_version=5,
    wavefront_size=64,
    vgpr_count=240,
    agpr_count=64,
    sgpr_count=55,
    vgpr_spill_count=0,
    sgpr_spill_count=0,
    private_segment_bytes=0,
    lds_bytes=18432,
    threads=256,
    occupancy={
        "workgroups_per_cu": 2,
        "waves_per_cu": 8,
        "waves_per_simd": 2.0,
        "limited_by": "vgpr",
        "limits": {},
    },
    mfma={"v_mfma_f32_16x16x16_f16": 64},
    lds_reads={"ds_read_u16": 3},
    global_loads={},
    scratch=0,
    inner_loop_cycles=1432.4,
    inner_loop_loads=8,
    loads_not_overlapped=0,
    barriers_per_iteration=7,
    reduction_lds_round_trips=8,
)


def _records(root: Path) -> None:
    write(root, ISA)
    write(
        root,
        NumericsRecord(
            "causal-fp16",
            dtype="float16",
            passed=True,
            max_ratio=0.5,
            mean_ratio=0.25,
            max_err=1e-3,
            mean_err=1e-4,
            baseline_max_err=1e-3,
            baseline_mean_err=1e-4,
        ),
    )
    write(root, MemoryRecord("decode-32k", io_bytes=3 * 2**20, extra_bytes_during_call=2**19))


def test_the_summary_needs_only_the_standard_library(failing):
    # As an `if: always()` step runs it where set-up failed: no site-packages (-S), no PYTHONPATH
    # and not even its own folder on sys.path (-I): only its checkout, which it finds itself.
    _records(failing)
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(SUMMARY), str(failing), "--annotate"],
        capture_output=True,
        text=True,
        timeout=60,
        env={},
    )
    assert proc.returncode == 0, proc.stderr
    assert "**Verdict: failed**" in proc.stdout and "### gfx942 ISA (1 code objects)" in proc.stdout
    assert "::error file=tests/test_generated.py" in proc.stdout


def test_the_terminal_and_the_step_summary_show_the_same_records(failing):
    _records(failing)
    text, _ = _summary(failing)
    terminal = dict(render.terminal_sections(failing))
    cells = [
        "flash_fwd-causal-d128-fp16-m128n64w4",
        "240",
        "64",
        "18432",
        "2",
        "2.00",
        "vgpr",
        "64",
        "3",
        "1432.4",
        "0/8",
        "7",
        "8",
    ]
    assert terminal["gfx942 ISA summary"][1].split() == cells
    assert "| `flash_fwd-causal-d128-fp16-m128n64w4` | " + " | ".join(cells[1:]) + " |" in text
    numerics, memory = terminal["numerics, memory and drift summary"]
    assert numerics.startswith(
        "numerics float16: 1 checks, 1 within bound; worst max-error ratio 0.500 (causal-fp16)"
    )
    assert "| float16 | 1 | 1 | 0.500 | `causal-fp16` | 0.250 | `causal-fp16` |" in text
    assert memory == "memory decode-32k: inputs+output 3 MiB, allocated during the call 0.50 MiB"
    assert "| `decode-32k` | 3 | 0.50 |" in text


def test_stress_passes_read_as_same_bits_or_caught(failing):
    def rec(name, differing, first_within_bound=True):
        return StressRecord(
            name,
            kernel="extend",
            config="m192n128w12-ws",
            target="sm90",
            competitor="",
            first_within_bound=first_within_bound,
            repeats=300,
            differing=differing,
            most_elements_differing=differing * 7,
            seconds=0.3,
        )

    for r in (
        rec("sm90-extend-ws-alone", 0),
        rec("sm90-extend-pf-alone", 2),
        rec("planted-v_ready-alone", 8),
        rec("planted-early-alone", 0, first_within_bound=False),
        rec("planted-missed-alone", 0),
    ):
        write(failing, r)
    text, _ = _summary(failing)
    assert "| `sm90-extend-ws-alone` | same bits, within bound | alone | 300 | 0 | 0.000 |" in text
    assert "| `sm90-extend-pf-alone` | DIFFERS |" in text
    assert (
        "| `planted-v_ready-alone` | planted race: caught in this pass | alone | 300 | 8 | 0.027 |"
        in text
    )
    # the first launch was off
    assert "| `planted-early-alone` | planted race: caught in this pass |" in text
    assert "| `planted-missed-alone` | planted race: not seen in this pass |" in text


def test_a_record_is_written_as_its_fields_and_read_back_the_same(tmp_path):
    path = write(tmp_path, ISA)
    assert json.loads(path.read_text()) == ISA.data() and "name" not in ISA.data()
    # the golden snapshots' format
    assert path.read_text() == json.dumps(ISA.data(), indent=1, sort_keys=True) + "\n"
    assert load(tmp_path, IsaRecord) == [ISA]
