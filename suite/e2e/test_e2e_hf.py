"""End to end on any GPU without SGLang: Hugging Face Llama with the TileLang kernel as its
attention, in fp16 and bf16, against the same checkpoint in FP32 (transformers' sdpa)."""

import pytest
import torch
from suite_helpers import causal_builds

from tilegate.artifacts.writer import record_agreement
from tilegate.fixtures import prompts
from tilegate.fixtures.tiny_llama import TINY_LLAMA
from tilegate.fixtures.tiny_llama_train import corpus, ensure_trained_tiny_llama
from tilegate.gate.builds import phase_builds
from tilegate.gate.planted import PrefillDefect
from tilegate.harness.hf_runner import HfRunner
from tilegate.kernels.problem import AttentionShape
from tilegate.references.agreement import compare

HEADS = (TINY_LLAMA.heads, TINY_LLAMA.kv_heads, TINY_LLAMA.head_dim)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.xdist_group("e2e-hf"),
    causal_builds(*HEADS, "prefill"),
    pytest.mark.builds(
        *phase_builds(
            "prefill",
            AttentionShape(*HEADS, True, "float16"),
            defect=PrefillDefect.DROP_LAST_BLOCK,
        )
    ),
]
DEVICE = "cuda"
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def model_dir():
    return ensure_trained_tiny_llama()


@pytest.fixture(scope="module")
def prompt_ids(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    short = {p: tok(p)["input_ids"] for p in prompts.SHORT + prompts.MIXED}
    long = {
        f"corpus x{n} tokens": prompts.long_prompt_ids(tok, corpus(), n)
        for n in prompts.LONG_TOKENS
    }
    return short | long


@pytest.fixture(scope="module")
def fp32_runs(model_dir, prompt_ids):
    with HfRunner(model_dir, torch.float32, "sdpa", DEVICE) as ref:
        return {name: ref.greedy(ids, NEW_TOKENS) for name, ids in prompt_ids.items()}


def _agreements(model_dir, prompt_ids, fp32_runs, dtype, attn):
    from tilegate.harness.hf_attention import attention_function, register

    register()
    # the planted twin
    register("tilegate-drop_last_block", attention_function(defect=PrefillDefect.DROP_LAST_BLOCK))
    with HfRunner(model_dir, dtype, attn, DEVICE) as test:
        return [
            compare(name, fp32_runs[name], test.greedy(ids, NEW_TOKENS))
            for name, ids in prompt_ids.items()
        ]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_tilelang_attention_agrees_with_fp32(
    model_dir, prompt_ids, fp32_runs, dtype, artifacts_dir
):
    results = _agreements(model_dir, prompt_ids, fp32_runs, dtype, "tilegate")
    record_agreement(artifacts_dir, f"hf-tilegate-{str(dtype)[6:]}", results)
    assert max(len(ids) for ids in prompt_ids.values()) >= 3782
    failed = [r for r in results if not r.passed]
    assert not failed, "\n".join(f"{r.prompt}: {r.detail}" for r in failed)


def test_planted_attention_bug_is_reported(model_dir, prompt_ids, fp32_runs, artifacts_dir):
    # Dropping each prompt's last partial key block hides the newest tokens from attention.
    results = _agreements(
        model_dir, prompt_ids, fp32_runs, torch.float16, "tilegate-drop_last_block"
    )
    record_agreement(artifacts_dir, "hf-tilegate-drop_last_block-planted", results)
    assert any(not r.passed for r in results), (
        "the agreement metric passed a kernel that ignores recent tokens"
    )
