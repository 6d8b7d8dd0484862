"""SGLang's engine on the MI300X with attention_backend="tilelang" in kernel mode (the TileLang
paged kernels), against the FP32 transformers reference and against SGLang's default backend
there, with the prompts and the metric of the CPU tier (fixtures/e2e_prompts.py,
references/agreement.py).

The runner's python serves: SGLang's ROCm build comes from the system site-packages (tox -e rocm),
and tilegate's editable install registers the plugin. One child process per model (the same
tilegate.harness.sglang_child as the CPU tier, cpu=False): the FP32 reference first, alone on the
GPU, then one engine per backend. The engines serve bf16, as a deployment does. At long context
the long-context tiny Llama-3 answers retrieval prompts of 3782, 8192 and 32768 tokens
(fixtures/long_context_llama.py); there tilelang must also keep its logprobs within
LOGPROB_MULTIPLE x how far the default backend's move from FP32, since a wrong kernel can keep
every greedy token at these lengths.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from tilegate.fixtures.e2e_prompts import LONG_CONTEXT, MAX_NEW_TOKENS, PROMPTS, ROUNDS, RetrievalPrompt
from tilegate.harness.sglang_driver import EngineRun
from tilegate.references.agreement import LOGPROB_MULTIPLE, TOP_K, GreedyRun, compare
from tilegate.report import record_agreement

pytestmark = [pytest.mark.e2e, pytest.mark.rocm, pytest.mark.xdist_group("sglang-rocm")]

BACKENDS = ["tilelang", "default"]  # "default": SGLang's own choice on ROCm (aiter or triton)
GPU_ENGINE = {"mem_fraction_static": 0.5, "disable_cuda_graph": True, "log_level": "error"}


def _spec(model: str, context_length: int | None = None) -> dict:
    kw = GPU_ENGINE | ({"context_length": context_length} if context_length else {})
    return {"model": model, "rounds": ROUNDS, "max_new_tokens": MAX_NEW_TOKENS, "top_k": TOP_K,
            "reference": True, "backends": BACKENDS, "device": "cuda", "dtype": "bfloat16", "engine_kwargs": kw}


LONG_LENGTHS = (3782, 8192, 32768)


def _long_context_spec() -> dict:
    """Only the child's long-context phase: retrieval prompts (span mid-prompt, seed 7 as on the
    CPU) on tilelang and the default backend, in a context that holds the 32k prompt and its answer."""
    prompts = [asdict(RetrievalPrompt(f"retrieval-{n}", n, 7, 0.5)) for n in LONG_LENGTHS]
    kw = GPU_ENGINE | {"context_length": max(LONG_LENGTHS) + 64}
    return {"model": "long-context", "rounds": [], "max_new_tokens": 1, "top_k": TOP_K, "reference": False,
            "backends": [], "device": "cuda", "dtype": "bfloat16", "engine_kwargs": kw,
            "long_context": LONG_CONTEXT | {"prompts": prompts, "backends": BACKENDS}}


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


def long_context_failures(lc: dict, artifacts_dir: Path, label: str, test: str = "tilelang",
                          peer: str = "default") -> list[str]:
    """The child's long-context record judged: ``test`` and ``peer`` each agree with FP32 on the
    greedy tokens and answer right, and ``test``'s logprobs move at most LOGPROB_MULTIPLE x the
    peer's (the same model, dtype and engine: the bar a correct kernel meets)."""
    failed, shift = [], {}
    for backend in (test, peer):
        results = [compare(p["name"], GreedyRun.from_record(ref), GreedyRun.from_record(got))
                   for p, ref, got in zip(lc["prompts"], lc["reference"], lc["generations"][backend], strict=True)]
        record_agreement(artifacts_dir, f"{label}-{backend}-vs-hf-fp32", results)
        failed += [f"{backend} {r.prompt}: {r.detail}" for r in results if not r.passed]
        failed += [f"{backend} {p['name']}: wrong answer" for p, got in zip(lc["prompts"], lc["generations"][backend])
                   if got["tokens"] != p["expected"]]
        shift[backend] = {r.prompt: r.max_logprob_diff for r in results}
    failed += [f"{test} {name}: logprobs moved {moved:.2e} > {LOGPROB_MULTIPLE} x {peer}'s {shift[peer][name]:.2e}"
               for name, moved in shift[test].items() if moved > LOGPROB_MULTIPLE * shift[peer][name]]
    return failed


@pytest.mark.slow
def test_tilelang_kernels_agree_at_long_context(tmp_path_factory, artifacts_dir):
    """tilelang and the default backend on the retrieval prompts, against FP32 (long_context_failures)."""
    result = _serve(tmp_path_factory.mktemp("sglang-rocm-long-context"), _long_context_spec(), timeout=2400)
    failed = long_context_failures(result["long_context"], artifacts_dir, "sglang-mi300x-long-context")
    assert not failed, "\n".join(failed)
