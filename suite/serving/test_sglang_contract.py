"""The tilelang backend against SGLang's own AttentionBackend, imported from the installed SGLang
(.venv-sglang): every hook the backend implements is one SGLang declares, so none of them is a
method SGLang never calls.

Symptom: SGLang 0.5.23 removed init_forward_metadata_capture_cuda_graph / _replay_cuda_graph from
its ABC (for init_forward_metadata_out_graph), so the backend's graph hooks were dead code and a
captured decode graph prepared nothing. Fix: the backend implements the 0.5.23 hooks; this test
names any hook SGLang stops declaring.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tilegate.harness.sglang import protocol as proto

pytestmark = pytest.mark.sglang

PROBE = """
import inspect, json
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from tilegate.serving.sglang_backend import TileLangAttnBackend
assert issubclass(TileLangAttnBackend, AttentionBackend), TileLangAttnBackend.__mro__
ours = {n for n, v in vars(TileLangAttnBackend).items() if callable(v) and not n.startswith("_")}
theirs = {n for n, _ in inspect.getmembers(AttentionBackend, callable) if not n.startswith("_")}
print(json.dumps({"ours": sorted(ours), "undeclared": sorted(ours - theirs)}))
"""


def test_every_backend_hook_is_declared_by_sglang(tmp_path):
    out = subprocess.run(
        [str(proto.venv_python()), "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env=proto.child_env(tmp_path, cpu=True),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert {
        "init_forward_metadata",
        "init_forward_metadata_out_graph",
        "forward_extend",
        "forward_decode",
    } <= set(found["ours"])
    assert not found["undeclared"], (
        f"hooks SGLang's AttentionBackend does not declare (never called): {found['undeclared']}"
    )
