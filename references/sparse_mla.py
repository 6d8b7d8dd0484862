"""Sparse MLA decode attention (DeepSeek's DSA / V4), in FP32 and in plain same-precision torch.

Each query token attends to the ``topk`` KV rows its ``indices`` row names; an index < 0 (and, with
``topk_length``, a slot at or past the token's length) is unused. Keys are whole KV rows (the
512-wide latent and the 64-wide rope part), values their first ``d_v`` columns, one KV head shared
by every query head (MQA). A slot counts once per occurrence: a repeated index weighs double, as
the selected-slot softmax of every sparse-MLA kernel does. A token with no used slot outputs 0.
With ``sink`` (per head), the softmax has one more logit whose value is 0 (DeepSeek-V4's attention
sink): the output is scaled by 1 / (1 + exp(sink - lse)).

Unused slots never reach the result: their keys and values are replaced by 0 before any product,
so a NaN in a row no used slot names (KV[0] included) cannot either.
"""

from __future__ import annotations

import torch

CHUNK = 256  # query tokens per step: 256 x 2048 gathered rows x 576 fp32 is 1.2 GB


def used_slots(indices: torch.Tensor, topk_length: torch.Tensor | None = None) -> torch.Tensor:
    """[tokens, topk] bool. ``topk_length``: one length per token (or one for all)."""
    used = indices >= 0
    if topk_length is not None:
        position = torch.arange(indices.shape[-1], device=indices.device)
        used &= position < topk_length.reshape(-1, 1).to(indices.device)
    return used


def _attend(
    q, kv, indices, used, sm_scale: float, d_v: int, sink, operand: torch.dtype, p_round
) -> torch.Tensor:
    gathered = kv[indices.clamp(min=0).long()]  # [t, topk, d_qk]
    gathered = torch.where(
        used[..., None], gathered, torch.zeros((), dtype=kv.dtype, device=kv.device)
    )
    scores = torch.einsum("thd,tkd->thk", q.to(operand), gathered.to(operand)).float() * sm_scale
    scores = scores.masked_fill(~used[:, None, :], float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True)
    if sink is not None:
        peak = torch.maximum(peak, sink.float().reshape(1, -1, 1))
    # a token with no used slot
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    # unnormalised, in [0, 1]: what a flash-style kernel multiplies V by
    p = torch.exp(scores - peak)
    denom = p.sum(dim=-1, keepdim=True)
    if sink is not None:
        denom = denom + torch.exp(sink.float().reshape(1, -1, 1) - peak)
    out = torch.einsum(
        "thk,tkd->thd", p_round(p).to(operand), gathered[..., :d_v].to(operand)
    ).float()
    return out / torch.where(denom > 0, denom, torch.ones_like(denom))


def sparse_mla(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float,
    d_v: int,
    *,
    topk_length: torch.Tensor | None = None,
    sink: torch.Tensor | None = None,
    operand: torch.dtype = torch.float32,
    p_round=lambda p: p,
) -> torch.Tensor:
    """q [tokens, heads, d_qk], kv [rows, d_qk], indices [tokens, topk] -> [tokens, heads, d_v]
    fp32.

    ``operand`` float32 (the default) is the FP32 reference. A low-precision ``operand`` (bfloat16)
    is the plain-torch baseline of the numerics judge: both products take that dtype (torch
    accumulates in fp32), and ``p_round`` rounds the unnormalised probabilities (each in [0, 1], the
    row's largest 1; the division by their sum comes after P@V, in fp32) the way the P operand must
    be stored: an fp8 P@V takes them in fp8."""
    used = used_slots(indices, topk_length)
    out = [
        _attend(q[s], kv, indices[s], used[s], sm_scale, d_v, sink, operand, p_round)
        for s in (slice(i, i + CHUNK) for i in range(0, q.shape[0], CHUNK))
    ]
    return torch.cat(out)


def fp8_rounded_probabilities(fp8: torch.dtype):
    """P in [0, 1] scaled to the fp8 range, rounded to ``fp8``, scaled back: an fp8 P@V's operand
    (the fp8 format's own range, whatever kernel is judged)."""
    top = torch.finfo(fp8).max

    def round_p(p: torch.Tensor) -> torch.Tensor:
        return (p * top).to(fp8).float() / top

    return round_p
