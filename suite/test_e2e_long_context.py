"""End to end at long context, on any GPU: the long-context tiny Llama-3
(fixtures/long_context_llama.py) must copy back a span planted in the middle of 3782-, 8192- and
32768-token prompts. With the TileLang kernel as its attention, in fp16 and bf16, it must agree with
the same checkpoint in FP32 (transformers' sdpa) and give the right answer; kernels built with a
planted long-context bug must fail the same comparison. Both sides get the same token ids.
"""

import statistics

import pytest
import torch

from tilegate.fixtures.long_context_llama import ensure_long_context_llama, retrieval_prompt
from tilegate.harness.hf_runner import HfRunner
from tilegate.references.agreement import compare
from tilegate.report import record_agreement

pytestmark = [pytest.mark.gpu, pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("e2e-long-context")]
DEVICE = "cuda"
LENGTHS = (3782, 8192, 32768)
SEED = 7  # held out: training draws its prompts from other seeds
# issue 12's targets for the FP32 model at 3782 and 8192 tokens
MIN_MARGIN, CONFIDENT_SHARE, MIN_ACCURACY = 1.0, 0.9, 0.95
# planted kernel bugs (flash_fwd's DEFECTS) the comparison must catch
PLANTED = ("skip_middle_block", "wrong_scale_10pct")
# ... and in SGLang's paged kernels, run under transformers as a one-request pool
# (tilegate.serving.hf_attention.paged_attention_function): each prompt's last CACHED tokens are an
# extend over the cached rest, as after a prefix-cache hit, and every generated token is a decode
PAGED_PLANTED = {"prefix_off_by_one": {"extend_defect": "prefix_off_by_one"},
                 "drop_smallest_split": {"combine_defect": "drop_smallest_split"}}
CACHED = 64


@pytest.fixture(scope="module")
def model_dir():
    return ensure_long_context_llama()


SPAN_LEN, PREFIX = 24, 4  # retrieval_prompt's defaults: the span, and how much of it the query repeats


