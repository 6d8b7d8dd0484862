"""Which backend the serving benchmark measures: SGLang's own plugin loader (.venv-sglang), run
under the environment the harness gives its child. The tests' children serve ``tilelang`` through
the harness plugin's observed backend, which records each batch it serves (a replayed batch's
record reads its lengths back to the host); the benchmark's child must serve the production
backend, with nothing recorded.

Symptom: the serving benchmark measured the observed backend. Its read back on every decode
replay held the H200 idle about 1.4 ms of each batch-32 step, and the host-side difference alone
set the tilelang-vs-triton ratio (issue 36's profile). Fix: EngineRun(observed=False), and the
benchmark's figures refused when its engines wrote markers (bench.figures_of)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tilegate.harness.sglang import bench
from tilegate.harness.sglang import protocol as proto
from tilegate.harness.sglang.driver import EngineRun

pytestmark = pytest.mark.sglang

PROBE = """
import json, os
from sglang.srt.plugins import load_plugins
from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
load_plugins()
factory = ATTENTION_BACKENDS["tilelang"]
print(json.dumps({"factory": f"{factory.__module__}.{factory.__qualname__}",
                  "plugins": os.environ["SGLANG_PLUGINS"]}))
"""


def _loaded(tmp_path, **env_kwargs) -> tuple[dict, list[str]]:
    markers = tmp_path / "markers"
    markers.mkdir()
    out = subprocess.run(
        [str(proto.venv_python()), "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env=proto.child_env(markers, cpu=True, **env_kwargs),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), sorted(
        p.name for p in markers.iterdir()
    )


def test_the_benchmarks_engines_get_the_production_backend_and_record_nothing(tmp_path):
    loaded, recorded = _loaded(tmp_path, observed=False)
    assert loaded["factory"] == "tilegate.serving.sglang_plugin.create_backend", loaded
    assert recorded == []


def test_the_tests_engines_get_the_observed_backend(tmp_path):
    # the same probe sees the difference: the check above can fail
    loaded, recorded = _loaded(tmp_path)
    assert loaded["factory"] == "tilegate.harness.sglang.registration._factory.<locals>.create"
    assert recorded and all(name.startswith("registered-") for name in recorded), recorded


def test_a_callers_plugin_list_cannot_bring_the_harness_into_the_benchmark(monkeypatch):
    monkeypatch.setenv("SGLANG_PLUGINS", "tilelang-harness,sglkit,tilelang")
    assert proto.production_plugins("tilelang-harness,sglkit,tilelang", cpu=False) == (
        "tilelang,sglkit"
    )
    env = proto.child_env(proto.REPO_ROOT, cpu=False, observed=False)
    assert env["SGLANG_PLUGINS"] == "tilelang,sglkit"
    assert (
        proto.child_env(proto.REPO_ROOT, cpu=False)["SGLANG_PLUGINS"] == "tilelang-harness,sglkit"
    )


# The benchmark's smallest run on the CPU: SGLang's CPU engine serving the harness's reference
# kernels (``tilelang-reference``, registered by the harness plugin only; the production backend
# refuses a machine with no GPU).
TINY_BENCH = {
    "backends": ["tilelang-reference"],
    "batch": 2,
    "input_len": 8,
    "output_len": 2,
    "long_len": 16,
    "long_output": 2,
    "seed": 0,
    "rounds": 1,
    "engine_kwargs": {"context_length": 1024},  # the tiny model has 2048 positions
}


@pytest.mark.nested  # an engine start, ~40 CPU s
def test_a_benchmark_served_through_the_harness_plugin_is_refused(tmp_path):
    """The child's markers of its benchmark engines, as the serving benchmark reads them: an
    engine that loaded the harness plugin wrote them, and its figures are refused."""
    spec = bench.child_spec(TINY_BENCH, model="tiny", device="cpu", dtype="float32")
    result = EngineRun(tmp_path / "bench", spec).result(timeout=900)
    served = result["bench"]["backends"]["tilelang-reference"]
    assert served["rounds"] and served["attention_backend"] == "tilelang-reference"
    assert result["bench_markers"]["registered_pids"], result["bench_markers"]
    with pytest.raises(bench.HarnessPluginRan, match="harness plugin ran"):
        bench.figures_of(result)
