"""FP32/FP64 attention references in plain torch. Runs on CPU or GPU.

Layout [batch, seq, heads, head_dim], as the kernels. Causal masks align bottom-right:
query row i sits at absolute position i + (seq_k - seq_q) and sees keys 0..that
position, as SGLang's extend puts new tokens after a cached prefix. Since seq_q <= seq_k
is required, every row sees at least key 0: no row is ever fully masked. A sliding ``window``
(causal only; SGLang's sliding_window_size) keeps the keys at most ``window`` before that
position: every row still sees its own.
"""

from __future__ import annotations

import torch

# The bytes of one step's score matrix, over every batch and head: the rows a step takes follow
# from it, so a 32k x 32k score matrix never exists, and a 32768-token case at 32 heads takes
# 256 MiB a step (1024 rows a step took 4 GiB, and three such tensors at once ran 80 GB cards out
# of memory with six workers sharing one).
SCORE_BYTES = 256 * 2**20


def rows_per_step(batch: int, heads: int, seq_k: int, dtype: torch.dtype) -> int:
    """Query rows a step takes so that its score matrix stays within SCORE_BYTES (at least 1)."""
    per_row = batch * heads * seq_k * torch.finfo(dtype).bits // 8
    return max(1, SCORE_BYTES // per_row)


def _groups(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    if q.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"expected q [b, sq, hq, d] and k, v [b, sk, hkv, d], got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"GQA ratio {q.shape[2]}:{k.shape[2]} does not divide")
    if q.shape[1] > k.shape[1]:
        raise ValueError(
            f"seq_q {q.shape[1]} > seq_k {k.shape[1]}: queries must be the last seq_q keys"
        )
    return q.shape[2] // k.shape[2]


def _attention(
    q,
    k,
    v,
    causal: bool,
    window: int | None,
    scale: float | None,
    dtype: torch.dtype,
    chunk: int | None,
) -> torch.Tensor:
    groups = _groups(q, k, v)
    if window is not None and (not causal or window < 0):
        raise ValueError(f"window {window!r}: a number of keys >= 0, with a causal mask only")
    sq, sk, d = q.shape[1], k.shape[1], q.shape[3]
    chunk = chunk or rows_per_step(q.shape[0], q.shape[2], sk, dtype)
    scale = d**-0.5 if scale is None else scale
    qh = q.to(dtype).transpose(1, 2)  # [b, h, s, d]; K/V heads repeated over their query group
    kh = k.to(dtype).transpose(1, 2).repeat_interleave(groups, dim=1)
    vh = v.to(dtype).transpose(1, 2).repeat_interleave(groups, dim=1)
    out = torch.empty_like(qh)
    keys = torch.arange(sk, device=q.device)
    for start in range(0, sq, chunk):
        stop = min(start + chunk, sq)
        scores = torch.matmul(qh[:, :, start:stop], kh.transpose(-1, -2)) * scale
        if causal:
            rows = torch.arange(start, stop, device=q.device) + (sk - sq)
            hidden = keys[None, :] > rows[:, None]
            if window is not None:
                hidden |= keys[None, :] < rows[:, None] - window
            scores = scores.masked_fill(hidden, float("-inf"))
        out[:, :, start:stop] = torch.matmul(torch.softmax(scores, dim=-1), vh)
    return out.transpose(1, 2)


def ref_attention(
    q,
    k,
    v,
    *,
    causal: bool,
    window: int | None = None,
    scale: float | None = None,
    precision: torch.dtype = torch.float32,
    chunk: int | None = None,
) -> torch.Tensor:
    """softmax(q k^T * scale) v, computed and returned in ``precision`` (float32 or float64).
    ``chunk``: query rows a step (default: rows_per_step's).

    q: [b, sq, hq, d]; k, v: [b, sk, hkv, d] with hq % hkv == 0 (GQA), sq <= sk.
    Returns [b, sq, hq, d]. Inputs are upcast before any arithmetic; scale defaults to d^-1/2.
    """
    if precision not in (torch.float32, torch.float64):
        raise ValueError("references compute in float32 or float64 only")
    return _attention(q, k, v, causal, window, scale, precision, chunk)


def ref_attention_lowp(
    q, k, v, *, causal: bool, window: int | None = None, chunk: int | None = None
) -> torch.Tensor:
    """The same attention in the inputs' own dtype (fp16/bf16 matmuls and softmax).

    What a plain same-precision implementation gets wrong: the numerics tier allows a
    kernel a small multiple of this baseline's error against ``ref_attention``.
    Shapes as ``ref_attention``; returns q.dtype.
    """
    return _attention(q, k, v, causal, window, None, q.dtype, chunk)
