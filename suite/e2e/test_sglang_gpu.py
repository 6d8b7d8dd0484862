"""SGLang's real engine on the local GPU serving the TileLang kernels (attention_backend="tilelang",
kernel mode), fp16 and bf16, CUDA/HIP graphs off and on, judged against FP32 relative to SGLang's
own same-precision backend (the peer: triton on CUDA, the default on ROCm) on the same prompts in
the same run (references/peer_bound.py). The plan, one child process per engine set, all at once:
tilegate.fixtures.sglang_gpu_plan. The kernels must serve every forward (the backend's markers),
and each planted kernel bug must fail the same judgement.

Needs SGLang's GPU build in this python (on the H200 here: ../shared/device/sglang-h200; on the
MI300X runner its ROCm build); elsewhere it skips with one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tilegate.artifacts.writer import record_agreement
from tilegate.fixtures import sglang_gpu_plan as plan
from tilegate.fixtures.long_context_llama import SPEC as LONG_SPEC
from tilegate.fixtures.tiny_llama import TINY_LLAMA
from tilegate.gate.builds import Build, phase_builds
from tilegate.gate.planted import CombineDefect, ExtendDefect, knobs_for
from tilegate.harness.sglang.driver import EngineRun
from tilegate.harness.sglang.observations import served
from tilegate.harness.sglang.planted import KERNEL_BUGS
from tilegate.harness.sglang.registration import kernel_planted_name
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import detect
from tilegate.references.agreement import GreedyRun
from tilegate.references.peer_bound import (
    PeerBoundAgreement,
    Side,
    bound_problems,
    judge_prompt,
    table_lines,
)

assert (TINY_LLAMA.heads, TINY_LLAMA.kv_heads, TINY_LLAMA.head_dim) == (
    LONG_SPEC.heads,
    LONG_SPEC.kv_heads,
    LONG_SPEC.head_dim,
)
SHAPES = [
    AttentionShape(TINY_LLAMA.heads, TINY_LLAMA.kv_heads, TINY_LLAMA.head_dim, True, dt)
    for dt in ("float16", "bfloat16")
]
pytestmark = [
    pytest.mark.sglang,
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.builds(
        *(b for s in SHAPES for kind in ("extend", "decode") for b in phase_builds(kind, s)),
        *phase_builds("extend", SHAPES[0], defect=ExtendDefect.PREFIX_OFF_BY_ONE),
        Build(
            "paged_decode_combine",
            SHAPES[0],
            options=(("knobs", knobs_for(CombineDefect.DROP_SMALLEST_SPLIT)),),
        ),
    ),
]

PEER = "default" if detect().kind == "rocm" else "triton"  # SGLang's same-precision backend here
PLANTED = {bug: kernel_planted_name(bug) for bug in KERNEL_BUGS}
SETS = {s.name: s for s in plan.engine_sets(PEER, PLANTED)}
HEALTHY = [s for s in SETS.values() if not s.planted]
RESULT_TIMEOUT_S = 840  # inside the GPU tests' 900 s deadline: every child runs at once


def _set_params(sets):
    return [
        pytest.param(s, id=s.name, marks=pytest.mark.xdist_group(f"sglang-gpu-{s.name}"))
        for s in sets
    ]


def _planted_set(bug: str):
    return plan.planted_set(SETS.values(), PLANTED[bug])


@pytest.fixture(scope="session")
def runs(request) -> dict[str, EngineRun]:
    """The child of every engine set the selected tests read, and the reference's, all started at
    the first test that asks, so that their engine start-ups overlap on the GPU; each test waits
    only for the ones it reads."""
    from filelock import FileLock

    from tilegate.fixtures.long_context_llama import ensure_long_context_llama
    from tilegate.fixtures.tiny_llama_train import ensure_trained_tiny_llama

    root = Path(os.environ["TILEGATE_RUN_DIR"]) / "sglang-gpu"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / "models.lock")):  # trained once, here, not by every child at once
        ensure_trained_tiny_llama(), ensure_long_context_llama()
    wanted = plan.wanted_sets(
        [getattr(getattr(i, "callspec", None), "params", {}) for i in request.session.items],
        SETS.values(),
        PLANTED,
    )
    out = {
        name: EngineRun(root / name, plan.child_spec(s), python=Path(sys.executable), cpu=False)
        for name, s in SETS.items()
        if name in wanted
    }
    out["reference"] = EngineRun(
        root / "reference", plan.child_spec(None), python=Path(sys.executable), cpu=False
    )
    for run in out.values():
        run.start()
    return out


@pytest.fixture(scope="session")
def reference(runs) -> dict:
    return runs["reference"].result(RESULT_TIMEOUT_S)


def _side(record: dict) -> Side:
    return Side(GreedyRun.from_record(record), tuple(record.get("prompt_logprobs", ())))


def tiny_records(ref: dict, got: dict, test: str, peer: str) -> list[PeerBoundAgreement]:
    """The tiny model's prompts (every round), ``test`` and ``peer`` against FP32."""
    records, names = [], iter(plan.TINY_NAMES)
    for r, ref_round in enumerate(ref["reference"]):
        for i, fp32 in enumerate(ref_round):
            records.append(
                judge_prompt(
                    next(names),
                    _side(fp32),
                    _side(got["generations"][test][r][i]),
                    _side(got["generations"][peer][r][i]),
                )
            )
    return records


