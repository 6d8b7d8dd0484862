"""tilegate's pytest wiring: options, the platform, the one place that skips, caches, artifacts.

Skips are decided here from markers and nowhere else:
  gpu    needs a ROCm or CUDA device
  rocm   needs a gfx942 (MI300X) device under ROCm
  cuda   needs a CUDA device
  llama3 needs --llama3-path=DIR / TILEGATE_LLAMA3_PATH (a local Meta-Llama-3 checkpoint)
  sglang needs .venv-sglang (scripts/install-sglang-cpu.sh): SGLang's real engine on the CPU;
         with gpu, SGLang's GPU build in this python (the MI300X runner must have it: no skip there)
  tilelang_venv(V)  needs TileLang V's venv (scripts/install-tilelang-venv.sh V); skips in a run that is V itself
  config_target(T)  a GPU case built from target T's tile-config table: runs where the local GPU uses T
  sanitize, counters, perf  opt-in tiers (slow; a profiling tool or a quiet GPU): run only when -m names them
The compile and ISA tiers need only a CPU: they never skip; a missing toolchain is an
error with the install command in it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tilegate import gpu_workers

# An xdist worker takes its GPU before anything below can initialise the device.
if os.environ.get("PYTEST_XDIST_WORKER"):
    gpu_workers.pin_worker(os.environ["PYTEST_XDIST_WORKER"])

from tilegate import tilelang_versions  # noqa: E402
from tilegate.paths import REPO_ROOT  # noqa: E402
from tilegate.platform import detect  # noqa: E402
from tilegate.report import agreement_summary_lines, clear_run_artifacts, isa_summary_lines, runtime_summary_lines  # noqa: E402
from tilegate.watchdog import dump_stacks_on_sigusr1, report_path, reports  # noqa: E402

NO_GPU_TEST_PASSED = pytest.StashKey[bool]()
_gpu_passed: list[str] = []  # on the controller too: xdist replays its workers' reports there


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tilegate")
    group.addoption("--artifacts", default=os.environ.get("TILEGATE_ARTIFACTS", str(REPO_ROOT / "artifacts")),
                    help="folder for code objects, listings and metric snapshots (default: artifacts/)")
    group.addoption("--keep-artifacts", action="store_true",
                    help="add to the artifacts folder instead of clearing it first: the later pytest commands "
                         "of one gate run (tox -e rocm) keep the earlier ones' records for the summary")
    group.addoption("--tilegate-cache", default=os.environ.get("TILEGATE_CACHE", str(REPO_ROOT / ".cache" / "tilegate")),
                    help="disk cache of lowered kernels and code objects")
    group.addoption("--update-golden", action="store_true",
                    help="rewrite the committed ISA golden snapshots from this run instead of comparing")
    group.addoption("--require-gpu", action="store_true",
                    help="fail the run unless at least one GPU test passed (GPU runners set this)")
    group.addoption("--update-counter-baseline", action="store_true",
                    help="record this run's hardware counters as the device's baseline (suite/baselines/counters/)")
    group.addoption("--update-perf-baseline", action="store_true",
                    help="record this run's speed ratios, with their measured noise, as the device's baseline (suite/baselines/perf/)")
    group.addoption("--llama3-path", default=os.environ.get("TILEGATE_LLAMA3_PATH"),
                    help="local Meta-Llama-3 checkpoint folder for the llama3 end-to-end tests "
                         "(default: $TILEGATE_LLAMA3_PATH)")


def pytest_report_header(config: pytest.Config) -> str:
    return (f"tilegate: TileLang {tilelang_versions.RUNNING} "
            f"(supported: {', '.join(tilelang_versions.SUPPORTED)}; ISA golden snapshots per version)")


RUN_DIR_ENV = "TILEGATE_RUN_DIR"  # one folder per pytest run, shared by its xdist workers


def pytest_configure(config: pytest.Config) -> None:
    config.stash[NO_GPU_TEST_PASSED] = False
    dump_stacks_on_sigusr1()  # every process of the run, workers included
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), before any worker starts: they inherit both
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="tilegate-run-")
        gpu_workers.controller_setup()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: runs without xdist must not fail on it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: TILEGATE_WORKERS_PER_GPU workers for each GPU of the node, else one per CPU."""
    return gpu_workers.workers_for(gpu_workers.controller_setup())


