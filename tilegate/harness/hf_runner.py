"""Greedy generation with Hugging Face transformers, with the top-k logprobs of every step."""

from __future__ import annotations

import torch

from tilegate.references.agreement import TOP_K, GreedyRun


def cache_keyword(model) -> str:
    """The keyword (and output field) through which ``model`` takes and returns its KV cache:
    ``cache`` in the transformers the gate runs (5.24: ``past_key_values`` is deprecated there, to
    go
    in 5.40), ``past_key_values`` in the one SGLang 0.5.23 pins (5.19), where this module also
    runs."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def prefilled_cache(model, ids: torch.Tensor, cached_prefix: int) -> dict:
    """The keyword argument handing ``model`` a KV cache that holds ``ids[:, :cached_prefix]``."""
    from transformers import DynamicCache

    cache = {cache_keyword(model): DynamicCache()}
    model(ids[:, :cached_prefix], use_cache=True, **cache)
    return cache


class HfRunner:
    """A model loaded once, used as a context manager so GPU memory is released on exit."""

    def __init__(self, path, dtype: torch.dtype, attn_implementation: str, device):
        from transformers import AutoModelForCausalLM

        self.device = device
        self.model = (
            AutoModelForCausalLM.from_pretrained(
                str(path), dtype=dtype, attn_implementation=attn_implementation
            )
            .to(device)
            .eval()
        )

    def __enter__(self) -> HfRunner:
        return self

    def __exit__(self, *exc) -> None:
        del self.model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @torch.inference_mode()
    def greedy(
        self, prompt_ids: list[int], max_new_tokens: int, k: int = TOP_K, cached_prefix: int = 0
    ) -> GreedyRun:
        """``cached_prefix``: run the prompt's first tokens alone first, so that the rest is an
        extend over their cached keys and values (as a serving engine's prefix cache does)."""
        ids = torch.tensor([prompt_ids], device=self.device)
        eos = self.model.generation_config.eos_token_id
        extra = prefilled_cache(self.model, ids, cached_prefix) if cached_prefix else {}
        out = self.model.generate(
            ids,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=eos,
            **extra,
        )
        tokens = out.sequences[0, ids.shape[1] :].tolist()
        tops = []
        for logits in out.logits:  # raw logits per step, before any logits processor
            logp = torch.log_softmax(logits[0].float(), dim=-1)
            vals, idx = logp.topk(k)
            tops.append(dict(zip(idx.tolist(), vals.tolist())))
        return GreedyRun(tuple(tokens), tuple(tops))

    @torch.inference_mode()
    def prompt_logprobs(
        self, prompt_ids: list[int], start: int, cached_prefix: int = 0
    ) -> tuple[float, ...]:
        """log p(prompt[i + 1] | prompt[:i + 1]) for i from ``start`` to the prompt's end, as a
        serving engine reports prompt logprobs. ``cached_prefix``: as in ``greedy``; the rows
        asked for must then be rows of the extend (``start >= cached_prefix``)."""
        if not 0 <= cached_prefix <= start < len(prompt_ids) - 1:
            raise ValueError(
                f"rows from {start} of a {len(prompt_ids)}-token prompt, {cached_prefix} cached"
            )
        ids = torch.tensor([prompt_ids], device=self.device)
        extra = prefilled_cache(self.model, ids, cached_prefix) if cached_prefix else {}
        logits = self.model(ids[:, cached_prefix:], use_cache=bool(cached_prefix), **extra).logits[
            0
        ]
        logp = logits[start - cached_prefix : -1].float().log_softmax(-1)
        return tuple(logp.gather(1, ids[0, start + 1 :, None])[:, 0].tolist())
