"""tilegate as a pytest plugin: options, markers, the skip decision, deadlines, GPU pinning,
precompile.

Installed, it loads through the ``pytest11`` entry point of the same name (testing/pyproject.toml),
so a kernel repository that installs tilegate-testing runs the gate with plain ``pytest``, and
options are known before pytest picks its rootdir. A checkout on ``PYTHONPATH`` (the GPU machines
here) loads it from the root ``conftest.py``; the shared name makes the second load a no-op.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tilegate.testing import gpu_workers, kernel_options, run_records

# An xdist worker takes its GPU before anything below can initialise the device.
if os.environ.get("PYTEST_XDIST_WORKER"):
    gpu_workers.pin_worker(os.environ["PYTEST_XDIST_WORKER"])

from tilegate.artifacts.writer import JUNIT_DIR
from tilegate.gate import tilelang_versions
from tilegate.gate.paths import REPO_ROOT, cache_dir
from tilegate.platform import detect
from tilegate.testing.markers import MARKERS
from tilegate.testing.pytest_fixtures import (  # noqa: F401  (fixtures: pytest finds them in this module)
    RUN_DIR_ENV,
    artifacts_dir,
    builder,
    fresh_builder,
    golden_reason,
    platform,
    run_dir,
    sglang_engine_run,
    sglang_engines,
    update_golden,
)
from tilegate.testing.skips import missing, skip_groups, skip_reason
from tilegate.testing.tiers import check_folders
from tilegate.testing.watchdog import Deadline, dump_stacks_on_sigusr1, report_path, reports

REQUIRE_GPU_FAILURE = pytest.StashKey[str]()  # why --require-gpu failed the run ("" if it did not)
RUN_PASSED = pytest.StashKey[bool]()  # set by the controller at the end of the session
_gpu_passed: list[str] = []  # on the controller too: xdist replays its workers' reports there
_gpu_selected: list[str] = []  # the GPU tests of a --collect-only run's selection
# Every GPU test, and any test marked deadline, runs under a deadline (watchdog.py): a hung kernel
# fails its own test, not the whole run.
GPU_TEST_TIMEOUT_S = float(os.environ.get("TILEGATE_GPU_TEST_TIMEOUT", 900))
PRECOMPILE_REPORT = "precompile.json"  # in the run folder: the record the controller prints

# the hash seed every process of a run but the first lowers kernels with (pytest_configure says why)
LOWERING_HASH_SEED = "0"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tilegate")
    group.addoption(
        "--artifacts",
        default=os.environ.get("TILEGATE_ARTIFACTS"),
        help="folder for code objects, listings and metric snapshots (default: artifacts/ under "
        "pytest's rootdir: the gate's checkout, or the kernel repository that runs the gate)",
    )
    group.addoption(
        "--keep-artifacts",
        action="store_true",
        help="add to the artifacts folder instead of clearing it first: the later pytest commands "
        "of one gate run (tox -e rocm) keep the earlier ones' records for the summary",
    )
    group.addoption(
        "--tilegate-cache",
        default=str(cache_dir()),
        help="disk cache of lowered kernels and code objects",
    )
    group.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the committed ISA golden snapshots from this run instead of comparing",
    )
    group.addoption(
        "--golden-reason",
        default=None,
        metavar="TEXT",
        help="with --update-golden: why the snapshots changed, one line, kept in each changed "
        "snapshot "
        "(an update without it is refused)",
    )
    group.addoption(
        "--require-gpu",
        action="store_true",
        help="fail the run unless at least one GPU test passed (GPU runners set this)",
    )
    group.addoption(
        "--update-counter-baseline",
        action="store_true",
        help="record this run's hardware counters as the device's baseline "
        "(suite/baselines/counters/)",
    )
    group.addoption(
        "--update-perf-baseline",
        action="store_true",
        help="record this run's speed ratios, with their measured noise, as the device's baseline "
        "(suite/baselines/perf/)",
    )
    group.addoption(
        "--llama3-path",
        default=os.environ.get("TILEGATE_LLAMA3_PATH"),
        help="local Meta-Llama-3 checkpoint folder for the llama3 end-to-end tests "
        "(default: $TILEGATE_LLAMA3_PATH)",
    )

    kernel_options.add_options(parser)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"tilegate: TileLang {tilelang_versions.RUNNING} "
        f"(supported: {', '.join(tilelang_versions.SUPPORTED)}; ISA golden snapshots per version)"
    )


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml plugin reads the JUnit path
def pytest_configure(config: pytest.Config) -> None:
    _choose_run_folder(config)
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.stash[REQUIRE_GPU_FAILURE] = ""
    dump_stacks_on_sigusr1()  # every process of the run, workers included
    # the controller (or a run without xdist), before any worker starts: they inherit both
    if not hasattr(config, "workerinput"):
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="tilegate-run-")
        # TileLang's lowering depends on the hash seed: 1 in 20 seeds drops a redundant barrier (and
        # 1 in 10 renames a workspace) in the same kernel, under 0.1.12 and 0.1.15. The workers, the
        # precompile and the child runs start from here, so they lower as the golden snapshots were.
        os.environ["PYTHONHASHSEED"] = LOWERING_HASH_SEED
        # xdist workers to pin (-n auto is a number by now)
        if config.getoption("numprocesses", None):
            # counting GPUs imports torch: not in a run of one process
            gpu_workers.controller_setup()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: runs without xdist must not fail on it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: TILEGATE_WORKERS_PER_GPU workers for each GPU of the node, else one per CPU."""
    return gpu_workers.workers_for(gpu_workers.controller_setup())


