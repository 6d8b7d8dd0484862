"""SGLang's engine on the MI300X with attention_backend="tilelang" in kernel mode (the TileLang
paged kernels), against the FP32 transformers reference and against SGLang's default backend
there, with the prompts and the metric of the CPU tier (fixtures/e2e_prompts.py,
references/agreement.py).

The runner's python serves: SGLang's ROCm build comes from the system site-packages (tox -e rocm),
and tilegate's editable install registers the plugin. One child process per model (the same
tilegate.harness.sglang_child as the CPU tier, cpu=False): the FP32 reference first, alone on the
GPU, then one engine per backend. The engines serve bf16, as a deployment does.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tilegate.fixtures.e2e_prompts import MAX_NEW_TOKENS, PROMPTS, ROUNDS
from tilegate.harness.sglang_driver import EngineRun
from tilegate.references.agreement import TOP_K, GreedyRun, compare
from tilegate.report import record_agreement

pytestmark = [pytest.mark.e2e, pytest.mark.rocm, pytest.mark.xdist_group("sglang-rocm")]

BACKENDS = ["tilelang", "default"]  # "default": SGLang's own choice on ROCm (aiter or triton)
GPU_ENGINE = {"mem_fraction_static": 0.5, "disable_cuda_graph": True, "log_level": "error"}


def _spec(model: str, context_length: int | None = None) -> dict:
    kw = GPU_ENGINE | ({"context_length": context_length} if context_length else {})
    return {"model": model, "rounds": ROUNDS, "max_new_tokens": MAX_NEW_TOKENS, "top_k": TOP_K,
            "reference": True, "backends": BACKENDS, "device": "cuda", "dtype": "bfloat16", "engine_kwargs": kw}


def _serve(workdir: Path, spec: dict, timeout: float) -> dict:
    if importlib.util.find_spec("sglang") is None:  # a gate runner without SGLang fails, never skips
        pytest.fail(f"SGLang is not importable from {sys.executable}: the MI300X runner must provide "
                    "SGLang's ROCm build (system site-packages of tox -e rocm)")
    return EngineRun(workdir, spec, python=Path(sys.executable), cpu=False).result(timeout=timeout)


def _check(result: dict, label: str, artifacts_dir: Path) -> None:
    """tilelang vs FP32, the default backend vs FP32 (the bar tilelang is held to), tilelang vs
    the default backend; every table recorded, then every failure reported at once."""
    def run(backend, p):
        return GreedyRun.from_record(result["generations"][backend][p.round][p.index])

    ref = {p.name: GreedyRun.from_record(result["reference"][p.round][p.index]) for p in PROMPTS}
    default = result.get("default_backend", "default")
    pairs = {f"{label}-tilelang-vs-hf-fp32": (lambda p: ref[p.name], "tilelang"),
             f"{label}-{default}-vs-hf-fp32": (lambda p: ref[p.name], "default"),
             f"{label}-tilelang-vs-{default}": (lambda p: run("default", p), "tilelang")}
    failed = []
    for name, (reference, backend) in pairs.items():
        results = [compare(p.name, reference(p), run(backend, p)) for p in PROMPTS]
        record_agreement(artifacts_dir, name, results)
        failed += [f"{name} {r.prompt}: {r.detail}" for r in results if not r.passed]
    assert not failed, "\n".join(failed)
    backend = [m for m in result["markers"]["backend"] if m["event"] == "constructed"]
    assert backend and all(m["mode"] == "kernel" and m["served_as"] == "tilelang" for m in backend), backend


def test_tilelang_kernels_in_sglang_agree_with_fp32_and_default_backend(tmp_path_factory, artifacts_dir):
    result = _serve(tmp_path_factory.mktemp("sglang-rocm-tiny"), _spec("trained"), timeout=1800)
    _check(result, "sglang-mi300x-tiny", artifacts_dir)


@pytest.mark.llama3
@pytest.mark.slow
def test_tilelang_kernels_serve_llama3(tmp_path_factory, artifacts_dir, request):
    path = request.config.getoption("--llama3-path")
    result = _serve(tmp_path_factory.mktemp("sglang-rocm-llama3"), _spec(str(Path(path).resolve()), 8192),
                    timeout=3600)
    _check(result, "sglang-mi300x-llama3", artifacts_dir)
