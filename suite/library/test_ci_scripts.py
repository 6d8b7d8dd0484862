"""The MI300X job's own scripts, run here as the workflow runs them: the GPU-idle check and the
per-trust-level compile caches (the container, the export and the records:
test_runner_boundary.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tilegate.gate.paths import REPO_ROOT

SCRIPTS = REPO_ROOT / "scripts"


def _run(*cmd, env=None, cwd=None):
    return subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def test_gpu_idle_passes_an_idle_gpu_and_names_every_process_holding_one(tmp_path):
    kfd = tmp_path / "proc"
    kfd.mkdir()
    assert _run(sys.executable, SCRIPTS / "gpu_idle.py", "--kfd-proc", kfd).returncode == 0
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (kfd / str(holder.pid)).mkdir()
        out = _run(sys.executable, SCRIPTS / "gpu_idle.py", "--when", "after", "--kfd-proc", kfd)
    finally:
        holder.kill()
    assert (
        out.returncode == 1
        and f"pid {holder.pid}: {sys.executable} -c" in out.stderr
        and "after the gate" in out.stderr
    )


def test_gpu_idle_fails_where_no_rocm_driver_is_loaded(tmp_path):
    out = _run(sys.executable, SCRIPTS / "gpu_idle.py", "--kfd-proc", tmp_path / "absent")
    assert out.returncode == 1 and "no ROCm (amdgpu/KFD) driver" in out.stderr


# pytest-split's two groups and the whole, collected in one process (the three collections import
# torch and TileLang once, not three times): each collection's selected node ids, as JSON
_COLLECT_SHARDS = """
import json, sys
from pathlib import Path

import pytest


class Selected:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]


def collect(*options):
    selected = Selected()
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0", *options, *sys.argv[3:]]
    code = pytest.main(args, plugins=[selected])
    assert code == 0, f"collection exited {code}"
    return selected.ids


split = ("--splits", "2", "--durations-path", sys.argv[2])
groups = [collect(*split, "--group", "1"), collect(*split, "--group", "2"), collect()]
Path(sys.argv[1]).write_text(json.dumps(groups))
"""


@pytest.mark.nested
def test_the_shards_of_a_split_run_share_out_every_test_once(tmp_path):
    """The MI300X job's two shards (pytest-split over the committed .test_durations)."""
    out = tmp_path / "shards.json"
    proc = _run(
        sys.executable,
        "-c",
        _COLLECT_SHARDS,
        out,
        REPO_ROOT / ".test_durations",
        "suite/e2e/test_sglang_gpu.py",
        "suite/numerics/test_cuda_graph.py",
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    first, second, everything = (set(ids) for ids in json.loads(out.read_text()))
    assert first and second and not first & second
    assert first | second == everything


def _gpu_run_selects(tmp_path, *args: str) -> int:
    """How many tests scripts/gpu-run.sh selects with ``args`` (collection only: no GPU needed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    out = subprocess.run(
        ["bash", str(SCRIPTS / "gpu-run.sh"), "--collect-only", "-q", *args],
        cwd=REPO_ROOT,
        env={**env, "TILEGATE_ARTIFACTS": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = out.stdout.strip().splitlines()[-1]
    assert " collected" in last, out.stdout[-2000:] + out.stderr[-2000:]
    return int(last.split()[0].split("/")[0])


def test_gpu_run_keeps_its_default_selection_unless_the_arguments_make_one(tmp_path):
    # Symptom (an 80 GB H100, issue 54): any argument (-rfE, --artifacts=...) dropped the default
    # -m "numerics or drift", so the run became every tier. Fix: options alone keep it; -m, -k or a
    # test path replace it.
    default = _gpu_run_selects(tmp_path, "-m", "numerics or drift")
    assert _gpu_run_selects(tmp_path, "-rfE", "-p", "no:randomly", "--tb=short") == default
    assert _gpu_run_selects(tmp_path, "suite/numerics/test_memory.py") < default
