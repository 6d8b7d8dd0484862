"""The transformers harness on the CPU: a prompt run as an extend over its own cached prefix gives
the greedy tokens of the plain run (what the long-context paged tests rely on)."""

import pytest
import torch

from tilegate.fixtures import prompts
from tilegate.fixtures.tiny_llama_train import corpus, ensure_trained_tiny_llama
from tilegate.harness.hf_runner import HfRunner


@pytest.mark.e2e
def test_cached_prefix_extend_equals_plain_prefill():
    from transformers import AutoTokenizer

    model_dir = ensure_trained_tiny_llama()
    ids = prompts.long_prompt_ids(AutoTokenizer.from_pretrained(str(model_dir)), corpus(), 160)
    with HfRunner(model_dir, torch.float32, "sdpa", "cpu") as runner:
        plain, cached = runner.greedy(ids, 6), runner.greedy(ids, 6, cached_prefix=120)
    assert plain.tokens == cached.tokens
    for step, token in enumerate(plain.tokens):
        assert cached.top_logprobs[step][token] == pytest.approx(plain.top_logprobs[step][token], abs=1e-4)
