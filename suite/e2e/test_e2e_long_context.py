"""End to end at long context, on any GPU: the long-context tiny Llama-3
(fixtures/long_context_llama.py) must copy back a span planted in the middle of 3782-, 8192- and
32768-token prompts. With the TileLang kernel as its attention, in fp16 and bf16, it must agree with
the same checkpoint in FP32 (the gate's chunked FP32 reference attention) and give the right answer;
kernels built with a planted long-context bug must fail the same comparison. Both sides get the same
token ids.

Agreement here is three things: the greedy tokens (references/agreement.py's criterion), the right
answer, and how far logprobs move from FP32, over the generated steps and over the prompt's rows
from just before the span on (prompt logprobs, as an engine reports them): at most
LOGPROB_MULTIPLE x what the same model moves in the same dtype with torch's plain same-precision
attention. At these lengths a wrong kernel can keep every greedy token and still move logprobs
far past that baseline.
"""

import statistics
from dataclasses import dataclass

import pytest
import torch
from suite_helpers import causal_builds

from tilegate.artifacts.writer import record_agreement
from tilegate.fixtures.long_context_llama import SPEC, ensure_long_context_llama, retrieval_prompt
from tilegate.fixtures.retrieval_layout import (
    PREFIX,
    SPAN_LEN,
    extend_start,
    span_start,
    straddling_span_at,
)
from tilegate.gate.builds import Build, phase_builds
from tilegate.gate.planted import CombineDefect, ExtendDefect, PrefillDefect, knobs_for
from tilegate.harness.hf_runner import HfRunner
from tilegate.kernels.problem import AttentionShape
from tilegate.references.agreement import LOGPROB_MULTIPLE, compare, max_shift

DEVICE = "cuda"
LENGTHS = (3782, 8192, 32768)
SEED = 7  # held out: training draws its prompts from other seeds
# the FP32 model must be confident and right at 3782 and 8192 tokens, else agreeing with it proves
# nothing
MIN_MARGIN, CONFIDENT_SHARE, MIN_ACCURACY = 1.0, 0.9, 0.95
# planted kernel bugs (PrefillDefect) the comparison must catch
PLANTED = (PrefillDefect.SKIP_MIDDLE_BLOCK, PrefillDefect.WRONG_SCALE_10PCT)
# ... and in SGLang's paged kernels, run under transformers as a one-request pool
# (tilegate.harness.hf_attention.paged_attention_function): each prompt from just before its span
# (span_start - 8) is an extend over the cached rest, as after a prefix-cache hit, so that a row
# that sees a key past its own reads the span before the prompt gets there; every generated token is
# a decode
PAGED_PLANTED = {
    "prefix_off_by_one": {"extend_defect": ExtendDefect.PREFIX_OFF_BY_ONE},
    "drop_smallest_split": {"combine_defect": CombineDefect.DROP_SMALLEST_SPLIT},
}
FP16 = AttentionShape(SPEC.heads, SPEC.kv_heads, SPEC.head_dim, True, "float16")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    causal_builds(SPEC.heads, SPEC.kv_heads, SPEC.head_dim, "prefill", "extend", "decode"),
    pytest.mark.builds(
        *(b for d in PLANTED for b in phase_builds("prefill", FP16, defect=d)),
        *phase_builds("extend", FP16, defect=ExtendDefect.PREFIX_OFF_BY_ONE),
        Build(
            "paged_decode_combine",
            FP16,
            options=(("knobs", knobs_for(CombineDefect.DROP_SMALLEST_SPLIT)),),
        ),
    ),
]


