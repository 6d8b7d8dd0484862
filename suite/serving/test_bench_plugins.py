"""Which backend the serving benchmark measures: SGLang's own plugin loader (.venv-sglang), run
under the environment the harness gives its child. The tests' children serve ``tilelang`` through
the harness plugin's observed backend, which records each batch it serves (a replayed batch's
record reads its lengths back to the host); the benchmark's child must serve the production
backend, with nothing recorded.

Symptom: the serving benchmark measured the observed backend. Its read back on every decode
replay held the H200 idle about 1.4 ms of each batch-32 step, and the host-side difference alone
set the tilelang-vs-triton ratio (issue 36's profile). Fix: EngineRun(observed=False)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tilegate.harness.sglang import protocol as proto

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
