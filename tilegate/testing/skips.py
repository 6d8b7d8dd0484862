"""The one place that decides skips. Before a test starts, ``skip_reason`` decides from its markers
and the platform; a test that can know only once it runs (no baseline recorded for this device, a
config with no asynchronous path, a case its adapter's capabilities leave out) calls ``missing``,
and a parametrisation with nothing to run gives ``nothing_to_run``. No other code skips
(suite/library/test_readme_rules.py checks it). Each reason is one line naming what is missing.

  gpu    needs a ROCm or CUDA device
  rocm   needs a gfx942 (MI300X) device under ROCm
  cuda   needs a CUDA device
  container  needs a running docker daemon and the test image (scripts/install-container-runtime.sh)
  actions_js  needs node and the pinned actions' libraries (scripts/install-artifact-unpack.sh)
  llama3 needs --llama3-path=DIR / TILEGATE_LLAMA3_PATH (a local Meta-Llama-3 checkpoint)
  sglang needs .venv-sglang (scripts/install-sglang-cpu.sh): SGLang's real engine on the CPU;
         with gpu, SGLang's GPU build in this python (the MI300X runner must have it: no skip there)
  tilelang_venv(V)  needs TileLang V's venv (scripts/install-tilelang-venv.sh V); skips in a run
  that is V itself
  config_target(T)  a GPU case built from target T's tile-config table: runs where the local GPU
  uses T,
         and gfx942's on every GPU that has a table (tilegate.platform.SHIPPING_TARGET: its programs
         lowered for it)
  sanitize, stress, counters, perf  opt-in tiers (slow; a profiling tool or a quiet GPU): run only
  when -m names them
  nested  the gate run again in another environment (minutes of CPU): only when -m names it
The compile and ISA tiers need only a CPU: they never skip; a missing toolchain is an error with
the install command in it.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import pytest

from tilegate.gate import tilelang_versions
from tilegate.platform import detect

OPT_IN_TIERS = ("sanitize", "stress", "counters", "perf")


def skip_reason(item: pytest.Item) -> str | None:
    """Why ``item`` cannot run here, in one line; None when it can. The platform is asked for (torch
    imported) only by a test whose markers depend on it."""
    for tier in OPT_IN_TIERS:
        if item.get_closest_marker(tier) and tier not in (item.config.getoption("markexpr") or ""):
            return f"opt-in tier: select it with -m {tier}"
    if item.get_closest_marker("nested") and "nested" not in (
        item.config.getoption("markexpr") or ""
    ):
        return "opt-in nested run (another environment): select it with -m nested"
    if item.get_closest_marker("rocm") and not _on_mi300x():
        return (
            f"no gfx942 ROCm device (have {detect().describe()}): gfx942 runtime checks need "
            "an MI300X runner"
        )
    if item.get_closest_marker("cuda") and detect().kind != "cuda":
        return f"no CUDA device (have {detect().describe()})"
    if item.get_closest_marker("gpu") and not detect().has_gpu:
        return "no GPU: this check runs kernels or compiles for the local GPU"
    config_target = item.get_closest_marker("config_target")
    if config_target and config_target.args[0] not in detect().executed_targets:
        runs = detect().executed_targets
        tables = (
            f"the {' and '.join(runs)} table{'s' if len(runs) > 1 else ''}" if runs else "no table"
        )
        return (
            f"{config_target.args[0]} tile config: this GPU ({detect().describe()}) runs {tables}"
        )
    tilelang_venv = item.get_closest_marker("tilelang_venv")
    if tilelang_venv and (reason := tilelang_versions.missing_reason(*tilelang_venv.args)):
        return reason  # a venv that is there but broken fails the test
    return _tool_missing(item) or _input_missing(item)


def _on_mi300x() -> bool:
    return detect().kind == "rocm" and detect().arch == "gfx942"


def _tool_missing(item: pytest.Item) -> str | None:
    if item.get_closest_marker("container"):
        from tilegate.testing.container import missing_reason

        if reason := missing_reason():
            return reason
    if item.get_closest_marker("actions_js"):
        from tilegate.testing.actions_js import missing_reason as actions_js_missing

        if reason := actions_js_missing():
            return reason
    if item.get_closest_marker("sanitize") and detect().kind == "cuda":
        from tilegate.harness.sanitize.driver import find_compute_sanitizer

        if find_compute_sanitizer() is None:
            return (
                "no compute-sanitizer (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): the CUDA "
                "toolkit's sanitizer is needed"
            )
    if item.get_closest_marker("counters") and detect().has_gpu:
        from tilegate.harness.counters.driver import missing_profiler

        return missing_profiler(detect().kind)
    return None


def _input_missing(item: pytest.Item) -> str | None:
    if item.get_closest_marker("llama3") and not item.config.getoption("--llama3-path"):
        return "no Meta-Llama-3 checkpoint: pass --llama3-path=DIR or set TILEGATE_LLAMA3_PATH"
    if item.get_closest_marker("sglang"):
        from tilegate.harness.sglang.protocol import gpu_missing_reason, missing_reason

        if item.get_closest_marker("gpu"):  # SGLang's GPU build, in this python
            return gpu_missing_reason(sys.executable, on_mi300x=_on_mi300x())
        return missing_reason()  # only a missing venv skips; a broken one fails the tests
    return None


def _one_line(what: str) -> str:
    if "\n" in what:
        raise ValueError(f"a skip reason is one line: {what!r}")
    return what


def missing(what: str) -> NoReturn:
    """Skip the running test: ``what`` it needs is missing here (one line, as the markers'
    reasons)."""
    # what pytest.skip raises; mypy does not see pytest.skip itself as NoReturn
    raise pytest.skip.Exception(_one_line(what))


def nothing_to_run(what: str):
    """A parametrisation's one case when it has nothing to run, skipped with ``what`` is missing."""
    return pytest.param(None, marks=pytest.mark.skip(reason=_one_line(what)))


def skip_groups(reports) -> list[tuple[str, int]]:
    """Skipped test reports counted by what is missing: a reason's first clause (``no GPU``,
    ``opt-in tier``, an adapted kernel's name), most first; the terminal summary prints these in
    place of a line per distinct reason, so the verdict is not read under a wall of skips."""
    counts: dict[str, int] = {}
    for report in reports:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        what = reason.removeprefix("Skipped: ").split(":", 1)[0].strip()
        counts[what] = counts.get(what, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
