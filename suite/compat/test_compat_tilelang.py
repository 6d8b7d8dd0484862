"""TileLang versions: the gate supports 0.1.15 (its own environment) and 0.1.12 (SGLang 0.5.23's
pin), and checks the second from its own venv in a subprocess (tilegate/harness/tilelang_venv.py).

That subprocess is the longest single test: it is marked slow, and the plugin's
pytest_collection_modifyitems (tilegate/testing/pytest_plugin.py) starts tests marked slow before
the rest, so xdist does not leave it alone at the end of the run. The module's name plays no
part."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement

from tilegate.artifacts.records import venv_run_dir
from tilegate.fixtures.compile_cases import cases, fp16_accum_cases
from tilegate.gate import tilelang_versions as tv
from tilegate.gate.paths import REPO_ROOT
from tilegate.harness import tilelang_venv

# Skips a CPU machine's child run may report: the GPU compile tests, and a run that is 0.1.12
# itself.
EXPECTED_SKIPS = ("no GPU: ", "this run is TileLang 0.1.12 itself")


def test_pyproject_admits_exactly_the_supported_versions():
    import tomllib  # Python 3.11, the gate's (scripts/setup.sh)

    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(Requirement(d) for d in deps if Requirement(d).name == "tilelang").specifier
    candidates = [f"0.1.{patch}" for patch in range(8, 20)]
    assert [v for v in candidates if v in spec] == sorted(
        tv.SUPPORTED, key=lambda v: int(v.split(".")[-1])
    )


def test_every_supported_version_has_golden_snapshots():
    root = REPO_ROOT / "suite" / "golden" / "gfx942" / "debian-cross"
    for version in tv.SUPPORTED:
        assert any((root / f"tilelang-{version}").glob("*.json")), (
            f"no golden ISA snapshots for TileLang {version}"
        )


def test_smoke_subset_covers_every_kernel():
    from tilegate.gate.registry import KERNELS

    smoke = tilelang_venv.smoke_cases()
    assert {c.kernel for c in smoke} == set(KERNELS)
    assert {c.shape.dtype for c in smoke} == {"float16", "bfloat16"}
    assert {c.name for c in smoke} & {c.name for c in fp16_accum_cases("gfx942")}, (
        "no fp16-accumulating twin"
    )
    assert {c.name for c in smoke} < {c.name for c in cases("gfx942") + fp16_accum_cases("gfx942")}


def test_the_smoke_scope_keeps_the_tests_of_the_smoke_cases_only():
    smoke, other = (
        tilelang_venv.smoke_cases()[0],
        next(c for c in cases("gfx942") if not c.shape.causal),
    )
    items = [
        SimpleNamespace(callspec=SimpleNamespace(params={"case": smoke})),
        SimpleNamespace(callspec=SimpleNamespace(params={"case": other})),
        SimpleNamespace(callspec=SimpleNamespace(params={"damage": "truncated"})),
        SimpleNamespace(),
    ]
    kept, dropped = tilelang_venv.of_cases(items, {c.name for c in tilelang_venv.smoke_cases()})
    assert kept == items[:1] and dropped == items[1:]


@pytest.mark.nested
@pytest.mark.tilelang_venv("0.1.12")
@pytest.mark.slow  # the longest CPU test: scheduled first (tilegate/testing/pytest_plugin.py)
def test_compile_and_isa_tiers_under_tilelang_0_1_12(
    request, artifacts_dir, update_golden, golden_reason
):
    """The compile + ISA tiers (smoke subset; TILEGATE_TL012_SCOPE=full for all) in .venv-tl012:
    every selected test must pass there, golden snapshots included (a missing one fails here).
    With --update-golden, every 0.1.12 snapshot is re-recorded along with this run's."""
    cache = Path(request.config.getoption("--tilegate-cache"))
    result = tilelang_venv.run_tiers(
        "0.1.12",
        artifacts_dir / venv_run_dir("0.1.12"),
        cache,
        update_golden=update_golden,
        golden_reason=golden_reason,
    )
    print(
        f"TileLang 0.1.12 tiers: {len(result.passed)} passed, {len(result.failed)} failed, "
        f"{len(result.skipped)} skipped in {result.wall_s:.0f} s (log {result.log})"
    )
    unexpected = [o for o in result.skipped if not o.reason.startswith(EXPECTED_SKIPS)]
    problems = [f"{o.kind} {o.test}: {o.reason}" for o in result.failed + unexpected]
    if result.returncode != 0 and not problems:
        problems = [f"pytest exited {result.returncode}:\n{result.log.read_text()[-4000:]}"]
    assert not problems, (
        f"under TileLang 0.1.12 ({tv.venv_python('0.1.12')}), log {result.log}:\n"
        + "\n".join(problems)
        + "\nif an ISA change is meant, re-record both versions' "
        'snapshots: pytest -m "isa or (compat and nested)" --update-golden '
        '--golden-reason="why, in one line"'
    )
    assert result.passed, f"no test ran under TileLang 0.1.12: {result.log}"
