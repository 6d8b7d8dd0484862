"""The TileLang prefill kernel as a Hugging Face transformers attention implementation.

Registered under ``attn_implementation="tilegate"``. transformers hands query [b, hq, sq, d]
and the whole cached key/value [b, hkv, sk, d]; the new queries are the last sq positions, so
causal attention is the kernel's bottom-right alignment. Padding masks are not supported: run
one prompt per batch (a padded batch raises instead of attending to padding). A mask that is just
that causal pattern (transformers builds one for an extend over cached keys) is accepted.
"""

from __future__ import annotations

import math

from tilegate.gate.planted import CombineDefect, ExtendDefect, PrefillDefect, knobs_for
from tilegate.kernels.configs import default_config
from tilegate.kernels.dtypes import dtype_name
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import local_target
from tilegate.references.transformers_attention import register as register_attention
from tilegate.references.transformers_attention import require_causal_mask
from tilegate.runtime import flash_attention

ATTN_IMPLEMENTATION = "tilegate"


def attention_function(defect: PrefillDefect | None = None):
    """transformers' attention signature over the kernel. ``defect`` builds the kernel with a
    planted bug (a PrefillDefect): the gate's sensitivity tests register such twins."""

    def tilegate_attention(
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
            raise ValueError("tilegate attention has no dropout")
        head_dim = query.shape[-1]
        if scaling is not None and not math.isclose(scaling, head_dim**-0.5, rel_tol=1e-6):
            raise ValueError(
                f"softmax scale {scaling} is not head_dim^-1/2, the only one the prefill kernel has"
            )
        dtype = dtype_name(query.dtype)
        if dtype is None:
            raise ValueError(f"tilegate attention runs fp16/bf16 models, got {query.dtype}")
        shape = AttentionShape(query.shape[1], key.shape[1], head_dim, True, dtype)
        cfg = default_config(local_target(), head_dim)
        q, k, v = (t.transpose(1, 2).contiguous() for t in (query, key, value))  # -> [b, s, h, d]
        return flash_attention(shape, cfg, q, k, v, knobs=knobs_for(defect, PrefillDefect)), None

    return tilegate_attention


def paged_attention_function(
    extend_defect: ExtendDefect | None = None, combine_defect: CombineDefect | None = None
):
    """transformers' attention signature over SGLang's paged kernels: the cached keys and values
    become a one-request token pool (req_to_token = 0..seq_k-1), prompts and cached-prefix
    extends run the paged extend kernel, single-token steps the split-KV decode. Batch 1 only.
    The defects plant an ExtendDefect in paged_extend and a CombineDefect in the combine step."""
    import torch

    extend_knobs = knobs_for(extend_defect, ExtendDefect, "paged_extend")
    combine_knobs = knobs_for(combine_defect, CombineDefect, "paged_decode_combine")

    from tilegate.serving import paged

    def tilegate_paged_attention(
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
        if dropout or query.shape[0] != 1:
            raise ValueError("tilegate-paged attention takes one prompt (batch 1), no dropout")
        seq_q, seq_k = query.shape[2], key.shape[2]
        q = query[0].transpose(0, 1).contiguous()  # [seq_q, hq, d]
        # [seq_k, hkv, d]
        k_pool, v_pool = (t[0].transpose(0, 1).contiguous() for t in (key, value))
        dev = q.device
        r2t = torch.arange(seq_k, device=dev, dtype=torch.int32)[None]
        req, lens = (
            torch.zeros(1, dtype=torch.int32, device=dev),
            torch.tensor([seq_k], dtype=torch.int32, device=dev),
        )
        if seq_q == 1:
            meta = paged.prepare_decode(r2t, req, lens, dev)
            out = paged.decode_batch(meta, q, k_pool, v_pool, scaling, knobs=combine_knobs)
        else:
            new = torch.tensor([seq_q], dtype=torch.int32, device=dev)
            meta = paged.prepare_extend(r2t, req, lens, new, dev)
            out = paged.extend_batch(meta, q, k_pool, v_pool, scaling, knobs=extend_knobs)
        return out[None], None  # [1, seq_q, hq, d]

    return tilegate_paged_attention


def register(name: str = ATTN_IMPLEMENTATION, function=None) -> str:
    """Register ``function`` (default: the kernel) with transformers under ``name``."""
    return register_attention(name, function or attention_function())
