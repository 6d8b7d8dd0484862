"""What the tilelang SGLang backend refuses, and why: each check raises
``UnsupportedByTileLangBackend`` naming the unsupported feature.

Refused at construction when the model runner tells, else at the first forward of the
offending layer or batch: MLA, cross attention / encoder-decoder / encoder-only, sliding
windows, logit soft-capping, head dims without a tile config, GQA ratios that do not divide,
speculative and other forward modes the kernels do not serve.
"""

from __future__ import annotations

from tilegate.kernels.problem import AttentionShape, ShapeError


class UnsupportedByTileLangBackend(ValueError):
    """The model or batch needs something tilegate's TileLang kernels do not implement."""


# Forward modes each entry point serves; speculative (TARGET_VERIFY, DRAFT_EXTEND*),
# diffusion-LM and split-prefill batches are refused.
SERVED_MODES = {"extend": ("EXTEND", "MIXED"), "decode": ("DECODE",)}


def check_head_config(
    *, q_heads: int, kv_heads: int, qk_head_dim: int, v_head_dim: int, where: str
) -> None:
    if qk_head_dim != v_head_dim:
        raise UnsupportedByTileLangBackend(
            f"{where}: qk_head_dim {qk_head_dim} != v_head_dim {v_head_dim} (MLA-style attention) "
            "is not "
            "supported by the tilelang backend"
        )
    try:
        AttentionShape(q_heads, kv_heads, qk_head_dim, True)  # the kernels' own limits, stated once
    except ShapeError as exc:
        raise UnsupportedByTileLangBackend(f"{where}: {exc}") from exc


def check_model_runner(model_runner) -> None:
    """Everything the model runner already tells about the attention we would serve."""
    mc = model_runner.model_config
    if getattr(model_runner, "use_mla_backend", False):
        raise UnsupportedByTileLangBackend(
            "the model uses MLA attention: not supported by the tilelang backend"
        )
    if getattr(mc, "is_encoder_decoder", False):
        raise UnsupportedByTileLangBackend(
            "encoder-decoder model (cross attention): not supported by the tilelang backend"
        )
    window = getattr(model_runner, "sliding_window_size", None)
    if window is not None and window > 0:
        raise UnsupportedByTileLangBackend(
            f"sliding-window attention (window {window}): not supported by the tilelang backend"
        )
    if getattr(model_runner, "is_hybrid_swa", False) or getattr(mc, "is_hybrid_swa", False):
        raise UnsupportedByTileLangBackend(
            "hybrid sliding-window model: not supported by the tilelang backend"
        )
    tp = getattr(model_runner, "tp_size", 1) or 1
    check_head_config(
        q_heads=max(1, mc.num_attention_heads // tp),
        kv_heads=mc.get_num_kv_heads(tp),
        qk_head_dim=mc.head_dim,
        v_head_dim=getattr(mc, "v_head_dim", None) or mc.head_dim,
        where="model",
    )


def check_layer(layer) -> None:
    where = f"layer {layer.layer_id}"
    if getattr(layer, "is_cross_attention", False):
        raise UnsupportedByTileLangBackend(
            f"{where}: cross attention is not supported by the tilelang backend"
        )
    attn_type = getattr(layer, "attn_type", None)
    if attn_type is not None and getattr(attn_type, "name", str(attn_type)) != "DECODER":
        raise UnsupportedByTileLangBackend(
            f"{where}: attention type {getattr(attn_type, 'name', attn_type)} is not supported "
            "(the tilelang backend serves causal decoder self-attention)"
        )
    window = getattr(layer, "sliding_window_size", None)
    if window is not None and window > -1:
        raise UnsupportedByTileLangBackend(
            f"{where}: sliding window {window} is not supported by the tilelang backend"
        )
    cap = getattr(layer, "logit_cap", 0) or 0
    if cap > 0:
        raise UnsupportedByTileLangBackend(f"{where}: logit soft-capping ({cap}) is not supported")
    check_head_config(
        q_heads=layer.tp_q_head_num,
        kv_heads=layer.tp_k_head_num,
        qk_head_dim=layer.qk_head_dim,
        v_head_dim=layer.v_head_dim,
        where=where,
    )


def check_forward_mode(forward_batch, kind: str) -> None:
    fm = forward_batch.forward_mode
    name = getattr(fm, "name", str(fm))
    if name not in SERVED_MODES[kind]:
        raise UnsupportedByTileLangBackend(
            f"forward mode {name} is not supported by the tilelang backend's {kind} "
            f"(serves {', '.join(SERVED_MODES[kind])})"
        )
    if getattr(forward_batch, "encoder_lens", None) is not None:
        raise UnsupportedByTileLangBackend(
            "batch carries encoder_lens (encoder-decoder): not supported"
        )
