"""Where an element of a kernel's output lies in the kernel's tiling: the query tile of its row,
the key tile of the last key that row attends to, and whether either is the partial last tile of
its sequence (where masks and bound checks live, and where most attention bugs hide).

A numerics failure names the worst element's site (suite/suite_helpers.py: explain_failure).
"""

from __future__ import annotations

from collections.abc import Sequence


def _tile(pos: int, length: int, block: int, what: str) -> str:
    tile, tiles = pos // block, -(-length // block)
    tail = length - (tiles - 1) * block
    partial = tile == tiles - 1 and tail < block
    shape = f", partial: {tail} of {block}" if partial else ""
    return f"{what} tile {tile} of {tiles} (block {block}{shape})"


def dense_site(
    row: int, seq_q: int, seq_k: int, causal: bool, block_m: int, block_n: int, what: str = "row"
) -> str:
    """Row ``row`` of a prefill over ``seq_q`` queries and ``seq_k`` keys (causal: bottom-right
    aligned, as the kernels are); ``what`` names the row in the text."""
    last_key = min(row + seq_k - seq_q, seq_k - 1) if causal else seq_k - 1
    return (
        f"{what} {row} of {seq_q}: {_tile(row, seq_q, block_m, 'query')}; its last key {last_key} "
        f"of {seq_k}: {_tile(last_key, seq_k, block_n, 'key')}"
    )


def paged_site(
    token: int,
    seq_lens: Sequence[int],
    extend_lens: Sequence[int] | None,
    block_m: int,
    block_n: int,
) -> str:
    """Token ``token`` of a paged batch's output: for an extend, the new tokens of every request
    one after another; for a decode (``extend_lens`` None), one token a request."""
    new = list(extend_lens) if extend_lens is not None else [1] * len(seq_lens)
    request, first = 0, 0
    while request < len(new) - 1 and token >= first + new[request]:
        first += new[request]
        request += 1
    row, n_new, seq = token - first, new[request], seq_lens[request]
    prefix = seq - n_new
    site = dense_site(row, n_new, seq, True, block_m, block_n, what="new token")
    return f"request {request} (prefix {prefix}, new {n_new}): {site}"
