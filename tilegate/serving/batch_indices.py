"""One batch's index tensors for the paged kernels, validated once: torch only (no TileLang), so
SGLang's backend prepares batches in any process, the CPU engine's reference mode included.

Index tensors may be int64 (SGLang's) and are narrowed to the kernels' int32 after a range check.
Every check that needs values runs here, with one read back to the host per batch; the launches
(tilegate/serving/paged.py) then read nothing back, so a model's layers and a CUDA graph's
replays do not pay for them again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class BatchIndices:
    """One batch's index tensors, validated and narrowed to int32 once (``prepare_*``): the
    launches read no value back to the host, so a model's layers, and a CUDA graph's replays,
    pay for the checks once per batch. ``extend_lens`` / ``extend_starts`` are None for decode."""

    req_to_token: torch.Tensor
    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor
    extend_lens: torch.Tensor | None = None
    extend_starts: torch.Tensor | None = None
    tokens: int = 0  # query tokens the batch carries: sum of extend_lens, or the batch size

    @property
    def batch(self) -> int:
        return self.seq_lens.shape[0]


def _int32(name: str, t, device) -> torch.Tensor:
    t = torch.as_tensor(t, device=device)
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be an integer tensor, got {t.dtype}")
    return t


def _host_facts(**named) -> dict:
    """min and max of each tensor, read back in one transfer (one host sync for the batch)."""
    stats = [torch.stack([t.min(), t.max()]).to(torch.int64) for t in named.values()]
    values = torch.stack(stats).tolist()
    return {name: tuple(v) for name, v in zip(named, values)}


def _check(batch: int, r2t, req, lens, new=None) -> None:
    if (
        lens.shape != (batch,)
        or req.shape != (batch,)
        or (new is not None and new.shape != (batch,))
    ):
        raise ValueError(
            f"seq_lens {tuple(lens.shape)}, req_pool_indices {tuple(req.shape)} and extend_lens "
            f"must be [{batch}]"
        )
    if not batch:
        return
    named = {"req_to_token": r2t, "req_pool_indices": req, "seq_lens": lens}
    if new is not None:
        named |= {"extend_lens": new, "seq_lens - extend_lens": lens - new}
    facts = _host_facts(**{k: v for k, v in named.items() if v.numel()})
    for name, (low, high) in facts.items():
        if name in ("req_to_token", "req_pool_indices") and (low < 0 or high > INT32_MAX):
            raise ValueError(f"{name} holds values outside 0..2^31-1")
    if facts["seq_lens"][0] < 1:
        raise ValueError("every request needs seq_len >= 1")
    if facts["seq_lens"][1] > r2t.shape[1]:
        raise ValueError(f"seq_len {facts['seq_lens'][1]} > req_to_token's {r2t.shape[1]} columns")
    if facts["req_pool_indices"][1] >= r2t.shape[0]:
        raise ValueError(
            f"req_pool_indices reach {facts['req_pool_indices'][1]}, req_to_token has "
            f"{r2t.shape[0]} rows"
        )
    if new is not None and (facts["extend_lens"][0] < 1 or facts["seq_lens - extend_lens"][0] < 0):
        raise ValueError("every request needs 1 <= extend_len <= seq_len")


def prepare_decode(req_to_token, req_pool_indices, seq_lens, device) -> BatchIndices:
    r2t, req, lens = (
        _int32(n, t, device)
        for n, t in (
            ("req_to_token", req_to_token),
            ("req_pool_indices", req_pool_indices),
            ("seq_lens", seq_lens),
        )
    )
    _check(lens.shape[0] if lens.dim() == 1 else -1, r2t, req, lens)
    r2t, req, lens = (t.to(torch.int32).contiguous() for t in (r2t, req, lens))
    return BatchIndices(r2t, req, lens, tokens=lens.shape[0])


def prepare_extend(req_to_token, req_pool_indices, seq_lens, extend_lens, device) -> BatchIndices:
    r2t, req, lens, new = (
        _int32(n, t, device)
        for n, t in (
            ("req_to_token", req_to_token),
            ("req_pool_indices", req_pool_indices),
            ("seq_lens", seq_lens),
            ("extend_lens", extend_lens),
        )
    )
    _check(new.shape[0] if new.dim() == 1 else -1, r2t, req, lens, new)
    r2t, req, lens, new = (t.to(torch.int32).contiguous() for t in (r2t, req, lens, new))
    tokens = int(new.sum()) if new.numel() else 0  # one more read, still once per batch
    return BatchIndices(r2t, req, lens, new, (torch.cumsum(new, 0) - new).to(torch.int32), tokens)


def check_host_seq_lens(seq_lens_cpu: torch.Tensor, columns: int) -> None:
    """A graph replay's lengths, on SGLang's host copy: ValueError before the replay."""
    if not seq_lens_cpu.numel():
        return
    low, high = (int(v) for v in torch.aminmax(seq_lens_cpu))
    if low < 1:
        raise ValueError("every request needs seq_len >= 1")
    if high > columns:
        raise ValueError(f"seq_len {high} > req_to_token's {columns} columns")


def check_replayed_decode(req_to_token, req_pool_indices, seq_lens) -> None:
    """A CUDA/HIP-graph replay's decode batch, checked on the device with no read back to the
    host (torch._assert_async): the tilelang backend captures these checks into the graph
    (init_forward_metadata_in_graph), so every replay runs them before its kernels and the host,
    which prepares the next step while this one runs, never waits for them (issue 36's profile).
    A bad batch stops the process with a device-side assertion before a kernel reads a row or
    column out of range. The table's entries are SGLang's own slots, checked with every eagerly
    prepared batch (prepare_decode), not here. On the CPU the assertions raise at once.
    """
    rows, cols = req_to_token.shape
    torch._assert_async(
        ((seq_lens >= 1) & (seq_lens <= cols)).all(),
        f"tilegate: a replayed decode batch has a seq_len outside 1..{cols}",
    )
    torch._assert_async(
        ((req_pool_indices >= 0) & (req_pool_indices < rows)).all(),
        f"tilegate: a replayed decode batch has a req_pool_index outside 0..{rows - 1}",
    )