def _choose_run_folder(config: pytest.Config) -> None:
    """The run's records folder (run_records.py), in ``--artifacts`` for every reader; every run
    that is not a collection writes its JUnit XML there, unless ``--junitxml`` names another
    path."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        config.option.artifacts = worker[run_records.WORKER_KEY]
        return
    folder = run_records.decide(config, config.option.artifacts)
    config.option.artifacts = str(folder)
    # the pytest runs this one starts write under it, never where this one does
    os.environ.pop("TILEGATE_ARTIFACTS", None)
    os.environ[run_records.PARENT_ENV] = str(folder)
    if not config.option.collectonly and not config.option.xmlpath:
        config.option.xmlpath = str(folder / JUNIT_DIR / "pytest.xml")


@pytest.hookimpl(optionalhook=True)  # an xdist hook
def pytest_configure_node(node) -> None:
    node.workerinput[run_records.WORKER_KEY] = node.config.option.artifacts


# before xdist's worker reports its collection: no test starts meanwhile
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # SGLang's CPU engines take minutes to start on 2 cores: launch the children the selected tests
    # read (and only those) now, in the background, so they overlap the rest of the suite.
    from tilegate.harness.sglang.protocol import missing_reason
    from tilegate.testing.pytest_fixtures import sglang_runs_read_by
    from tilegate.testing.skips import skip_reason

    if session.config.option.collectonly:
        _gpu_selected[:] = [i.nodeid for i in session.items if i.get_closest_marker("gpu")]
        return
    _precompile(session)
    wanted = {
        name
        for item in session.items
        if not item.get_closest_marker("gpu")
        for name in sglang_runs_read_by(item)
        if skip_reason(item) is None  # an opt-in test this run leaves out starts no child
    }
    if wanted and missing_reason() is None:
        sglang_engine_run().start(sorted(wanted))


def _precompile(session: pytest.Session) -> None:
    """Compile the kernels of the selected, runnable GPU tests (their ``builds`` marks) once, on
    every CPU, before any test starts (precompile.py). One process does it: the worker gw0, or
    the run itself without xdist; the controller schedules no test before every worker has
    reported its collection."""
    worker = getattr(session.config, "workerinput", None)
    declaring = [item for item in session.items if item.get_closest_marker("builds")]
    # asking for the GPU imports torch: only where some selected test declares builds
    if (worker and worker["workerid"] != "gw0") or not declaring or not detect().has_gpu:
        return
    from tilegate.platform import NoLocalTarget, local_target
    from tilegate.testing.precompile import default_processes, precompile

    builds = [
        b
        for item in declaring
        if skip_reason(item) is None
        for mark in item.iter_markers("builds")
        for b in mark.args
    ]
    try:
        target = local_target()
    except NoLocalTarget:
        return  # the tests say so, each in its own skip or failure
    if builds:
        (run_dir() / PRECOMPILE_REPORT).write_text(
            precompile(builds, target, default_processes()).to_json()
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    marker = item.get_closest_marker("deadline")
    if "gpu" not in item.keywords and marker is None:
        return (yield)
    from tilegate.runtime import last_launch

    seconds = marker.args[0] if marker else GPU_TEST_TIMEOUT_S
    try:
        with Deadline(seconds, item.nodeid, lambda: last_launch["kernel"], _watchdog_dir()):
            return (yield)
    finally:
        _release_cached_gpu_memory()


def _release_cached_gpu_memory() -> None:
    """Hand the memory PyTorch's allocator keeps cached back to the device after each GPU test.
    The workers share one GPU, and each kept the peak of its largest test (about 15 GiB after a
    32k case): with the gfx942 cases added, 8 workers held 123 GiB and SGLang's engines found no
    room for a KV cache (H200: 22 out-of-memory failures in one -m gpu run)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _watchdog_dir() -> Path:
    return run_dir() / "watchdog"


