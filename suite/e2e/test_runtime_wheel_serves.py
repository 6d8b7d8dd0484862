"""The runtime wheel alone serves: tilegate's runtime distribution, built from this checkout and
installed by itself into an empty folder, is all of tilegate that SGLang's real engine on the local
GPU gets (no checkout, no gate distribution on its path), and it serves the tiny Llama-3 through
``attention_backend="tilelang"`` saying what SGLang's own triton backend says, greedy token for
greedy token within the top-k rule (references/agreement.py).

Needs SGLang's GPU build in this python (on the H200: ../shared/device/sglang-h200's kit);
elsewhere it skips with one line. suite/library/test_packaging.py checks the same wheel's contents
on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.fixtures.prompts import MIXED, SHORT
from tilegate.fixtures.tiny_llama import ensure_tiny_llama
from tilegate.gate.paths import REPO_ROOT
from tilegate.references.agreement import GreedyRun, compare

pytestmark = [pytest.mark.sglang, pytest.mark.gpu, pytest.mark.slow]
CHILD = Path(__file__).with_name("runtime_wheel_child.py")


def _pip(*args: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pip", *args], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]


def _runtime_site(tmp_path: Path) -> Path:
    """The runtime wheel, built from the checkout's sources and installed alone (no deps)."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), ".")
    (wheel,) = wheels.glob("tilegate-*.whl")
    _pip("install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    return site


def _path_without_the_checkout(site: Path) -> str:
    """This process's python path less the checkout and anything that holds tilegate, with the
    runtime's folder first."""
    keep = []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or Path(entry).resolve() == REPO_ROOT or (Path(entry) / "tilegate").exists():
            continue
        keep.append(entry)
    return os.pathsep.join([str(site), *keep])


def test_the_runtime_wheel_alone_serves_through_sglang(tmp_path):
    site = _runtime_site(tmp_path)
    model = ensure_tiny_llama()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = (*SHORT, *MIXED)
    prompts = [tokenizer(t)["input_ids"] for t in texts]
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))
    env = {
        **os.environ,
        "PYTHONPATH": _path_without_the_checkout(site),
        # the runtime's own plugin (and the kit's, where it runs): never the gate's harness
        "SGLANG_PLUGINS": ",".join(
            p
            for p in ("tilelang", "sglkit")
            if p in os.environ.get("SGLANG_PLUGINS", "tilelang").split(",")
        ),
    }
    out = tmp_path / "out.json"
    run = subprocess.run(
        [sys.executable, str(CHILD), str(model), str(tmp_path / "prompts.json"), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    found = json.loads(out.read_text())
    files = found["tilegate_files"]
    assert "tilegate.serving.sglang_plugin" in files, files
    outside = {m: f for m, f in files.items() if f and not Path(f).is_relative_to(site)}
    assert not outside, f"tilegate modules from outside the runtime's folder: {outside}"
    served = found["served"]
    for text, peer, ours in zip(texts, served["triton"], served["tilelang"], strict=True):
        agreement = compare(text, GreedyRun.from_record(peer), GreedyRun.from_record(ours))
        assert agreement.passed, agreement.detail
