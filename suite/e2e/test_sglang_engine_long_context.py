"""SGLang's real engine on the CPU at long context, with the tilelang backend's adapter over the
FP32 reference (suite/e2e/test_sglang_engine.py has the short prompts).

A child of its own in .venv-sglang (tilegate.harness.sglang.child, tilegate.fixtures.e2e_prompts.
LONG_CONTEXT_SPEC) serves the long-context tiny Llama-3 a 3782-token retrieval prompt with
"tilelang-reference" and with a x1.1 softmax scale planted, against transformers FP32 (the gate's
chunked FP32 attention) on the same ids. It starts at collection beside the short prompts' child,
so on 2 cores its engines overlap that child's instead of queueing behind them; the tests only read
its JSON, after every other test.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pytest

from tilegate.artifacts.writer import record_agreement
from tilegate.fixtures.e2e_prompts import LONG_CONTEXT_PLANTED, LONG_CONTEXT_PROMPTS, REFERENCE
from tilegate.references.agreement import Agreement, GreedyRun, compare
from tilegate.testing.pytest_fixtures import sglang_engine_run

# nested: its own SGLang CPU child, about 65 CPU s, so in -m nested (.ci/run) with the other
# runs in .venv-sglang rather than in the README's test command
pytestmark = [pytest.mark.sglang, pytest.mark.nested]

# Long context, FP32 against FP32: the engine's reference ops and transformers (with the gate's
# chunked FP32 attention) compute the same model in the same precision, only in another order of
# operations (paged K/V, SGLang's own RMSNorm, RoPE and matmul shapes); that moves a chosen
# token's logprob by ~1e-7 nats here (1.15e-7 measured at 3782 tokens), so 1e-3 leaves ~8700x room.
# It is a fixed number, taken from neither side's output, so no run can widen its own bound; a x1.1
# softmax scale moves 3.6e-3.
FP32_LOGPROB_TOL = 1e-3


@pytest.fixture(scope="session")
def sglang_long_context() -> dict:
    """What the long-context child reported (tilegate.testing.pytest_fixtures.SGLANG_CPU_RUNS
    names this fixture: the plugin starts that child when a selected test asks for it)."""
    return sglang_engine_run().result("sglang_long_context")


@pytest.fixture(scope="session")
def engines(sglang_long_context) -> dict:
    return sglang_long_context


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


def _retrieval_problems(
    agreement: Agreement, answer_right: bool, got: list[int], expected: list[int]
) -> list[str]:
    problems = [] if agreement.passed else [agreement.detail]
    if not answer_right:
        problems.append(f"wrong answer {got}, expected {expected}")
    if agreement.max_logprob_diff > FP32_LOGPROB_TOL:
        problems.append(
            f"logprob moved {agreement.max_logprob_diff:.2e} > {FP32_LOGPROB_TOL:.0e} nats"
        )
    return problems


def _retrieval_judgement(long_context: dict, backend: str) -> list[RetrievalAgreement]:
    """Each retrieval prompt on ``backend`` against FP32: tokens agree (vLLM's criterion), the
    answer is the planted span's rest, and no chosen token's logprob moved past FP32_LOGPROB_TOL."""
    out = []
    for prompt, ref, got in zip(
        long_context["prompts"],
        long_context["reference"],
        long_context["generations"][backend],
        strict=True,
    ):
        agreement = compare(prompt["name"], GreedyRun.from_record(ref), GreedyRun.from_record(got))
        right = got["tokens"] == prompt["expected"]
        problems = _retrieval_problems(agreement, right, got["tokens"], prompt["expected"])
        margins = [step[0][1] - step[1][1] for step in ref["top"]]  # each step's top-k, best first
        verdict = {"passed": not problems, "detail": "; ".join(problems) or agreement.detail}
        out.append(
            RetrievalAgreement(
                **(agreement.as_dict() | verdict),
                prompt_tokens=got["prompt_tokens"],
                ref_min_margin=min(margins),
                ref_median_margin=statistics.median(margins),
                ref_right=ref["tokens"] == prompt["expected"],
                answer_right=right,
            )
        )
    return out


def _retrieval_table(backend: str, rows: list[RetrievalAgreement]) -> str:
    lines = [
        f"{backend} vs transformers FP32 (logprob bound {FP32_LOGPROB_TOL:.0e} nats):",
        f"{'prompt':<22} {'tokens':>6} {'fp32 min margin':>15} {'fp32 median':>11} "
        f"{'fp32 answer':>11} "
        f"{'answer':>6} {'max dlogp':>9}  verdict",
    ]
    for r in rows:
        lines.append(
            f"{r.prompt:<22} {r.prompt_tokens:>6} {r.ref_min_margin:>15.3f} "
            f"{r.ref_median_margin:>11.3f} "
            f"{'right' if r.ref_right else 'WRONG':>11} "
            f"{'right' if r.answer_right else 'WRONG':>6} "
            f"{r.max_logprob_diff:>9.2e}  {'ok' if r.passed else 'FAIL: ' + r.detail}"
        )
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
    print(
        f"child: {timings['total_s']:.0f} s, of which the long-context part "
        f"{timings['long_context_s']:.0f} s "
        f"({engines['long_context']['timings']})"
    )
    assert [r.prompt for r in rows] == [p.name for p in LONG_CONTEXT_PROMPTS]
    failed = [r for r in rows if not r.passed]
    assert not failed, "\n".join(f"{r.prompt}: {r.detail}" for r in failed)


def test_long_context_judgement_catches_planted_scale(engines, artifacts_dir):
    """Self-test: a x1.1 softmax scale must fail the same judgement (here: by the logprob bound,
    as the model's margins keep its greedy tokens)."""
    rows = _judge_and_record(engines, LONG_CONTEXT_PLANTED, artifacts_dir)
    assert any(not r.passed for r in rows), f"{LONG_CONTEXT_PLANTED} passed: " + "; ".join(
        f"{r.prompt} max dlogp {r.max_logprob_diff:.2e}" for r in rows
    )


def test_long_context_prompts_reach_the_engine_whole(engines):
    """Each engine saw every retrieval prompt whole (no truncation at the 4096-token context) and
    generated the answer's length."""
    lc = engines["long_context"]
    for backend, generations in lc["generations"].items():
        for prompt, got in zip(lc["prompts"], generations, strict=True):
            assert got["prompt_tokens"] == prompt["ids_len"], (
                backend,
                prompt["name"],
                got["prompt_tokens"],
            )
            assert len(got["tokens"]) == len(prompt["expected"]), (backend, prompt["name"])
    assert [p["ids_len"] for p in lc["prompts"]] == [p.tokens for p in LONG_CONTEXT_PROMPTS]


def test_long_context_backends_are_the_instrumented_ones(engines):
    """Each long-context engine was served by the backend it named, planted bug included, in
    SGLang's scheduler, through both its extend and its decode."""
    backends = engines["long_context"]["markers"]["backend"]
    constructed = [m for m in backends if m["event"] == "constructed"]
    built = {m["served_as"]: m for m in constructed}
    assert (
        sorted(built)
        == sorted(m["served_as"] for m in constructed)
        == sorted([REFERENCE, LONG_CONTEXT_PLANTED])
    ), backends
    assert (
        built[REFERENCE]["planted_bug"] is None
        and built[LONG_CONTEXT_PLANTED]["planted_bug"] == "scale10"
    )
    for name, b in built.items():
        assert b["mode"] == "reference" and b["ppid"] == engines["pid"], (name, b)
        served = {m["event"] for m in backends if m["pid"] == b["pid"]}
        assert {"first-extend", "first-decode"} <= served, (name, served)
