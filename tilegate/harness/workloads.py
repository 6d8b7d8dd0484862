"""Workloads that more than one tier launches (the sanitizer and the counters run the same paged
batches)."""

from __future__ import annotations

import torch

from tilegate.fixtures.paged_cases import PagedBatch
from tilegate.serving.paged import paged_decode, paged_extend


def launch_paged(batch: PagedBatch, decode: bool, cfg) -> torch.Tensor:
    """SGLang's paged decode or extend over ``batch``, with tile config ``cfg``."""
    common = (
        batch.q,
        batch.k_pool,
        batch.v_pool,
        batch.req_to_token,
        batch.req_pool_indices,
        batch.seq_lens,
    )
    if decode:
        return paged_decode(*common, cfg=cfg)
    return paged_extend(*common, batch.extend_lens, cfg=cfg)
