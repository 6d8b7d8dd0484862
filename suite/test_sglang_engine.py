"""SGLang's real engine on the CPU with the tilelang backend's adapter over the FP32 reference.

One subprocess in .venv-sglang (tilegate.harness.sglang_child) runs the trained tiny Llama-3 in
FP32 transformers (the reference), then serves it with attention_backend="torch_native", then
"tilelang-reference" (the production TileLangAttnBackend over the kernels' FP32 reference ops),
then the same with a planted bug, each with the same greedy prompts (tilegate.fixtures.e2e_prompts),
and then starts an engine on a model the production "tilelang" backend must refuse. Last, the same
child serves the long-context tiny Llama-3 a 3782-token retrieval prompt with "tilelang-reference"
and with a x1.1 softmax scale planted, against transformers FP32 on the same ids. It runs once
per pytest run, launched at collection by whichever xdist worker comes first; the tests only read
its JSON.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

import pytest

from tilegate.fixtures.e2e_prompts import (
    LONG_CONTEXT_PLANTED,
    LONG_CONTEXT_PROMPTS,
    LONG_TOKENS,
    MAX_NEW_TOKENS,
    PLANTED,
    PROMPTS,
    REFERENCE,
    Prompt,
)
from tilegate.references.agreement import Agreement, GreedyRun, compare
from tilegate.report import record_agreement

pytestmark = [pytest.mark.sglang, pytest.mark.e2e]

# Long context, FP32 against FP32: the engine's reference ops and transformers (with the gate's
# chunked FP32 attention) compute the same model in the same precision, only in another order of
# operations (paged K/V, SGLang's own RMSNorm, RoPE and matmul shapes); that moves a chosen
# token's logprob by ~1e-6 nats here (1.7e-6 measured at 3782 tokens), so 1e-3 leaves ~500x room. It is a fixed number, taken from
# neither side's output, so no run can widen its own bound; a x1.1 softmax scale moves 3.6e-3.
FP32_LOGPROB_TOL = 1e-3


@pytest.fixture(scope="session")
def engines(sglang_engines) -> dict:
    return sglang_engines  # conftest.py: one run per pytest run, started at collection


def _generation(engines, backend: str, p: Prompt) -> dict:
    return engines["generations"][backend][p.round][p.index]


def _agreements(engines, backend: str) -> list:
    """Each prompt's greedy run on ``backend`` against the FP32 transformers reference."""
    return [compare(p.name, GreedyRun.from_record(engines["reference"][p.round][p.index]),
                    GreedyRun.from_record(_generation(engines, backend, p))) for p in PROMPTS]


@pytest.mark.parametrize("backend", [REFERENCE, "torch_native"])
def test_engine_agrees_with_fp32_reference(engines, backend, artifacts_dir):
    """SGLang serving the trained model vs transformers FP32 on the same token ids (vLLM's
    criterion, top-5). torch_native is SGLang's own backend: it proves the harness itself."""
    results = _agreements(engines, backend)
    record_agreement(artifacts_dir, f"sglang-cpu-{backend}-vs-hf-fp32", results)
    failed = [r for r in results if not r.passed]
    assert not failed, "\n".join(f"{r.prompt}: {r.detail}" for r in failed)


def test_agreement_metric_reports_the_planted_bug(engines, artifacts_dir):
    """Self-test: the same harness on the backend with a planted attention bug must fail."""
    results = _agreements(engines, PLANTED)
    record_agreement(artifacts_dir, f"sglang-cpu-{PLANTED.replace(':', '-')}-vs-hf-fp32", results)
    assert any(not r.passed for r in results), \
        f"the agreement metric passed {PLANTED}: " + "; ".join(f"{r.prompt} {r.detail}" for r in results)


def test_prompt_ids_reach_the_engine_unchanged(engines):
    """SGLang and the reference saw the same prompts: lengths as tokenized, the long one included."""
    for p in PROMPTS:
        assert _generation(engines, REFERENCE, p)["prompt_tokens"] == engines["prompt_ids_len"][p.round][p.index], p
    assert max(max(r) for r in engines["prompt_ids_len"]) == LONG_TOKENS


@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: p.name)
def test_tilelang_greedy_tokens_equal_torch_native(engines, prompt):
    ref = _generation(engines, "torch_native", prompt)
    got = _generation(engines, REFERENCE, prompt)
    assert len(ref["tokens"]) == MAX_NEW_TOKENS
    if got["tokens"] != ref["tokens"]:
        step = next(i for i, (a, b) in enumerate(zip(got["tokens"], ref["tokens"])) if a != b)
        pytest.fail(f"first mismatch at step {step}: tilelang {got['tokens'][step]} vs torch_native "
                    f"{ref['tokens'][step]} (torch_native's top1-top2 logprob gap there "
                    f"{ref['gaps'][step]:.3g})\n tilelang     {got['tokens']}\n torch_native {ref['tokens']}")


