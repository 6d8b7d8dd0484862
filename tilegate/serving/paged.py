"""Host entry points for SGLang's paged attention: validate, pick a config, launch.

Arguments are SGLang's own tensors (see references/paged.py for the contract):
  q [tokens, q_heads, head_dim]; k_pool, v_pool [pool_tokens, kv_heads, head_dim];
  req_to_token [max_reqs, max_context]; req_pool_indices, seq_lens (, extend_lens) [batch].
Index tensors may be int64 (SGLang's) and are narrowed to the kernels' int32 after a range
check. Nothing is padded, truncated or cast silently: a mismatch raises ValueError.
"""

from __future__ import annotations

import torch

from tilegate.kernels.configs import DECODE_TABLES, EXTEND_TABLES, default_config
from tilegate.kernels.paged_decode import paged_decode_combine, paged_decode_split
from tilegate.kernels.paged_extend import paged_extend as paged_extend_factory
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import local_target
from tilegate.references.dtypes import dtype_name
from tilegate.runtime import launch

INT32_MAX = 2**31 - 1


def _shape(q, k_pool, v_pool) -> AttentionShape:
    if q.dim() != 3 or k_pool.dim() != 3 or k_pool.shape != v_pool.shape or q.shape[-1] != k_pool.shape[-1]:
        raise ValueError(f"expected q [tokens, hq, d], pools [pool, hkv, d]; got {tuple(q.shape)}, "
                         f"{tuple(k_pool.shape)}, {tuple(v_pool.shape)}")
    dtype = dtype_name(q.dtype)
    if dtype is None or k_pool.dtype != q.dtype or v_pool.dtype != q.dtype:
        raise ValueError(f"q {q.dtype}, k_pool {k_pool.dtype}, v_pool {v_pool.dtype}: need one of fp16/bf16 for all")
    for name, t in (("q", q), ("k_pool", k_pool), ("v_pool", v_pool)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    return AttentionShape(q.shape[1], k_pool.shape[1], q.shape[2], True, dtype)  # ShapeError on bad heads/dims


def _index(name: str, t, device) -> torch.Tensor:
    t = torch.as_tensor(t, device=device)
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be an integer tensor, got {t.dtype}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) > INT32_MAX):
        raise ValueError(f"{name} holds values outside 0..2^31-1")
    return t.to(torch.int32).contiguous()


def _check_lengths(seq_lens, req_pool_indices, req_to_token, batch: int) -> None:
    if seq_lens.shape != (batch,) or req_pool_indices.shape != (batch,):
        raise ValueError(f"seq_lens {tuple(seq_lens.shape)} and req_pool_indices {tuple(req_pool_indices.shape)} must be [{batch}]")
    if batch and int(seq_lens.min()) < 1:
        raise ValueError("every request needs seq_len >= 1")
    if batch and int(seq_lens.max()) > req_to_token.shape[1]:
        raise ValueError(f"seq_len {int(seq_lens.max())} > req_to_token's {req_to_token.shape[1]} columns")
    if batch and int(req_pool_indices.max()) >= req_to_token.shape[0]:
        raise ValueError(f"req_pool_indices reach {int(req_pool_indices.max())}, req_to_token has {req_to_token.shape[0]} rows")


def paged_extend(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens, scale=None, cfg=None):
    shape = _shape(q, k_pool, v_pool)
    dev = q.device
    r2t = _index("req_to_token", req_to_token, dev)
    req, lens, new = (_index(n, t, dev) for n, t in (("req_pool_indices", req_pool_indices),
                                                      ("seq_lens", seq_lens), ("extend_lens", extend_lens)))
    _check_lengths(lens, req, r2t, new.shape[0])
    if int((new < 1).sum()) or int((new > lens).sum()):
        raise ValueError("every request needs 1 <= extend_len <= seq_len")
    if int(new.sum()) != q.shape[0]:
        raise ValueError(f"q has {q.shape[0]} tokens, extend_lens add up to {int(new.sum())}")
    starts = (torch.cumsum(new, 0) - new).to(torch.int32)
    cfg = cfg or default_config(local_target(), shape.head_dim, EXTEND_TABLES)
    out = torch.empty_like(q)
    launch(paged_extend_factory, shape, cfg, q, k_pool, v_pool, r2t, req, lens, new, starts, out, softmax_scale=scale)
    return out


def paged_decode(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale=None, cfg=None):
    shape = _shape(q, k_pool, v_pool)
    dev = q.device
    r2t = _index("req_to_token", req_to_token, dev)
    req, lens = _index("req_pool_indices", req_pool_indices, dev), _index("seq_lens", seq_lens, dev)
    _check_lengths(lens, req, r2t, q.shape[0])
    cfg = cfg or default_config(local_target(), shape.head_dim, DECODE_TABLES)
    batch, heads, dim = q.shape
    o_part = torch.empty(batch, heads, cfg.num_splits, dim, dtype=torch.float32, device=dev)
    lse = torch.empty(batch, heads, cfg.num_splits, dtype=torch.float32, device=dev)
    launch(paged_decode_split, shape, cfg, q, k_pool, v_pool, r2t, req, lens, o_part, lse, softmax_scale=scale)
    out = torch.empty_like(q)
    launch(paged_decode_combine, shape, cfg, o_part, lse, out)
    return out
