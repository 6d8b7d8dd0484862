"""A serving backend judged against FP32 relative to a peer: SGLang's own same-precision backend
on the same prompts, in the same run (suite/e2e/test_sglang_gpu.py).

Per prompt the backend under test must agree with the FP32 greedy run (references/agreement.py's
criterion) and, where the prompt has one, give the right answer; and its logprobs may move from
FP32's at most LOGPROB_MULTIPLE x as far as the peer's do (the numerics tier's criterion, 2x a
same-precision implementation's error, applied to logprobs). Two movements are bounded:

- generated steps: the chosen token's logprob, over the steps before either backend diverged from
  FP32 (after a divergence the contexts differ, so nothing is compared);
- prompt rows: log p(ids[i + 1] | ids[:i + 1]) over the rows asked for (every row is compared:
  the prompt is the same for all).

``pooled``: one bound over all prompts of a model (the tiny model's prompts are a few rows and
steps each; one small sample's ratio of two rounding errors says little), else one per prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilegate.references.agreement import LOGPROB_MULTIPLE, Agreement, GreedyRun, compare, max_shift


@dataclass(frozen=True)
class Side:
    """One backend's (or FP32's) output for one prompt."""

    run: GreedyRun
    rows: tuple[float, ...] = ()  # prompt-row logprobs, if asked for


@dataclass(frozen=True)
class PeerBoundAgreement(Agreement):
    """The test backend's agreement with FP32 (Agreement's fields), with what the bound compares."""

    peer_agrees: bool = True
    common_steps: int = 0
    step_shift: float = 0.0
    peer_step_shift: float = 0.0
    row_shift: float | None = None
    peer_row_shift: float | None = None
    answer_right: bool | None = None
    problems: tuple[str, ...] = field(default=())


def step_shift(ref: GreedyRun, run: GreedyRun, steps: int) -> float:
    """Largest |logprob| change of FP32's chosen token over the first ``steps`` steps (which both
    chose alike)."""
    return max(
        (
            abs(ref.top_logprobs[i][t] - run.top_logprobs[i][t])
            for i, t in enumerate(ref.tokens[:steps])
        ),
        default=0.0,
    )


def _matched(a: Agreement) -> int:
    return a.steps if a.first_divergence is None else a.first_divergence


def judge_prompt(
    prompt: str, fp32: Side, test: Side, peer: Side, expected: list[int] | None = None
) -> PeerBoundAgreement:
    """One prompt's record; ``problems`` holds what fails regardless of the bound (agreement,
    answer)."""
    mine, theirs = compare(prompt, fp32.run, test.run), compare(prompt, fp32.run, peer.run)
    common = min(_matched(mine), _matched(theirs))
    rows = (
        (max_shift(fp32.rows, test.rows), max_shift(fp32.rows, peer.rows))
        if fp32.rows
        else (None, None)
    )
    right = None if expected is None else list(test.run.tokens) == list(expected)
    problems = [] if mine.passed else [f"tokens: {mine.detail}"]
    if not theirs.passed:
        problems.append(
            f"the peer itself disagrees with FP32 ({theirs.detail}): the prompt or model is not "
            "fit to judge by"
        )
    if expected is not None and list(fp32.run.tokens) == list(expected) and not right:
        problems.append(f"wrong answer {list(test.run.tokens)}, expected {list(expected)}")
    return PeerBoundAgreement(
        **(mine.as_dict() | {"passed": not problems, "detail": "; ".join(problems) or mine.detail}),
        peer_agrees=theirs.passed,
        common_steps=common,
        step_shift=step_shift(fp32.run, test.run, common),
        peer_step_shift=step_shift(fp32.run, peer.run, common),
        row_shift=rows[0],
        peer_row_shift=rows[1],
        answer_right=right,
        problems=tuple(problems),
    )


def _bound(label: str, test: float, peer: float, what: str) -> list[str]:
    if test > LOGPROB_MULTIPLE * peer:
        return [
            f"{label}: {what} logprobs moved {test:.2e} from FP32 > {LOGPROB_MULTIPLE:g} x the "
            f"peer's {peer:.2e}"
        ]
    return []


def bound_problems(records: list[PeerBoundAgreement], pooled: bool) -> list[str]:
    """Every failure of the records: their own problems, then the logprob bounds."""
    out = [f"{r.prompt}: {p}" for r in records for p in r.problems]
    groups = [("all prompts", records)] if pooled else [(r.prompt, [r]) for r in records]
    for label, rs in groups:
        stepped = [r for r in rs if r.common_steps]
        if stepped:
            out += _bound(
                label,
                max(r.step_shift for r in stepped),
                max(r.peer_step_shift for r in stepped),
                "step",
            )
        rowed = [r for r in rs if r.row_shift is not None]
        if rowed:
            out += _bound(
                label,
                max(r.row_shift or 0.0 for r in rowed),
                max(r.peer_row_shift or 0.0 for r in rowed),
                "prompt-row",
            )
    return out


def table_lines(records: list[PeerBoundAgreement]) -> list[str]:
    lines = [
        f"{'prompt':<24} {'first div':>9} {'steps':>5} {'dlogp steps':>11} {'peer':>9} "
        f"{'dlogp rows':>10} "
        f"{'peer':>9} {'answer':>6}  verdict"
    ]
    for r in records:
        div = "-" if r.first_divergence is None else str(r.first_divergence)
        rows = "-" if r.row_shift is None else f"{r.row_shift:.2e}"
        peer_rows = "-" if r.peer_row_shift is None else f"{r.peer_row_shift:.2e}"
        answer = "-" if r.answer_right is None else ("right" if r.answer_right else "WRONG")
        lines.append(
            f"{r.prompt[:24]:<24} {div:>9} {r.common_steps:>5} {r.step_shift:>11.2e} "
            f"{r.peer_step_shift:>9.2e} "
            f"{rows:>10} {peer_rows:>9} {answer:>6}  {'ok' if r.passed else 'FAIL: ' + r.detail}"
        )
    return lines