def pytest_sessionstart(session: pytest.Session) -> None:
    controller = getattr(session.config, "workerinput", None) is None  # once per run
    if controller and not session.config.getoption("--keep-artifacts"):
        clear_run_artifacts(Path(session.config.getoption("--artifacts")))


OPT_IN_TIERS = ("sanitize", "counters", "perf")


def _skip_reason(item: pytest.Item) -> str | None:
    plat = detect()
    for tier in OPT_IN_TIERS:
        if item.get_closest_marker(tier) and tier not in (item.config.getoption("markexpr") or ""):
            return f"opt-in tier: select it with -m {tier}"
    if item.get_closest_marker("rocm") and not (plat.kind == "rocm" and plat.arch == "gfx942"):
        return f"no gfx942 ROCm device (have {plat.describe()}): gfx942 runtime checks need an MI300X runner"
    if item.get_closest_marker("cuda") and plat.kind != "cuda":
        return f"no CUDA device (have {plat.describe()})"
    if item.get_closest_marker("gpu") and not plat.has_gpu:
        return "no GPU: this check runs kernels or compiles for the local GPU"
    config_target = item.get_closest_marker("config_target")
    if config_target and plat.config_target != config_target.args[0]:
        return (f"{config_target.args[0]} tile config: this GPU ({plat.describe()}) uses "
                f"{plat.config_target or 'no'} table")
    tilelang_venv = item.get_closest_marker("tilelang_venv")
    if tilelang_venv and (reason := tilelang_versions.missing_reason(*tilelang_venv.args)):
        return reason  # a venv that is there but broken fails the test
    if item.get_closest_marker("sanitize") and plat.kind == "cuda":
        from tilegate.harness.sanitizer import find_compute_sanitizer

        if find_compute_sanitizer() is None:
            return "no compute-sanitizer (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): the CUDA toolkit's sanitizer is needed"
    if item.get_closest_marker("counters") and plat.has_gpu:
        from tilegate.harness.counters import missing_profiler

        if reason := missing_profiler(plat.kind):
            return reason
    if item.get_closest_marker("llama3") and not item.config.getoption("--llama3-path"):
        return "no Meta-Llama-3 checkpoint: pass --llama3-path=DIR or set TILEGATE_LLAMA3_PATH"
    if item.get_closest_marker("sglang"):
        import sys

        from tilegate.harness.sglang_protocol import gpu_missing_reason, missing_reason

        if item.get_closest_marker("gpu"):  # SGLang's GPU build, in this python
            return gpu_missing_reason(sys.executable, on_mi300x=plat.kind == "rocm" and plat.arch == "gfx942")
        return missing_reason()  # only a missing venv skips; a broken one fails the tests
    return None


def _sglang_engine_run():
    from tilegate.fixtures.e2e_prompts import ENGINE_SPEC
    from tilegate.harness.sglang_driver import EngineRun

    return EngineRun(Path(os.environ[RUN_DIR_ENV]) / "sglang-engines", ENGINE_SPEC)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reports its collection: no test starts meanwhile
def pytest_collection_finish(session: pytest.Session) -> None:
    # SGLang's engines take ~2 minutes to start on 2 cores: launch them now, in the background,
    # when sglang tests are selected and can run, so they overlap the rest of the suite.
    from tilegate.harness.sglang_protocol import missing_reason

    if session.config.option.collectonly:
        return
    _precompile(session)
    if any(item.get_closest_marker("sglang") and not item.get_closest_marker("gpu") for item in session.items) \
            and missing_reason() is None:
        _sglang_engine_run().start()


PRECOMPILE_REPORT = "precompile.txt"  # in the run folder: the line the controller prints


