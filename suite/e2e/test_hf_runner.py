"""The transformers harness on the CPU: a prompt run as an extend over its own cached prefix
gives the greedy tokens and prompt logprobs of the plain run (what the long-context paged tests
rely on)."""

import pytest
import torch

from tilegate.fixtures import prompts
from tilegate.fixtures.tiny_llama_train import corpus, ensure_trained_tiny_llama
from tilegate.harness.hf_runner import HfRunner


def test_cached_prefix_extend_equals_plain_prefill():
    from transformers import AutoTokenizer

    model_dir = ensure_trained_tiny_llama()
    ids = prompts.long_prompt_ids(AutoTokenizer.from_pretrained(str(model_dir)), corpus(), 160)
    with HfRunner(model_dir, torch.float32, "sdpa", "cpu") as runner:
        plain, cached = runner.greedy(ids, 6), runner.greedy(ids, 6, cached_prefix=120)
        rows, rows_cached = (
            runner.prompt_logprobs(ids, 130),
            runner.prompt_logprobs(ids, 130, cached_prefix=120),
        )
        with pytest.raises(ValueError, match="rows from 110"):
            runner.prompt_logprobs(ids, 110, cached_prefix=120)  # a cached row has no logits
    assert len(rows) == len(ids) - 131 and rows == pytest.approx(rows_cached, abs=1e-4)
    assert plain.tokens == cached.tokens
    for step, token in enumerate(plain.tokens):
        assert cached.top_logprobs[step][token] == pytest.approx(
            plain.top_logprobs[step][token], abs=1e-4
        )


def test_fp32_reference_attention_matches_sdpa():
    """The long-context tier's FP32 side (query-chunked, so a 32k prompt fits in memory) is the
    same model as transformers' own sdpa: same tokens, logprobs within float32 rounding."""
    from transformers import AutoTokenizer

    from tilegate.references.transformers_attention import (
        REFERENCE_IMPLEMENTATION,
        reference_attention_function,
        register,
    )

    model_dir = ensure_trained_tiny_llama()
    ids = prompts.long_prompt_ids(AutoTokenizer.from_pretrained(str(model_dir)), corpus(), 160)
    with HfRunner(model_dir, torch.float32, "sdpa", "cpu") as runner:
        sdpa = runner.greedy(ids, 6)
    register(REFERENCE_IMPLEMENTATION, reference_attention_function())
    with HfRunner(model_dir, torch.float32, REFERENCE_IMPLEMENTATION, "cpu") as runner:
        ref = runner.greedy(ids, 6, cached_prefix=100)
    assert ref.tokens == sdpa.tokens
    for step, token in enumerate(sdpa.tokens):
        assert ref.top_logprobs[step][token] == pytest.approx(
            sdpa.top_logprobs[step][token], abs=1e-4
        )


def test_only_the_plain_causal_mask_is_accepted():
    from tilegate.references.transformers_attention import require_causal_mask

    rows = torch.arange(3)[:, None] + 2  # 3 new tokens after 2 cached ones
    causal = (torch.arange(5)[None, :] <= rows)[None, None]
    require_causal_mask(None, 3, 5)
    require_causal_mask(causal, 3, 5)
    require_causal_mask(torch.zeros(1, 1, 3, 5).masked_fill(~causal, float("-inf")), 3, 5)
    padded = causal.clone()
    padded[..., 0] = False  # a left-padded prompt: key 0 is padding
    with pytest.raises(ValueError, match="not the plain causal pattern"):
        require_causal_mask(padded, 3, 5)
    with pytest.raises(ValueError, match="expected"):
        require_causal_mask(causal, 3, 6)
