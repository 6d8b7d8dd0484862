"""The gate's torch references as Hugging Face transformers attention implementations, and the
registration every transformers-side run uses. Torch and transformers only (no TileLang): SGLang's
CPU venv runs them too.

transformers hands query [b, hq, sq, d] and the whole cached key/value [b, hkv, sk, d]; the new
queries are the last sq positions, so causal attention is bottom-right aligned, as in the kernels.
"""

from __future__ import annotations

import math

import torch

from tilegate.references.attention import ref_attention, ref_attention_lowp

REFERENCE_IMPLEMENTATION = "tilegate-fp32"
LOWP_REFERENCE_IMPLEMENTATION = "tilegate-lowp"


def require_causal_mask(mask, seq_q: int, seq_k: int) -> None:
    """Raise unless ``mask`` is None or exactly the bottom-right causal pattern that the kernels
    apply themselves: boolean (True attends) or additive (0 attends), [b, 1, seq_q, seq_k]."""
    if mask is None:
        return
    if mask.dim() != 4 or tuple(mask.shape[-2:]) != (seq_q, seq_k):
        raise ValueError(
            f"attention mask of shape {tuple(mask.shape)}: expected [b, 1, {seq_q}, {seq_k}]"
        )
    attends = mask if mask.dtype == torch.bool else mask == 0
    rows = torch.arange(seq_q, device=mask.device)[:, None] + (seq_k - seq_q)
    causal = torch.arange(seq_k, device=mask.device)[None, :] <= rows
    if not bool((attends == causal).all()):
        raise ValueError(
            "attention mask is not the plain causal pattern (padding?): run one unpadded prompt "
            "per batch"
        )


def _torch_attention_function(attend):
    """transformers' attention signature over a torch reference ``attend(q, k, v, scale)`` taking
    and returning the kernels' layout [b, s, h, d]; causal only, no padding."""

    def torch_attention(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0,
        scaling=None,
        is_causal=None,
        **kwargs,
    ):
        require_causal_mask(attention_mask, query.shape[2], key.shape[2])
        if dropout:
            raise ValueError("the reference attention has no dropout")
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # -> [b, s, h, d]
        return attend(q, k, v, scaling).to(query.dtype), None

    return torch_attention


def reference_attention_function():
    """The FP32 reference (query rows in chunks), in the model's own float32/float64.
    transformers' own "sdpa" in float32 falls back to the math kernel for GQA and builds the whole
    score matrix: 32 GiB for one layer of a 32768-token prompt with 8 heads."""
    return _torch_attention_function(
        lambda q, k, v, scale: ref_attention(q, k, v, causal=True, scale=scale, precision=q.dtype)
    )


def lowp_attention_function():
    """Plain attention in the model's fp16/bf16 (matmuls and softmax in that dtype): the baseline
    the long-context tier scales its logprob bounds from, as the numerics tier does its error
    bounds."""

    def attend(q, k, v, scale):
        if scale is not None and not math.isclose(scale, q.shape[-1] ** -0.5, rel_tol=1e-6):
            raise ValueError(
                f"softmax scale {scale} is not head_dim^-1/2, the only one ref_attention_lowp has"
            )
        return ref_attention_lowp(q, k, v, causal=True)

    return _torch_attention_function(attend)


def register(name: str, function) -> str:
    """Register ``function`` (transformers' attention signature) with transformers under
    ``name``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(name, function)
    # sdpa's mask builder returns None for an unpadded causal batch (the functions here and the
    # kernels take none) and the plain causal mask for an extend over cached keys
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
    return name