def long_records(ref: dict, got: dict, test: str, peer: str) -> list[PeerBoundAgreement]:
    lc_ref, lc = ref["long_context"], got["long_context"]
    return [
        judge_prompt(p["name"], _side(fp32), _side(t), _side(q), expected=p["expected"])
        for p, fp32, t, q in zip(
            lc_ref["prompts"],
            lc_ref["reference"],
            lc["generations"][test],
            lc["generations"][peer],
            strict=True,
        )
    ]


def _report(
    artifacts_dir, name: str, records: list[PeerBoundAgreement], problems: list[str]
) -> None:
    lines = table_lines(records)
    record_agreement(artifacts_dir, name, records, table=lines + [f"bound: {p}" for p in problems])
    print(f"\n{name}:\n" + "\n".join(lines) + ("\n" + "\n".join(problems) if problems else ""))


@pytest.mark.parametrize("engines", _set_params(HEALTHY))
def test_tilelang_agrees_with_fp32_as_closely_as_the_peer(engines, runs, reference, artifacts_dir):
    """The tiny model: greedy tokens agree with FP32 (top-5 rule); logprobs over every prompt row
    and the agreed steps move at most 2x the peer's, pooled over the prompts."""
    got = runs[engines.name].result(RESULT_TIMEOUT_S)
    records = tiny_records(reference, got, plan.TILELANG, PEER)
    problems = bound_problems(records, pooled=True)
    _report(artifacts_dir, f"sglang-gpu-{engines.name}-tiny-tilelang-vs-{PEER}", records, problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("engines", _set_params(HEALTHY))
def test_long_context_agrees_with_fp32_as_closely_as_the_peer(
    engines, runs, reference, artifacts_dir
):
    """3782, 8192 and 32768 tokens through chunked prefill: tokens agree, the answer is right, and
    each prompt's step and prompt-row logprobs move at most 2x the peer's."""
    got = runs[engines.name].result(RESULT_TIMEOUT_S)
    records = long_records(reference, got, plan.TILELANG, PEER)
    problems = bound_problems(records, pooled=False)
    _report(
        artifacts_dir,
        f"sglang-gpu-{engines.name}-long-context-tilelang-vs-{PEER}",
        records,
        problems,
    )
    assert [r.prompt for r in records] == [f"retrieval-{n}" for n in plan.LONG_LENGTHS]
    assert not problems, "\n".join(problems)


def _expected_tokens(generations: list) -> tuple[int, int]:
    """(prompt tokens the engine computed, decode steps it ran) over every request served."""
    flat = [g for round_ in generations for g in round_]
    return sum(g["prompt_tokens"] - g["cached_tokens"] for g in flat), sum(
        g["completion_tokens"] - 1 for g in flat
    )


@pytest.mark.parametrize("engines", _set_params(HEALTHY))
def test_the_kernels_served_every_forward(engines, runs):
    """The backend SGLang built in its scheduler ran the kernels for every prompt token and every
    decode step; graphs were captured and replayed when on, never when off; the paths the plan
    asks for ran: a radix-cache hit, requests joining while others decode, chunked prefill."""
    got = runs[engines.name].result(RESULT_TIMEOUT_S)
    for phase, markers, generations in (
        ("tiny", got["markers"], got["generations"][plan.TILELANG]),
        (
            "long-context",
            got["long_context"]["markers"],
            [got["long_context"]["generations"][plan.TILELANG]],
        ),
    ):
        s = served(markers, plan.TILELANG)
        # built in SGLang's scheduler
        assert s.mode == "kernel" and s.ppid == got["pid"], (phase, s)
        assert {"first-extend", "first-decode"} <= s.entry_points, (phase, s)
        prompt_tokens, decode_steps = _expected_tokens(generations)
        assert s.extend_tokens == prompt_tokens, (phase, s, prompt_tokens)
        # the overlap scheduler may run one more
        assert s.decode_tokens >= decode_steps, (phase, s, decode_steps)
        assert (
            (s.replays > 0 and s.captures > 0) if engines.graphs else (s.replays == s.captures == 0)
        ), (phase, s)
        assert s.joined_while_decoding > 0 or phase == "long-context", (phase, s)
    tiny = got["generations"][plan.TILELANG]
    assert tiny[1][0]["cached_tokens"] > 0, "round 1 was not answered from the radix cache"
    long_served = served(got["long_context"]["markers"], plan.TILELANG)
    assert long_served.prefixed_extends >= max(plan.LONG_LENGTHS) // plan.CHUNK - 1, long_served


@pytest.mark.parametrize(
    "bug",
    [
        pytest.param(b, marks=pytest.mark.xdist_group(f"sglang-gpu-planted-{b}"))
        for b in KERNEL_BUGS
    ],
)
def test_planted_kernel_bug_fails_the_judgement(bug, runs, reference, artifacts_dir):
    """Self-test: the production kernels with ``bug`` planted, through SGLang's engine, must fail
    the judgement above on the tiny model or at long context (against the fp16 eager set's peer)."""
    got = dict(runs[_planted_set(bug).name].result(RESULT_TIMEOUT_S))
    peer = runs[plan.PLANTED_PEER_SET].result(RESULT_TIMEOUT_S)
    got["generations"] = got["generations"] | {PEER: peer["generations"][PEER]}
    got["long_context"] = got["long_context"] | {
        "generations": got["long_context"]["generations"]
        | {PEER: peer["long_context"]["generations"][PEER]}
    }
    assert served(got["markers"], PLANTED[bug]).mode == "kernel"
    tiny = tiny_records(reference, got, PLANTED[bug], PEER)
    long = long_records(reference, got, PLANTED[bug], PEER)
    tiny_problems, long_problems = (
        bound_problems(tiny, pooled=True),
        bound_problems(long, pooled=False),
    )
    _report(artifacts_dir, f"sglang-gpu-planted-{bug}-tiny", tiny, tiny_problems)
    _report(artifacts_dir, f"sglang-gpu-planted-{bug}-long-context", long, long_problems)
    assert tiny_problems or long_problems, (
        f"planted {bug} passed the SGLang judgement on every prompt"
    )


@pytest.mark.llama3
@pytest.mark.xdist_group("sglang-gpu-llama3")
def test_llama3_checkpoint_agrees_with_fp32_as_closely_as_the_peer(request, artifacts_dir):
    """A local Meta-Llama-3 (--llama3-path), bf16, the tiny model's prompts and judgement."""
    path = str(Path(request.config.getoption("--llama3-path")).resolve())
    root = Path(os.environ["TILEGATE_RUN_DIR"]) / "sglang-gpu"
    got = EngineRun(
        root / "llama3",
        plan.checkpoint_spec(path, (plan.TILELANG, PEER)),
        python=Path(sys.executable),
        cpu=False,
    ).result(3600)
    records = tiny_records(got, got, plan.TILELANG, PEER)
    problems = bound_problems(records, pooled=True)
    _report(artifacts_dir, f"sglang-gpu-llama3-tilelang-vs-{PEER}", records, problems)
    assert not problems, "\n".join(problems)
