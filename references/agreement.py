"""Greedy token agreement between a model under test and its FP32 reference.

Criterion (vLLM's tests/models/utils.py `check_logprobs_close`): walk both greedy outputs
step by step; they agree up to the first mismatch, and there each side's token must be among
the other's top-k candidates. After a mismatch the two continue from different contexts,
so nothing past it is compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# vLLM's model tests ask for 5 logprobs per step (NUM_LOG_PROBS / num_logprobs=5).
TOP_K = 5
# At long context a bug can leave every greedy token in place, so the long-context tier also
# bounds how far logprobs move from FP32: at most this multiple of what the same model moves in
# the same dtype with a plain same-precision attention (references.attention.ref_attention_lowp),
# as the numerics tier bounds a kernel's error by 2x such a baseline's (FlashAttention's criterion).
LOGPROB_MULTIPLE = 2.0


@dataclass(frozen=True)
class GreedyRun:
    tokens: tuple[int, ...]
    top_logprobs: tuple[dict[int, float], ...]  # per step: token -> logprob, the k best

    @classmethod
    def from_record(cls, record: dict) -> GreedyRun:
        """From a JSON record {"tokens": [...], "top": [[[token, logprob], ...] per step]} (what
        tilegate.harness.sglang.child writes, for SGLang's engines and for the FP32 reference)."""
        return cls(
            tuple(record["tokens"]),
            tuple({int(t): float(lp) for t, lp in step} for step in record["top"]),
        )


@dataclass(frozen=True)
class Agreement:
    prompt: str
    steps: int
    first_divergence: int | None  # None: identical greedy outputs
    agreement_fraction: float  # steps before the first divergence / steps
    max_logprob_diff: float  # |logprob_ref - logprob_test| of the chosen token, over matched steps
    min_ref_margin: float  # smallest top-1 minus top-2 logprob of the reference over matched steps
    passed: bool
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def _margin(top: dict[int, float]) -> float:
    best = sorted(top.values(), reverse=True)
    return best[0] - best[1] if len(best) > 1 else math.inf


def compare(prompt: str, ref: GreedyRun, test: GreedyRun, k: int = TOP_K) -> Agreement:
    steps = min(len(ref.tokens), len(test.tokens))
    diffs: list[float] = []
    margins: list[float] = []
    for i in range(steps):
        a, b = ref.tokens[i], test.tokens[i]
        if a != b:
            a_in_test, b_in_ref = a in test.top_logprobs[i], b in ref.top_logprobs[i]
            ok = a_in_test and b_in_ref
            detail = (
                f"step {i}: reference {a}, test {b}; reference token in test's top-{k}: "
                f"{a_in_test}, "
                f"test token in reference's top-{k}: {b_in_ref}"
            )
            return Agreement(
                prompt,
                steps,
                i,
                i / steps,
                max(diffs, default=0.0),
                min(margins, default=math.inf),
                ok,
                detail,
            )
        if a in test.top_logprobs[i]:
            diffs.append(abs(ref.top_logprobs[i][a] - test.top_logprobs[i][a]))
        margins.append(_margin(ref.top_logprobs[i]))
    same_length = len(ref.tokens) == len(test.tokens)
    detail = (
        "identical" if same_length else f"lengths differ: {len(ref.tokens)} vs {len(test.tokens)}"
    )
    return Agreement(
        prompt,
        steps,
        None,
        1.0,
        max(diffs, default=0.0),
        min(margins, default=math.inf),
        same_length,
        detail,
    )


def max_shift(ref: tuple[float, ...], test: tuple[float, ...]) -> float:
    """Largest |ref - test| over two equally long logprob sequences (prompt logprobs)."""
    if len(ref) != len(test):
        raise ValueError(f"{len(ref)} reference logprobs, {len(test)} test logprobs")
    return max((abs(a - b) for a, b in zip(ref, test)), default=0.0)


def table_lines(results: list[Agreement]) -> list[str]:
    lines = [
        f"{'prompt':<28} {'steps':>5} {'first div':>9} {'agree':>6} {'max dlogp':>9} "
        f"{'min margin':>10}  verdict"
    ]
    for r in results:
        div = "-" if r.first_divergence is None else str(r.first_divergence)
        lines.append(
            f"{r.prompt[:28]:<28} {r.steps:>5} {div:>9} {r.agreement_fraction:>6.2f} "
            f"{r.max_logprob_diff:>9.2e} "
            f"{r.min_ref_margin:>10.3f}  {'ok' if r.passed else 'FAIL: ' + r.detail}"
        )
    return lines