def test_token_comparison_catches_a_planted_attention_bug(engines):
    """Self-test: the same backend with a planted attention bug must change the greedy tokens."""
    changed = [p.name for p in PROMPTS
               if _generation(engines, PLANTED, p)["tokens"] != _generation(engines, "torch_native", p)["tokens"]]
    assert changed, f"{PLANTED} left every prompt's greedy tokens unchanged: the model ignores attention"


def test_prompts_cover_ragged_batch_and_cached_prefix(engines):
    lens = [g["prompt_tokens"] for g in engines["generations"]["torch_native"][0]]
    assert lens[0] <= 2 and lens[-1] >= LONG_TOKENS, lens  # 1 token (+BOS) up to a long prompt, one batch
    for backend in ("torch_native", REFERENCE):
        second = engines["generations"][backend][1][0]
        assert second["prompt_tokens"] > lens[1], "round 1's prompt must extend round 0's"
        # SGLang's radix cache served round 0's prompt: this extend ran over cached K/V
        assert second["cached_tokens"] >= lens[1] - 1, (backend, second["cached_tokens"], lens[1])


def test_greedy_decisions_are_not_near_ties(engines, artifacts_dir):
    """Token equality means something only if each step's top-1/top-2 margin dwarfs the two
    backends' numerical disagreement on that margin (both engines run FP32)."""
    record_agreement(artifacts_dir, "sglang-cpu-tilelang-vs-torch_native", [
        compare(p.name, GreedyRun.from_record(_generation(engines, "torch_native", p)),
                GreedyRun.from_record(_generation(engines, REFERENCE, p))) for p in PROMPTS])
    worst = []
    for p in PROMPTS:
        ref, got = _generation(engines, "torch_native", p), _generation(engines, REFERENCE, p)
        for step, (a, b) in enumerate(zip(ref["gaps"], got["gaps"])):
            worst.append((a, abs(a - b), f"{p.name}@{step}"))
    gap, _drift, where = min(worst)
    largest_drift = max(d for _, d, _ in worst)
    print(f"smallest top1-top2 logprob gap {gap:.4g} at {where}; largest gap disagreement {largest_drift:.3g}")
    assert gap > 10 * largest_drift, (gap, largest_drift, where)


def test_plugin_registers_tilelang_in_the_spawned_scheduler(engines):
    runner_pid = engines["pid"]
    markers = engines["markers"]
    built = [m for m in markers["backend"] if m["event"] == "constructed" and m["served_as"] == REFERENCE]
    assert len(built) == 1, markers["backend"]  # one engine asked for the reference adapter and got it
    b = built[0]
    assert (b["class"], b["module"]) == ("TileLangAttnBackend", "tilegate.serving.sglang_backend")
    assert b["mode"] == "reference" and b["planted_bug"] is None
    # built in a process SGLang spawned (the scheduler), not in the runner nor in pytest
    assert b["pid"] not in (runner_pid, os.getpid()) and b["ppid"] == runner_pid
    # the plugin ran there, and in the runner too (ServerArgs accepted "tilelang")
    assert {b["pid"], runner_pid} <= set(markers["registered_pids"])
    served = {m["event"] for m in markers["backend"] if m["pid"] == b["pid"]}
    assert {"first-extend", "first-decode"} <= served, served


def test_engine_refuses_unsupported_head_dim_clearly(engines):
    err = engines["errors"]["head-dim-32"]
    assert not err["started"], f"the engine served a head_dim 32 model with tilelang (log {err['log']})"
    assert err["returncode"] != 0
    assert any("head_dim 32 unsupported: no TileLang tile config (supported: 64, 128)" in r for r in err["reasons"]), err


# ---- long context: the retrieval prompt(s) on the long-context model -------------------------

@dataclass(frozen=True)
class RetrievalAgreement(Agreement):
    """One retrieval prompt's judgement: ``passed`` and ``detail`` cover the greedy agreement, the
    answer and the logprob bound; the rest is what its table row shows besides (margins: FP32's
    top-1 minus top-2 logprob over every step of its greedy run)."""
    prompt_tokens: int
    ref_min_margin: float
    ref_median_margin: float
    ref_right: bool
    answer_right: bool


def _retrieval_problems(agreement: Agreement, answer_right: bool, got: list[int], expected: list[int]) -> list[str]:
    problems = [] if agreement.passed else [agreement.detail]
    if not answer_right:
        problems.append(f"wrong answer {got}, expected {expected}")
    if agreement.max_logprob_diff > FP32_LOGPROB_TOL:
        problems.append(f"logprob moved {agreement.max_logprob_diff:.2e} > {FP32_LOGPROB_TOL:.0e} nats")
    return problems