# One xdist group per prompt length: the 32768-token prompt's runs take as long as the other two
# together, and each group loads the model and runs its FP32 reference once.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param(n, id=str(n), marks=pytest.mark.xdist_group(f"e2e-long-context-{n}"))
        for n in LENGTHS
    ],
)
def n_tokens(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def model_dir():
    return ensure_long_context_llama()


@pytest.fixture(scope="module")
def prompts(model_dir, n_tokens):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ids, want = retrieval_prompt(
        tok, n_tokens, SEED, span_at=straddling_span_at(n_tokens), span_len=SPAN_LEN, prefix=PREFIX
    )
    first = span_start(n_tokens)
    assert ids[first + PREFIX : first + SPAN_LEN] == want, (
        "the span is not where the planted bug looks"
    )
    return {f"retrieval-{n_tokens}": (ids, want)}


@dataclass(frozen=True)
class Side:
    """One model's runs over every prompt: greedy steps, and prompt logprobs from extend_start."""

    runs: dict
    prompt_logprobs: dict


def run_side(model_dir, prompts, dtype, attn: str, cached: bool) -> Side:
    """``cached``: the prompt up to extend_start runs first, the rest is an extend over its
    cache."""
    runs, lps = {}, {}
    with HfRunner(model_dir, dtype, attn, DEVICE) as model:
        for name, (ids, want) in prompts.items():
            start = extend_start(len(ids))
            runs[name] = model.greedy(ids, len(want), cached_prefix=start if cached else 0)
            lps[name] = model.prompt_logprobs(ids, start, cached_prefix=start if cached else 0)
    return Side(runs, lps)


@pytest.fixture(scope="module")
def fp32(model_dir, prompts) -> Side:
    from tilegate.references.transformers_attention import (
        REFERENCE_IMPLEMENTATION,
        reference_attention_function,
        register,
    )

    register(REFERENCE_IMPLEMENTATION, reference_attention_function())
    return run_side(model_dir, prompts, torch.float32, REFERENCE_IMPLEMENTATION, cached=False)


@pytest.fixture(scope="module")
def fp32_runs(fp32):
    return fp32.runs


@pytest.fixture(scope="module")
def logprob_bounds(model_dir, prompts, fp32):
    """Per dtype and prompt: LOGPROB_MULTIPLE x how far the same model's logprobs move in that dtype
    with torch's plain same-precision attention (generated steps, prompt rows)."""
    from tilegate.references.transformers_attention import (
        LOWP_REFERENCE_IMPLEMENTATION,
        lowp_attention_function,
        register,
    )

    register(LOWP_REFERENCE_IMPLEMENTATION, lowp_attention_function())
    bounds = {}
    for dtype in (torch.float16, torch.bfloat16):
        base = run_side(model_dir, prompts, dtype, LOWP_REFERENCE_IMPLEMENTATION, cached=False)
        bounds[dtype] = {
            name: (
                LOGPROB_MULTIPLE * compare(name, fp32.runs[name], base.runs[name]).max_logprob_diff,
                LOGPROB_MULTIPLE
                * max_shift(fp32.prompt_logprobs[name], base.prompt_logprobs[name]),
            )
            for name in prompts
        }
    return bounds


def judge(
    prompts, fp32: Side, test: Side, bounds: dict, record_as: str, artifacts_dir
) -> list[str]:
    """Every way ``test`` fails to agree with ``fp32``; the tables go to the artifacts and
    stdout."""
    results = [compare(name, fp32.runs[name], test.runs[name]) for name in prompts]
    record_agreement(artifacts_dir, record_as, results)
    problems, rows = [], []
    for r in results:
        want = prompts[r.prompt][1]
        gen_bound, prompt_bound = bounds[r.prompt]
        shift = max_shift(fp32.prompt_logprobs[r.prompt], test.prompt_logprobs[r.prompt])
        right = test.runs[r.prompt].tokens == tuple(want)
        m = margins(fp32.runs[r.prompt])
        rows.append(
            f"{r.prompt}: FP32 margin min {min(m):.2f} median {statistics.median(m):.2f}; steps "
            "dlogp "
            f"{r.max_logprob_diff:.2e} (bound {gen_bound:.2e}), prompt rows dlogp {shift:.2e} "
            f"(bound {prompt_bound:.2e}), tokens {'agree' if r.passed else r.detail}, "
            f"answer {'right' if right else 'wrong'}"
        )
        if not r.passed:
            problems.append(f"{r.prompt}: {r.detail}")
        if not right and fp32.runs[r.prompt].tokens == tuple(want):
            problems.append(f"{r.prompt}: wrong answer (FP32 is right)")
        if r.max_logprob_diff > gen_bound:
            problems.append(
                f"{r.prompt}: generated-step logprobs moved {r.max_logprob_diff:.2e} > "
                f"{gen_bound:.2e}"
            )
        if shift > prompt_bound:
            problems.append(f"{r.prompt}: prompt logprobs moved {shift:.2e} > {prompt_bound:.2e}")
    text = f"{record_as}:\n" + "\n".join(rows) + "\n"
    # beside record_agreement's JSON
    (artifacts_dir / "agreement" / f"{record_as}-logprobs.txt").write_text(text)
    print("\n" + text)
    return problems


def margins(run) -> list[float]:
    return [
        a - b for a, b in (sorted(step.values(), reverse=True)[:2] for step in run.top_logprobs)
    ]


def test_fp32_model_is_confident_and_right(prompts, fp32_runs):
    rows, problems = [], []
    for name, (ids, want) in prompts.items():
        run, m = fp32_runs[name], margins(fp32_runs[name])
        right = sum(a == b for a, b in zip(run.tokens, want)) / len(want)
        confident = sum(x >= MIN_MARGIN for x in m) / len(m)
        rows.append(
            f"{name}: {len(ids)} tokens, margin min {min(m):.2f} median "
            f"{statistics.median(m):.2f}, "
            f"{confident:.0%} of steps >= {MIN_MARGIN}, answer {right:.0%} right"
        )
        if len(ids) <= 8192 and (confident < CONFIDENT_SHARE or right < MIN_ACCURACY):
            problems.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert not problems, "the long-context model is not confident or not right:\n" + "\n".join(
        problems
    )


def _register_kernels():
    from tilegate.harness.hf_attention import attention_function, paged_attention_function, register

    register()
    for defect in PLANTED:
        register(f"tilegate-{defect.value}", attention_function(defect=defect))
    register("tilegate-paged", paged_attention_function())
    for name, defects in PAGED_PLANTED.items():
        register(f"tilegate-paged-{name}", paged_attention_function(**defects))


DTYPES = pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])