# before -m and -k deselect: the added tiers are selected like any test
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Longest first: tests marked slow (32k cases, the planted hang) start before the rest, so
    that xdist's workers, and a node's GPUs, finish together instead of waiting on one of them.
    Tests that read an SGLang CPU child (tilegate.testing.pytest_fixtures.SGLANG_CPU_RUNS) go
    last: the children start at collection, and a worker that reached one of those tests earlier
    would wait for them, idle, while other tests could run. (--dist loadgroup hands out the xdist
    groups of several tests first, then single tests in this order.)"""
    from tilegate.testing.pytest_fixtures import sglang_runs_read_by

    kernel_options.add_tiers(session, items)
    if config.rootpath == REPO_ROOT:
        check_folders(REPO_ROOT / "suite", items)
    # stable: order kept otherwise
    items.sort(
        key=lambda item: (item.get_closest_marker("slow") is None, bool(sglang_runs_read_by(item)))
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    # xdist hands a crashed worker's whole group to its replacement, the hung test included
    hung = report_path(_watchdog_dir(), item.nodeid)
    if hung.exists():
        pytest.fail(
            f"hung earlier in this run and was ended by the watchdog ({hung}): not run again",
            pytrace=False,
        )
    reason = skip_reason(item)
    if reason:
        missing(reason)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and "gpu" in report.keywords:
        _gpu_passed.append(report.nodeid)


def _require_gpu_failure(session: pytest.Session) -> str:
    """Why --require-gpu fails this run, or "". A collection runs nothing: what it can hold to is a
    selection with GPU tests in it (CI collects the MI300X envs' commands so,
    scripts/check-rocm-envs.sh)."""
    if session.config.option.collectonly:
        return "" if _gpu_selected else "this selection holds no GPU test"
    return "" if _gpu_passed else f"no GPU test passed on {detect().describe()}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if getattr(session.config, "workerinput", None) is not None:
        return  # an xdist worker: the controller decides
    sglang_engine_run().stop_if_running()  # all workers are done with it
    if session.config.getoption("--require-gpu") and (failure := _require_gpu_failure(session)):
        session.config.stash[REQUIRE_GPU_FAILURE] = failure
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    session.config.stash[RUN_PASSED] = session.exitstatus == pytest.ExitCode.OK


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run folder (SGLang children's logs, the watchdog's and precompile's reports) goes with a
    green run, after the terminal summary has read it; a failed run keeps it for the logs its
    failures name."""
    if not hasattr(config, "workerinput") and config.stash.get(RUN_PASSED, False):
        shutil.rmtree(run_dir(), ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    from tilegate.artifacts.render import terminal_sections
    from tilegate.testing.precompile import PrecompileResult

    if failure := config.stash[REQUIRE_GPU_FAILURE]:
        terminalreporter.write_line(f"FAILED: --require-gpu set, but {failure}", red=True)
    if skipped := skip_groups(terminalreporter.stats.get("skipped", [])):
        terminalreporter.section("skipped, by what is missing (-rs lists every reason)")
        for what, count in skipped:
            terminalreporter.write_line(f"{count:6d}  {what}")
    precompiled = run_dir() / PRECOMPILE_REPORT
    if precompiled.exists():
        terminalreporter.write_line(PrecompileResult.from_json(precompiled.read_text()).summary())
    # the records the step summary shows too (tilegate/artifacts/render.py)
    artifacts = Path(config.getoption("--artifacts"))
    for title, lines in (
        ("hung tests (ended by the watchdog)", reports(_watchdog_dir())),
        *terminal_sections(artifacts),
    ):
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
