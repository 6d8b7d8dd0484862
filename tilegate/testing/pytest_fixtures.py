"""The gate's session fixtures: the platform, the compiled-kernel caches, artifacts, SGLang's CPU
engines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tilegate.platform import detect

RUN_DIR_ENV = "TILEGATE_RUN_DIR"  # one folder per pytest run, shared by its xdist workers


def run_dir() -> Path:
    return Path(os.environ[RUN_DIR_ENV])


# The run's SGLang CPU children, by the fixture that reads each (tilegate.fixtures.e2e_prompts):
# sglang_engines below, sglang_long_context in suite/e2e/test_sglang_engine_long_context.py.
SGLANG_CPU_RUNS = {
    "sglang_engines": ("sglang-engines", "ENGINE_SPEC"),
    "sglang_long_context": ("sglang-long-context", "LONG_CONTEXT_SPEC"),
}


def sglang_engine_run():
    """The run's SGLang CPU children (tilegate.harness.sglang.driver.EngineRuns), shared by every
    worker through the run folder: the plugin starts those its selected tests read, at
    collection."""
    from tilegate.fixtures import e2e_prompts
    from tilegate.harness.sglang.driver import EngineRun, EngineRuns

    return EngineRuns(
        {
            name: EngineRun(run_dir() / folder, getattr(e2e_prompts, spec))
            for name, (folder, spec) in SGLANG_CPU_RUNS.items()
        }
    )


def sglang_runs_read_by(item: pytest.Item) -> list[str]:
    """The SGLang CPU children a collected test reads (the fixtures of SGLANG_CPU_RUNS it asks
    for)."""
    names = getattr(item, "fixturenames", ())
    return [name for name in SGLANG_CPU_RUNS if name in names]


@pytest.fixture(scope="session")
def sglang_engines() -> dict:
    """What the first SGLang child (tilegate.harness.sglang.child) reported: generations, errors,
    markers."""
    return sglang_engine_run().result("sglang_engines")


@pytest.fixture(scope="session")
def platform():
    return detect()


@pytest.fixture(scope="session")
def builder(request: pytest.FixtureRequest):
    """The session's compiled-kernel cache (one per xdist worker, backed by the disk cache)."""
    from tilegate.gate.builder import KernelBuilder  # imports TileLang: only where a test builds

    return KernelBuilder(Path(request.config.getoption("--tilegate-cache")))


@pytest.fixture
def fresh_builder(tmp_path: Path):
    """An empty cache, for tests of the cache itself."""
    from tilegate.gate.builder import KernelBuilder

    return KernelBuilder(tmp_path / "cache")


@pytest.fixture(scope="session")
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    path = Path(request.config.getoption("--artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture(scope="session")
def golden_reason(request: pytest.FixtureRequest) -> str | None:
    return request.config.getoption("--golden-reason")