def problems_of(
    attn: str, dtype, model_dir, prompts, fp32, logprob_bounds, artifacts_dir, record_as: str
) -> list[str]:
    """``attn`` (a registered kernel: ``tilegate-paged*`` runs as an extend over a cached prefix)
    judged against FP32 at ``dtype``'s bounds."""
    _register_kernels()
    test = run_side(model_dir, prompts, dtype, attn, cached=attn.startswith("tilegate-paged"))
    return judge(
        prompts,
        fp32,
        test,
        logprob_bounds[dtype],
        f"{record_as}-{'-'.join(prompts)}",
        artifacts_dir,
    )


@DTYPES
def test_kernel_agrees_with_fp32_and_answers_right(
    model_dir, prompts, fp32, logprob_bounds, dtype, artifacts_dir
):
    problems = problems_of(
        "tilegate",
        dtype,
        model_dir,
        prompts,
        fp32,
        logprob_bounds,
        artifacts_dir,
        f"hf-long-context-{str(dtype)[6:]}",
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("defect", PLANTED)
def test_planted_long_context_bug_fails(
    model_dir, prompts, fp32, logprob_bounds, defect, artifacts_dir
):
    problems = problems_of(
        f"tilegate-{defect.value}",
        torch.float16,
        model_dir,
        prompts,
        fp32,
        logprob_bounds,
        artifacts_dir,
        f"hf-long-context-{defect.value}-planted",
    )
    assert problems, (
        f"planted {defect}: every long prompt still agreed, within the logprob bounds, and "
        "answered right"
    )


@DTYPES
def test_paged_kernels_agree_with_fp32_and_answer_right(
    model_dir, prompts, fp32, logprob_bounds, dtype, artifacts_dir
):
    problems = problems_of(
        "tilegate-paged",
        dtype,
        model_dir,
        prompts,
        fp32,
        logprob_bounds,
        artifacts_dir,
        f"hf-long-context-paged-{str(dtype)[6:]}",
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("bug", sorted(PAGED_PLANTED))
def test_planted_paged_bug_fails(model_dir, prompts, fp32, logprob_bounds, bug, artifacts_dir):
    problems = problems_of(
        f"tilegate-paged-{bug}",
        torch.float16,
        model_dir,
        prompts,
        fp32,
        logprob_bounds,
        artifacts_dir,
        f"hf-long-context-paged-{bug}-planted",
    )
    assert problems, (
        f"planted {bug}: every long prompt still agreed, within the logprob bounds, and answered "
        "right"
    )
