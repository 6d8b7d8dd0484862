"""SGLang's real engine on the CPU with the tilelang backend's adapter over the FP32 reference.

One subprocess in .venv-sglang (tilegate.harness.sglang.child) runs the trained tiny Llama-3 in
FP32 transformers (the reference), then serves it with attention_backend="torch_native", then
"tilelang-reference" (the production TileLangAttnBackend over the kernels' FP32 reference ops),
then the same with a planted bug, each with the same greedy prompts
(tilegate.fixtures.e2e_prompts), and meanwhile starts an engine on a model the production
"tilelang" backend must refuse. It runs once per pytest run, launched at collection by whichever
xdist worker comes first, beside the long-context child
(suite/e2e/test_sglang_engine_long_context.py); the tests only read its JSON, and run after every
other test (tilegate.testing.pytest_plugin.pytest_collection_modifyitems), by when it is done or
nearly so."""

from __future__ import annotations

import os

import pytest

from tilegate.artifacts.writer import record_agreement
from tilegate.fixtures.e2e_prompts import (
    LONG_TOKENS,
    MAX_NEW_TOKENS,
    PLANTED,
    PROMPTS,
    REFERENCE,
    Prompt,
)
from tilegate.references.agreement import GreedyRun, compare

pytestmark = [pytest.mark.sglang]


@pytest.fixture(scope="session")
def engines(sglang_engines) -> dict:
    # tilegate/testing/pytest_fixtures.py: one child per pytest run, started at collection
    return sglang_engines


def _generation(engines, backend: str, p: Prompt) -> dict:
    return engines["generations"][backend][p.round][p.index]


def _agreements(engines, backend: str) -> list:
    """Each prompt's greedy run on ``backend`` against the FP32 transformers reference."""
    return [
        compare(
            p.name,
            GreedyRun.from_record(engines["reference"][p.round][p.index]),
            GreedyRun.from_record(_generation(engines, backend, p)),
        )
        for p in PROMPTS
    ]


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
    assert any(not r.passed for r in results), (
        f"the agreement metric passed {PLANTED}: "
        + "; ".join(f"{r.prompt} {r.detail}" for r in results)
    )


def test_prompt_ids_reach_the_engine_unchanged(engines):
    """SGLang and the reference saw the same prompts: lengths as tokenized, the long one
    included."""
    for p in PROMPTS:
        assert (
            _generation(engines, REFERENCE, p)["prompt_tokens"]
            == engines["prompt_ids_len"][p.round][p.index]
        ), p
    assert max(max(r) for r in engines["prompt_ids_len"]) == LONG_TOKENS


@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: p.name)
def test_tilelang_greedy_tokens_equal_torch_native(engines, prompt):
    ref = _generation(engines, "torch_native", prompt)
    got = _generation(engines, REFERENCE, prompt)
    assert len(ref["tokens"]) == MAX_NEW_TOKENS
    if got["tokens"] != ref["tokens"]:
        step = next(i for i, (a, b) in enumerate(zip(got["tokens"], ref["tokens"])) if a != b)
        pytest.fail(
            f"first mismatch at step {step}: tilelang {got['tokens'][step]} vs torch_native "
            f"{ref['tokens'][step]} (torch_native's top1-top2 logprob gap there "
            f"{ref['gaps'][step]:.3g})\n tilelang     {got['tokens']}\n torch_native "
            f"{ref['tokens']}"
        )


def test_token_comparison_catches_a_planted_attention_bug(engines):
    """Self-test: the same backend with a planted attention bug must change the greedy tokens."""
    changed = [
        p.name
        for p in PROMPTS
        if _generation(engines, PLANTED, p)["tokens"]
        != _generation(engines, "torch_native", p)["tokens"]
    ]
    assert changed, (
        f"{PLANTED} left every prompt's greedy tokens unchanged: the model ignores attention"
    )


def test_prompts_cover_ragged_batch_and_cached_prefix(engines):
    lens = [g["prompt_tokens"] for g in engines["generations"]["torch_native"][0]]
    # 1 token (+BOS) up to a long prompt, one batch
    assert lens[0] <= 2 and lens[-1] >= LONG_TOKENS, lens
    for backend in ("torch_native", REFERENCE):
        second = engines["generations"][backend][1][0]
        assert second["prompt_tokens"] > lens[1], "round 1's prompt must extend round 0's"
        # SGLang's radix cache served round 0's prompt: this extend ran over cached K/V
        assert second["cached_tokens"] >= lens[1] - 1, (backend, second["cached_tokens"], lens[1])


def test_greedy_decisions_are_not_near_ties(engines, artifacts_dir):
    """Token equality means something only if each step's top-1/top-2 margin dwarfs the two
    backends' numerical disagreement on that margin (both engines run FP32)."""
    record_agreement(
        artifacts_dir,
        "sglang-cpu-tilelang-vs-torch_native",
        [
            compare(
                p.name,
                GreedyRun.from_record(_generation(engines, "torch_native", p)),
                GreedyRun.from_record(_generation(engines, REFERENCE, p)),
            )
            for p in PROMPTS
        ],
    )
    worst = []
    for p in PROMPTS:
        ref, got = _generation(engines, "torch_native", p), _generation(engines, REFERENCE, p)
        for step, (a, b) in enumerate(zip(ref["gaps"], got["gaps"])):
            worst.append((a, abs(a - b), f"{p.name}@{step}"))
    gap, _drift, where = min(worst)
    largest_drift = max(d for _, d, _ in worst)
    print(
        f"smallest top1-top2 logprob gap {gap:.4g} at {where}; largest gap disagreement "
        f"{largest_drift:.3g}"
    )
    assert gap > 10 * largest_drift, (gap, largest_drift, where)


def test_plugin_registers_tilelang_in_the_spawned_scheduler(engines):
    runner_pid = engines["pid"]
    markers = engines["markers"]
    built = [
        m for m in markers["backend"] if m["event"] == "constructed" and m["served_as"] == REFERENCE
    ]
    # one engine asked for the reference adapter and got it
    assert len(built) == 1, markers["backend"]
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
    assert not err["started"], (
        f"the engine served a head_dim 32 model with tilelang (log {err['log']})"
    )
    assert err["returncode"] != 0
    assert any(
        "head_dim 32 unsupported: no TileLang tile config (supported: 64, 128)" in r
        for r in err["reasons"]
    ), err