def _retrieval_judgement(long_context: dict, backend: str) -> list[RetrievalAgreement]:
    """Each retrieval prompt on ``backend`` against FP32: tokens agree (vLLM's criterion), the
    answer is the planted span's rest, and no chosen token's logprob moved past FP32_LOGPROB_TOL."""
    out = []
    for prompt, ref, got in zip(long_context["prompts"], long_context["reference"], long_context["generations"][backend],
                                strict=True):
        agreement = compare(prompt["name"], GreedyRun.from_record(ref), GreedyRun.from_record(got))
        right = got["tokens"] == prompt["expected"]
        problems = _retrieval_problems(agreement, right, got["tokens"], prompt["expected"])
        margins = [step[0][1] - step[1][1] for step in ref["top"]]  # each step's top-k, best first
        verdict = {"passed": not problems, "detail": "; ".join(problems) or agreement.detail}
        out.append(RetrievalAgreement(**(agreement.as_dict() | verdict), prompt_tokens=got["prompt_tokens"], ref_min_margin=min(margins),
                                      ref_median_margin=statistics.median(margins),
                                      ref_right=ref["tokens"] == prompt["expected"], answer_right=right))
    return out


def _retrieval_table(backend: str, rows: list[RetrievalAgreement]) -> str:
    lines = [f"{backend} vs transformers FP32 (logprob bound {FP32_LOGPROB_TOL:.0e} nats):",
             f"{'prompt':<22} {'tokens':>6} {'fp32 min margin':>15} {'fp32 median':>11} {'fp32 answer':>11} "
             f"{'answer':>6} {'max dlogp':>9}  verdict"]
    for r in rows:
        lines.append(f"{r.prompt:<22} {r.prompt_tokens:>6} {r.ref_min_margin:>15.3f} {r.ref_median_margin:>11.3f} "
                     f"{'right' if r.ref_right else 'WRONG':>11} {'right' if r.answer_right else 'WRONG':>6} "
                     f"{r.max_logprob_diff:>9.2e}  {'ok' if r.passed else 'FAIL: ' + r.detail}")
    return "\n".join(lines)


def _judge_and_record(engines, backend: str, artifacts_dir) -> list[RetrievalAgreement]:
    rows = _retrieval_judgement(engines["long_context"], backend)
    record_agreement(artifacts_dir, f"sglang-cpu-long-context-{backend}-vs-hf-fp32", rows)
    print(_retrieval_table(backend, rows))
    return rows


def test_long_context_agrees_with_fp32_reference(engines, artifacts_dir):
    """The reference adapter in SGLang's engine, at 3782 tokens: same greedy tokens as FP32, the
    right answer, and every chosen token's logprob within FP32_LOGPROB_TOL of FP32's."""
    rows = _judge_and_record(engines, REFERENCE, artifacts_dir)
    timings = engines["timings"]
    print(f"child: {timings['total_s']:.0f} s, of which the long-context part {timings['long_context_s']:.0f} s "
          f"({engines['long_context']['timings']})")
    assert [r.prompt for r in rows] == [p.name for p in LONG_CONTEXT_PROMPTS]
    failed = [r for r in rows if not r.passed]
    assert not failed, "\n".join(f"{r.prompt}: {r.detail}" for r in failed)


def test_long_context_judgement_catches_planted_scale(engines, artifacts_dir):
    """Self-test: a x1.1 softmax scale must fail the same judgement (here: by the logprob bound,
    as the model's margins keep its greedy tokens)."""
    rows = _judge_and_record(engines, LONG_CONTEXT_PLANTED, artifacts_dir)
    assert any(not r.passed for r in rows), \
        f"{LONG_CONTEXT_PLANTED} passed: " + "; ".join(f"{r.prompt} max dlogp {r.max_logprob_diff:.2e}" for r in rows)


def test_long_context_prompts_reach_the_engine_whole(engines):
    """Each engine saw every retrieval prompt whole (no truncation at the 4096-token context) and
    generated the answer's length."""
    lc = engines["long_context"]
    for backend, generations in lc["generations"].items():
        for prompt, got in zip(lc["prompts"], generations, strict=True):
            assert got["prompt_tokens"] == prompt["ids_len"], (backend, prompt["name"], got["prompt_tokens"])
            assert len(got["tokens"]) == len(prompt["expected"]), (backend, prompt["name"])
    assert [p["ids_len"] for p in lc["prompts"]] == [p.tokens for p in LONG_CONTEXT_PROMPTS]


def test_long_context_backends_are_the_instrumented_ones(engines):
    """Each long-context engine was served by the backend it named, planted bug included, in
    SGLang's scheduler, through both its extend and its decode."""
    backends = engines["long_context"]["markers"]["backend"]
    constructed = [m for m in backends if m["event"] == "constructed"]
    built = {m["served_as"]: m for m in constructed}
    assert sorted(built) == sorted(m["served_as"] for m in constructed) == sorted([REFERENCE, LONG_CONTEXT_PLANTED]), backends
    assert built[REFERENCE]["planted_bug"] is None and built[LONG_CONTEXT_PLANTED]["planted_bug"] == "scale10"
    for name, b in built.items():
        assert b["mode"] == "reference" and b["ppid"] == engines["pid"], (name, b)
        served = {m["event"] for m in backends if m["pid"] == b["pid"]}
        assert {"first-extend", "first-decode"} <= served, (name, served)
