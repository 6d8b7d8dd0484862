"""SGLang 0.5.23's TileLang kernels through the kernel tiers, gfx942 compile and ISA, in
the venv that has SGLang (tilegate/harness/sglang/kernels_venv.py), under SGLang's TileLang pin
and the gate's. Every test there passes, is a strict expected failure (a known finding,
tilegate/families/ sglang_findings.py), or skips for a reason the adapters' capabilities give."""

import shutil

import pytest

from tilegate.artifacts.records import KERNEL_SOURCES_DIR, PASSED, REASON_CHARS
from tilegate.families import sglang_dsa, sglang_dsv4, sglang_qsa
from tilegate.harness.sglang import kernels_venv
from tilegate.testing import skips

EXPECTED_SKIPS = ("no GPU: ", "opt-in tier: ")
KERNELS = sglang_dsa.KERNELS + sglang_dsv4.KERNELS + sglang_qsa.KERNELS
FINDINGS = {f.reason for k in KERNELS for f in k.findings}


@pytest.mark.nested
@pytest.mark.sglang
@pytest.mark.slow  # started first (tilegate/testing/pytest_plugin.py)
@pytest.mark.parametrize("version", ["0.1.12", "0.1.15"])
def test_sglang_kernels_gfx942_tiers(request, artifacts_dir, version):
    if reason := kernels_venv.missing_reason(version):
        skips.missing(reason)
    # JUnit gives a reason back cut at REASON_CHARS: a longer one would not be known here
    builds = [f.reason for k in KERNELS for f in k.findings if not f.cases]
    cut = [r for r in builds if len(r) > REASON_CHARS]
    assert not cut, f"build findings' reasons over {REASON_CHARS} characters: {cut}"
    out = artifacts_dir / f"kernels-tilelang-{version}"
    result = kernels_venv.run_tiers(version, out, request.config.getoption("--tilegate-cache"))
    xfailed = [o for o in result.skipped if o.reason in FINDINGS]
    other = [
        o
        for o in result.skipped
        if o not in xfailed
        and not o.reason.startswith(EXPECTED_SKIPS)
        and "its capabilities leave out" not in o.reason
    ]
    problems = [f"{o.kind} {o.test}: {o.reason}" for o in result.failed + other]
    assert not problems, (
        f"SGLang's kernels under TileLang {version}, log {result.log}:\n" + "\n".join(problems)
    )
    assert result.returncode == 0, f"pytest exited {result.returncode}: {result.log}"
    ran = {o.test.split("[")[0].rsplit("::", 1)[-1] for o in result.passed + xfailed}
    assert {"test_kernel_compile", "test_kernel_isa", "test_kernel_provenance"} <= ran, (
        ran,
        result.log,
    )
    assert xfailed, f"no known finding was checked: {result.log}"
    # the step summary's findings
    shutil.copytree(
        out / KERNEL_SOURCES_DIR, artifacts_dir / KERNEL_SOURCES_DIR, dirs_exist_ok=True
    )
    print(
        f"TileLang {version}: {len([o for o in result.outcomes if o.kind == PASSED])} passed, "
        f"{len(xfailed)} known "
        f"findings, {len(result.skipped) - len(xfailed)} skipped in {result.wall_s:.0f} s"
    )
