"""Host entry points for SGLang's paged attention: validate, pick a config, launch.

Arguments are SGLang's own tensors (see references/paged.py for the contract):
  q [tokens, q_heads, head_dim]; k_pool, v_pool [pool_tokens, kv_heads, head_dim];
  req_to_token [max_reqs, max_context]; req_pool_indices, seq_lens (, extend_lens) [batch].
Index tensors may be int64 (SGLang's) and are narrowed to the kernels' int32 after a range
check. q may be a strided view (SGLang's split of its fused qkv): it is copied to the dense layout
once; the pools must be dense. Nothing is padded, truncated or cast silently: a mismatch raises
ValueError.

The checks that need values (ranges, lengths) run once per batch in ``prepare_extend`` /
``prepare_decode`` (tilegate/serving/batch_indices.py, torch only), with one read back to the
host; ``extend_batch`` / ``decode_batch`` then launch for each layer without any (SGLang's
backend prepares in init_forward_metadata).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from tilegate.kernels.configs import DECODE_TABLES, EXTEND_TABLES, default_config
from tilegate.kernels.dtypes import dtype_name
from tilegate.kernels.hooks import CombineKnobs, ExtendKnobs
from tilegate.kernels.paged_decode import paged_decode_combine, paged_decode_split
from tilegate.kernels.paged_extend import paged_extend as paged_extend_factory
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import local_target
from tilegate.runtime import launch
from tilegate.serving.batch_indices import BatchIndices, prepare_decode, prepare_extend
from tilegate.serving.decode_schedule import compute_units, decode_splits, is_power_of_two


def _shape(q, k_pool, v_pool) -> AttentionShape:
    if (
        q.dim() != 3
        or k_pool.dim() != 3
        or k_pool.shape != v_pool.shape
        or q.shape[-1] != k_pool.shape[-1]
    ):
        raise ValueError(
            f"expected q [tokens, hq, d], pools [pool, hkv, d]; got {tuple(q.shape)}, "
            f"{tuple(k_pool.shape)}, {tuple(v_pool.shape)}"
        )
    dtype = dtype_name(q.dtype)
    if dtype is None or k_pool.dtype != q.dtype or v_pool.dtype != q.dtype:
        raise ValueError(
            f"q {q.dtype}, k_pool {k_pool.dtype}, v_pool {v_pool.dtype}: need one of fp16/bf16 for "
            "all"
        )
    for name, t in (("k_pool", k_pool), ("v_pool", v_pool)):
        if not t.is_contiguous():  # a copy here would be the whole pool, per layer and batch
            raise ValueError(f"{name} must be contiguous (SGLang's token pools are)")
    # ShapeError on bad heads/dims
    return AttentionShape(q.shape[1], k_pool.shape[1], q.shape[2], True, dtype)


def _dense(q: torch.Tensor) -> torch.Tensor:
    """q in the kernels' dense [tokens, heads, head_dim] layout. SGLang hands a view of its fused
    qkv projection (RoPE applied in place), whose rows are (q_heads + 2 kv_heads) * head_dim apart:
    one copy of the batch's queries, about 0.2% of a 32 x 1024-token prefill (docs/serving.md)."""
    return q if q.is_contiguous() else q.contiguous()


def _output(out: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    if out is None:
        return torch.empty_like(like)
    if (
        out.shape != like.shape
        or out.dtype != like.dtype
        or out.device != like.device
        or not out.is_contiguous()
    ):
        raise ValueError(
            f"out is {tuple(out.shape)} {out.dtype} on {out.device}, need a dense "
            f"{tuple(like.shape)} {like.dtype} on {like.device}"
        )
    return out


def extend_batch(
    meta: BatchIndices,
    q,
    k_pool,
    v_pool,
    scale=None,
    cfg=None,
    knobs: ExtendKnobs | None = None,
    out=None,
):
    """Paged extend over a prepared batch: no value is read back to the host. ``out`` (q's shape)
    may be given. ``knobs`` change the kernel's hooks (the gate's planted defects only)."""
    shape, q = _shape(q, k_pool, v_pool), _dense(q)
    if meta.extend_lens is None:
        raise ValueError("extend_batch needs a batch from prepare_extend")
    if q.shape[0] != meta.tokens:
        raise ValueError(f"q has {q.shape[0]} tokens, extend_lens add up to {meta.tokens}")
    cfg = cfg or default_config(local_target(), shape.head_dim, EXTEND_TABLES)
    out = _output(out, q)
    launch(
        paged_extend_factory,
        shape,
        cfg,
        q,
        k_pool,
        v_pool,
        meta.req_to_token,
        meta.req_pool_indices,
        meta.seq_lens,
        meta.extend_lens,
        meta.extend_starts,
        out,
        softmax_scale=scale,
        knobs=knobs,
    )
    return out


def decode_batch(
    meta: BatchIndices,
    q,
    k_pool,
    v_pool,
    scale=None,
    cfg=None,
    knobs: CombineKnobs | None = None,
    out=None,
    splits: int | None = None,
):
    """Paged decode over a prepared batch: no value is read back to the host (CUDA-graph safe).
    ``out`` (q's shape) may be given. ``splits``: the launch's split count, a power of two in
    1..cfg.num_splits (default: tilegate.serving.decode_schedule's choice for the batch size).
    ``knobs`` change the combine step's hook (the gate's planted defects only: the schedule then
    takes two splits at least, and one given split is refused)."""
    shape, q = _shape(q, k_pool, v_pool), _dense(q)
    if q.shape[0] != meta.batch:
        raise ValueError(f"q has {q.shape[0]} tokens for a decode batch of {meta.batch} requests")
    cfg = cfg or default_config(local_target(), shape.head_dim, DECODE_TABLES)
    out = _output(out, q)  # checked before the first launch
    batch, heads, dim = q.shape
    planted = knobs is not None and not knobs.healthy
    if splits is None:
        splits = decode_splits(batch, shape.kv_heads, cfg, compute_units(q.device.index or 0))
        if planted:  # a planted combine defect needs the combine to run
            splits = max(splits, 2)
    if not (1 <= splits <= cfg.num_splits and is_power_of_two(splits)):
        raise ValueError(
            f"splits {splits}: need a power of two in 1..{cfg.num_splits} "
            f"(decode config {cfg.name})"
        )
    if planted and splits == 1:
        raise ValueError(f"the planted {knobs} is in the combine, which one split skips")
    o_part = torch.empty(batch, heads, splits, dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, heads, splits, dtype=torch.float32, device=q.device)
    launch(
        paged_decode_split,
        shape,
        cfg,
        q,
        k_pool,
        v_pool,
        meta.req_to_token,
        meta.req_pool_indices,
        meta.seq_lens,
        o_part,
        lse,
        out,
        softmax_scale=scale,
    )
    if splits > 1:  # the combine is built for the launch's split count
        launch(
            paged_decode_combine, shape, replace(cfg, num_splits=splits), o_part, lse, out,
            knobs=knobs,
        )  # fmt: skip
    return out


def paged_extend(
    q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens, scale=None, cfg=None
):
    meta = prepare_extend(req_to_token, req_pool_indices, seq_lens, extend_lens, q.device)
    return extend_batch(meta, q, k_pool, v_pool, scale, cfg)


def paged_decode(
    q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale=None, cfg=None, splits=None
):
    meta = prepare_decode(req_to_token, req_pool_indices, seq_lens, q.device)
    return decode_batch(meta, q, k_pool, v_pool, scale, cfg, splits=splits)
