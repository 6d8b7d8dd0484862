"""scripts/step_summary.py over what a run really leaves: JUnit XML written by pytest itself (a
nested run of a few generated tests), the tier records, a planted-bug table. The verdict comes
first, then each failing test with its reason; failures become annotations at their file and line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.paths import REPO_ROOT
from tilegate.report import AGREEMENT_DIR, JUNIT_DIR

SUMMARY = REPO_ROOT / "scripts" / "step_summary.py"
TESTS = '''
import pytest

def test_green():
    assert 1 + 1 == 2

def test_planted_kernel_is_wrong():
    max_err = 4.2
    assert max_err <= 1.0, f"max err ratio {max_err} > 1"

@pytest.mark.skip(reason="no GPU: this check runs kernels")
def test_needs_a_gpu():
    pass
'''


def _junit(tmp: Path, name: str, select: str | None = None) -> Path:
    """A real pytest run over TESTS, its JUnit XML in <tmp>/artifacts/junit/<name>.xml."""
    (tmp / "tests").mkdir(parents=True, exist_ok=True)
    (tmp / "tests" / "test_generated.py").write_text(TESTS)
    out = tmp / "artifacts" / JUNIT_DIR / f"{name}.xml"
    where = f"tests/test_generated.py::{select}" if select else "tests"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-c", os.devnull,
           "--rootdir", str(tmp), "-o", "junit_family=xunit1", f"--junitxml={out}", where]
    subprocess.run(cmd, cwd=tmp, capture_output=True, timeout=120)
    assert out.is_file()
    return tmp / "artifacts"


def _summary(*folders, title="cpu (TileLang 0.1.15)") -> tuple[str, str]:
    """The summary (markdown, then the annotations) as the workflow's step prints it, and stderr."""
    proc = subprocess.run([sys.executable, str(SUMMARY), *map(str, folders), "--annotate"], capture_output=True, text=True,
                          timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"} | {"TILEGATE_SUMMARY_TITLE": title})
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
    assert annotation.startswith("::error file=tests/test_generated.py,line=7,title=tests.test_generated%3A%3Atest_planted")
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
    for name, table in (("sglang-gpu-planted-scale10-long-context", rows), ("sglang-gpu-planted-missed", ["a  ok"])):
        (failing / AGREEMENT_DIR / f"{name}.json").write_text(json.dumps({"results": [], "table": table}))
    text, _ = _summary(failing)
    assert "`sglang-gpu-planted-scale10-long-context` (planted bug, expected to fail: caught)" in text
    assert "caught: tokens diverge at step 8" in text and "FAIL: tokens" not in text
    assert "`sglang-gpu-planted-missed` (planted bug, expected to fail: NOT caught)" in text


def test_the_tilelang_0_1_12_run_has_its_own_section(failing):
    nested = _junit(failing.parent / "tl012", "x", select="test_green")
    (failing / "tilelang-0.1.12").mkdir()
    (nested / JUNIT_DIR / "x.xml").rename(failing / "tilelang-0.1.12" / "junit.xml")
    text, _ = _summary(failing)
    section = text[text.index("### TileLang 0.1.12"):]
    assert "**Verdict: passed** (1 passed; 1 pytest command)" in section