def straddling_span_at(n_tokens: int) -> float:
    """Where the span sits so that it straddles the middle key block of both 64- and 32-key tiles
    (the default configs of sm90 and gfx942), for the prompt and for every decode step after it:
    a kernel that skips its middle key block loses part of the span."""
    middle_64 = -(-n_tokens // 64) // 2 * 64  # first key of the middle 64-key block
    first = middle_64 - SPAN_LEN // 2  # also inside the 32-key block just before it
    body_len = n_tokens - 2 - PREFIX
    return (first - 2) / (body_len - SPAN_LEN - 2)  # inverts retrieval_prompt's placement


@pytest.fixture(scope="module")
def prompts(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    out = {}
    for n in LENGTHS:
        ids, want = retrieval_prompt(tok, n, SEED, span_at=straddling_span_at(n), span_len=SPAN_LEN, prefix=PREFIX)
        first = -(-n // 64) // 2 * 64 - SPAN_LEN // 2
        assert ids[first + PREFIX:first + SPAN_LEN] == want, "the span is not where the planted bug looks"
        out[f"retrieval-{n}"] = (ids, want)
    return out


@pytest.fixture(scope="module")
def fp32_runs(model_dir, prompts):
    with HfRunner(model_dir, torch.float32, "sdpa", DEVICE) as ref:
        return {name: ref.greedy(ids, len(want)) for name, (ids, want) in prompts.items()}


def margins(run) -> list[float]:
    return [a - b for a, b in (sorted(step.values(), reverse=True)[:2] for step in run.top_logprobs)]


def test_fp32_model_is_confident_and_right(prompts, fp32_runs):
    rows, problems = [], []
    for name, (ids, want) in prompts.items():
        run, m = fp32_runs[name], margins(fp32_runs[name])
        right = sum(a == b for a, b in zip(run.tokens, want)) / len(want)
        confident = sum(x >= MIN_MARGIN for x in m) / len(m)
        rows.append(f"{name}: {len(ids)} tokens, margin min {min(m):.2f} median {statistics.median(m):.2f}, "
                    f"{confident:.0%} of steps >= {MIN_MARGIN}, answer {right:.0%} right")
        if len(ids) <= 8192 and (confident < CONFIDENT_SHARE or right < MIN_ACCURACY):
            problems.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert not problems, "the long-context model is not confident or not right:\n" + "\n".join(problems)


def _agreements(model_dir, prompts, fp32_runs, dtype, attn):
    from tilegate.serving.hf_attention import attention_function, register

    register()
    for defect in PLANTED:
        register(f"tilegate-{defect}", attention_function(defect=defect))
    with HfRunner(model_dir, dtype, attn, DEVICE) as test:
        runs = {name: test.greedy(ids, len(want)) for name, (ids, want) in prompts.items()}
    results = [compare(name, fp32_runs[name], runs[name]) for name in prompts]
    right = {name: runs[name].tokens == tuple(want) for name, (_, want) in prompts.items()}
    return results, right


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_kernel_agrees_with_fp32_and_answers_right(model_dir, prompts, fp32_runs, dtype, artifacts_dir):
    results, right = _agreements(model_dir, prompts, fp32_runs, dtype, "tilegate")
    record_agreement(artifacts_dir, f"hf-long-context-{str(dtype)[6:]}", results)
    failed = [f"{r.prompt}: {r.detail}" for r in results if not r.passed]
    fp32_right = {name: fp32_runs[name].tokens == tuple(want) for name, (_, want) in prompts.items()}
    failed += [f"{name}: wrong answer (FP32 is right)" for name, ok in right.items() if not ok and fp32_right[name]]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("defect", PLANTED)
def test_planted_long_context_bug_fails(model_dir, prompts, fp32_runs, defect, artifacts_dir):
    results, right = _agreements(model_dir, prompts, fp32_runs, torch.float16, f"tilegate-{defect}")
    record_agreement(artifacts_dir, f"hf-long-context-{defect}-planted", results)
    caught = [r.prompt for r in results if not r.passed or not right[r.prompt]]
    assert caught, f"planted {defect}: every long prompt still agreed and answered right"


def _paged_runs(model_dir, prompts, dtype, attn):
    from tilegate.serving.hf_attention import paged_attention_function, register

    register("tilegate-paged", paged_attention_function())
    for name, defects in PAGED_PLANTED.items():
        register(f"tilegate-paged-{name}", paged_attention_function(**defects))
    with HfRunner(model_dir, dtype, attn, DEVICE) as test:
        return {name: test.greedy(ids, len(want), cached_prefix=len(ids) - CACHED) for name, (ids, want) in prompts.items()}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_paged_kernels_agree_with_fp32_and_answer_right(model_dir, prompts, fp32_runs, dtype, artifacts_dir):
    runs = _paged_runs(model_dir, prompts, dtype, "tilegate-paged")
    results = [compare(name, fp32_runs[name], runs[name]) for name in prompts]
    record_agreement(artifacts_dir, f"hf-long-context-paged-{str(dtype)[6:]}", results)
    failed = [f"{r.prompt}: {r.detail}" for r in results if not r.passed]
    failed += [f"{name}: wrong answer (FP32 is right)" for name, (_, want) in prompts.items()
               if runs[name].tokens != tuple(want) and fp32_runs[name].tokens == tuple(want)]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("bug", sorted(PAGED_PLANTED))
def test_planted_paged_bug_fails(model_dir, prompts, fp32_runs, bug, artifacts_dir):
    runs = _paged_runs(model_dir, prompts, torch.float16, f"tilegate-paged-{bug}")
    results = [compare(name, fp32_runs[name], runs[name]) for name in prompts]
    record_agreement(artifacts_dir, f"hf-long-context-paged-{bug}-planted", results)
    caught = [name for name, (_, want) in prompts.items()
              if not next(r for r in results if r.prompt == name).passed or runs[name].tokens != tuple(want)]
    assert caught, f"planted {bug}: every long prompt still agreed and answered right"
