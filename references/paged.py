"""FP32 references for SGLang's paged attention contract (extend and decode).

SGLang keeps K and V for every layer in token pools and addresses them per request:
  k_pool, v_pool   [pool_tokens, kv_heads, head_dim]
  req_to_token     [max_reqs, max_context] int: pool slot of each request's token position
  req_pool_indices [batch] int: the row of req_to_token that belongs to each request
  seq_lens         [batch] int: tokens in each request's context, new tokens included
The new tokens' K/V are already in the pool when attention runs (SGLang's backends write
them with set_kv_buffer first). Causal masks align bottom-right: a request's extend tokens
are its last extend_len positions.
"""

from __future__ import annotations

import torch

from tilegate.references.attention import ref_attention, ref_attention_lowp


def _context(pool: torch.Tensor, req_to_token: torch.Tensor, req: int, length: int) -> torch.Tensor:
    slots = req_to_token[req, :length].long()
    return pool[slots]  # [length, kv_heads, head_dim]


def ref_paged_extend(
    q,
    k_pool,
    v_pool,
    req_to_token,
    req_pool_indices,
    seq_lens,
    extend_lens,
    *,
    scale: float | None = None,
    causal: bool = True,
    precision=torch.float32,
) -> torch.Tensor:
    """q: [sum(extend_lens), q_heads, head_dim], requests' new tokens back to back.
    Request i's extend_lens[i] queries sit at context positions seq_lens[i] - extend_lens[i] ..
    seq_lens[i] - 1 and see its first seq_lens[i] pool tokens (causal). Returns [tokens, q_heads,
    head_dim] in ``precision``."""

    def attend(qi, k, v):
        return ref_attention(qi, k, v, causal=causal, scale=scale, precision=precision)

    return _per_request(
        attend, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens
    )


def baseline_paged_extend(
    q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens
) -> torch.Tensor:
    """The same in q's own low precision (causal, default scale): the numerics tier's baseline."""

    def attend(qi, k, v):
        return ref_attention_lowp(qi, k, v, causal=True)

    return _per_request(
        attend, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens
    )


def _per_request(attend, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens):
    out, start = [], 0
    for i in range(len(seq_lens)):
        n_ctx, n_new = int(seq_lens[i]), int(extend_lens[i])
        if not 0 < n_new <= n_ctx:
            raise ValueError(f"request {i}: need 0 < extend_len ({n_new}) <= seq_len ({n_ctx})")
        req = int(req_pool_indices[i])
        k = _context(k_pool, req_to_token, req, n_ctx)[None]
        v = _context(v_pool, req_to_token, req, n_ctx)[None]
        out.append(attend(q[None, start : start + n_new], k, v)[0])
        start += n_new
    if start != q.shape[0]:
        raise ValueError(f"q has {q.shape[0]} tokens, extend_lens add up to {start}")
    return torch.cat(out)


def ref_paged_decode(
    q,
    k_pool,
    v_pool,
    req_to_token,
    req_pool_indices,
    seq_lens,
    *,
    scale: float | None = None,
    precision=torch.float32,
) -> torch.Tensor:
    """q: [batch, q_heads, head_dim], one new token per request, at its last context position.
    Returns [batch, q_heads, head_dim] in ``precision``."""
    ones = torch.ones_like(torch.as_tensor(seq_lens))
    return ref_paged_extend(
        q,
        k_pool,
        v_pool,
        req_to_token,
        req_pool_indices,
        seq_lens,
        ones,
        scale=scale,
        causal=True,
        precision=precision,
    )
