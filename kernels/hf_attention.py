"""The TileLang prefill kernel as a Hugging Face transformers attention implementation.

Registered under ``attn_implementation="tilegate"`` (and one name per planted defect, for
the gate's sensitivity tests). transformers hands query [b, hq, sq, d] and the whole cached
key/value [b, hkv, sk, d]; the new queries are the last sq positions, so causal attention
is the kernel's bottom-right alignment. Padding masks are not supported: run one prompt
per batch (a padded batch raises instead of attending to padding).
"""

from __future__ import annotations

import math

from tilegate.kernels.configs import CONFIG_TABLES
from tilegate.kernels.problem import AttentionShape

from tilegate.platform import detect
from tilegate.runtime import flash_attention

ATTN_IMPLEMENTATION = "tilegate"
_REVERSE_DTYPES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16"}


def _attention(defect: str | None):
    def tilegate_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                           is_causal=None, **kwargs):
        if attention_mask is not None:
            raise ValueError("tilegate attention takes no padding mask: run one unpadded prompt per batch")
        if dropout:
            raise ValueError("tilegate attention has no dropout")
        head_dim = query.shape[-1]
        if scaling is not None and not math.isclose(scaling, head_dim**-0.5, rel_tol=1e-6):
            raise ValueError(f"softmax scale {scaling} is not head_dim^-1/2, the only one the prefill kernel has")
        dtype = _REVERSE_DTYPES.get(str(query.dtype))
        if dtype is None:
            raise ValueError(f"tilegate attention runs fp16/bf16 models, got {query.dtype}")
        shape = AttentionShape(query.shape[1], key.shape[1], head_dim, True, dtype)
        cfg = CONFIG_TABLES[detect().config_target][head_dim][0]
        q, k, v = (t.transpose(1, 2).contiguous() for t in (query, key, value))  # -> [b, s, h, d]
        return flash_attention(shape, cfg, q, k, v, defect=defect), None

    return tilegate_attention


def register(defects=("wrong_scale", "causal_off_by_one", "drop_last_block")) -> list[str]:
    """Register "tilegate" (and "tilegate-<defect>") with transformers; returns the names."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    names = {ATTN_IMPLEMENTATION: None} | {f"{ATTN_IMPLEMENTATION}-{d}": d for d in defects}
    for name, defect in names.items():
        AttentionInterface.register(name, _attention(defect))
        # sdpa's mask builder returns None for an unpadded causal batch, which the kernel needs
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
    return list(names)
