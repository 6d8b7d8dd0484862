"""The FP32 reference inside the SGLang child: Hugging Face transformers in float32 on the same
token ids the engines get (tilegate.harness.sglang.serve.Request), greedy with each step's top-k,
plus prompt logprobs from each request's ``logprob_start``."""

from __future__ import annotations

from tilegate.harness.sglang.serve import Request


def fp32_reference(
    model: str, rounds: list[list[Request]], top_k: int, device: str, attention: str = "sdpa"
) -> list:
    """Per round and request: {"tokens", "top"[, "prompt_logprobs"]}. ``attention`` "chunked":
    the gate's FP32 reference attention (tilegate.references.transformers_attention), query rows
    in chunks, for long prompts: transformers' sdpa in float32 builds the whole score matrix for
    GQA."""
    import torch

    from tilegate.harness.hf_runner import HfRunner

    if attention == "chunked":
        from tilegate.references.transformers_attention import (
            REFERENCE_IMPLEMENTATION,
            reference_attention_function,
            register,
        )

        attention = register(REFERENCE_IMPLEMENTATION, reference_attention_function())
    out = []
    with HfRunner(model, torch.float32, attention, device) as ref:
        for requests in rounds:
            records = []
            for r in requests:
                run = ref.greedy(r.ids, r.max_new_tokens, top_k)
                record: dict = {
                    "tokens": list(run.tokens),
                    "top": [
                        sorted(([t, lp] for t, lp in s.items()), key=lambda x: -x[1])
                        for s in run.top_logprobs
                    ],
                }
                if r.logprob_start is not None:
                    record["prompt_logprobs"] = list(ref.prompt_logprobs(r.ids, r.logprob_start))
                records.append(record)
            out.append(records)
    return out