def _precompile(session: pytest.Session) -> None:
    """Compile the kernels of the selected, runnable GPU tests (their ``builds`` marks) once, on every
    CPU, before any test starts (tilegate/harness/precompile.py). One process does it: the worker
    gw0, or the run itself without xdist; the controller schedules no test before every worker
    has reported its collection."""
    worker = getattr(session.config, "workerinput", None)
    if (worker and worker["workerid"] != "gw0") or not detect().has_gpu:
        return
    from tilegate.harness.precompile import default_processes, precompile
    from tilegate.platform import NoLocalTarget, local_target

    builds = [b for item in session.items if _skip_reason(item) is None
              for mark in item.iter_markers("builds") for b in mark.args]
    try:
        target = local_target()
    except NoLocalTarget:
        return  # the tests say so, each in its own skip or failure
    if builds:
        line = precompile(builds, target, default_processes())
        (Path(os.environ[RUN_DIR_ENV]) / PRECOMPILE_REPORT).write_text(line + "\n")


@pytest.fixture(scope="session")
def sglang_engines(request: pytest.FixtureRequest) -> dict:
    """What the SGLang child (tilegate.harness.sglang_child) reported: generations, errors, markers."""
    return _sglang_engine_run().result()


# Every GPU test, and any test marked deadline, runs under a deadline (tilegate/watchdog.py): a hung
# kernel fails its own test, not the whole run.
GPU_TEST_TIMEOUT_S = float(os.environ.get("TILEGATE_GPU_TEST_TIMEOUT", 900))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    marker = item.get_closest_marker("deadline")
    if "gpu" not in item.keywords and marker is None:
        return (yield)
    from tilegate.runtime import last_launch
    from tilegate.watchdog import Deadline

    seconds = marker.args[0] if marker else GPU_TEST_TIMEOUT_S
    with Deadline(seconds, item.nodeid, lambda: last_launch["kernel"], _watchdog_dir()):
        return (yield)


def _watchdog_dir() -> Path:
    return Path(os.environ[RUN_DIR_ENV]) / "watchdog"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first: tests marked slow (32k cases, the planted hang) start before the rest, so
    that xdist's workers, and a node's GPUs, finish together instead of waiting on one of them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: order kept otherwise


def pytest_runtest_setup(item: pytest.Item) -> None:
    # xdist hands a crashed worker's whole group to its replacement, the hung test included
    hung = report_path(_watchdog_dir(), item.nodeid)
    if hung.exists():
        pytest.fail(f"hung earlier in this run and was ended by the watchdog ({hung}): not run again", pytrace=False)
    reason = _skip_reason(item)
    if reason:
        pytest.skip(reason)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and "gpu" in report.keywords:
        _gpu_passed.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if getattr(session.config, "workerinput", None) is not None:
        return  # an xdist worker: the controller decides
    _sglang_engine_run().stop_if_running()  # all workers are done with it
    if session.config.getoption("--require-gpu") and not _gpu_passed:
        session.config.stash[NO_GPU_TEST_PASSED] = True
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if config.stash[NO_GPU_TEST_PASSED]:
        terminalreporter.write_line(
            f"FAILED: --require-gpu set, but no GPU test passed on {detect().describe()}", red=True)
    precompiled = Path(os.environ[RUN_DIR_ENV]) / PRECOMPILE_REPORT
    if precompiled.exists():
        terminalreporter.write_line(precompiled.read_text().strip())
    artifacts = Path(config.getoption("--artifacts"))
    for title, lines in (("hung tests (ended by the watchdog)", reports(_watchdog_dir())),
                         ("gfx942 ISA summary", isa_summary_lines(artifacts)),
                         ("numerics, memory and drift summary", runtime_summary_lines(artifacts)),
                         ("token agreement summary", agreement_summary_lines(artifacts))):
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def platform():
    return detect()


@pytest.fixture(scope="session")
def builder(request: pytest.FixtureRequest):
    """The session's compiled-kernel cache (one per xdist worker, backed by the disk cache)."""
    from tilegate.builder import KernelBuilder  # imports TileLang: only where a test builds

    return KernelBuilder(Path(request.config.getoption("--tilegate-cache")))


@pytest.fixture
def fresh_builder(tmp_path: Path):
    """An empty cache, for tests of the cache itself."""
    from tilegate.builder import KernelBuilder

    return KernelBuilder(tmp_path / "cache")


@pytest.fixture(scope="session")
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    path = Path(request.config.getoption("--artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return request.config.getoption("--update-golden")
