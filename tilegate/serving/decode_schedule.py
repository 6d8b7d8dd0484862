"""How many splits a paged decode launch cuts each request's context into: enough workgroups to
keep every compute unit streaming K and V, no more.

One decode workgroup reads one KV head's keys of one split, so a launch has batch x kv_heads x
splits of them. Splits beyond what fills the device each add a partial output to write and
combine, and with one split the combine is skipped altogether (kernels/paged_decode.py). The
choice reads only the batch size, never the context lengths: it is the same for every replay of
a CUDA/HIP graph captured for that batch size, and needs no read back to the host. A short
context uses fewer splits than the launch has anyway: each split holds whole key blocks.
"""

from __future__ import annotations

import functools
import math

import torch

from tilegate.kernels.configs import DecodeConfig


@functools.cache
def compute_units(device_index: int) -> int:
    """Streaming multiprocessors (CUDA) or compute units (ROCm) of a GPU."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def decode_splits(batch: int, kv_heads: int, cfg: DecodeConfig, units: int) -> int:
    """Splits for ``batch`` requests: the power of two that gives at least
    ``cfg.workgroups_per_unit`` workgroups per compute unit, between 1 and ``cfg.num_splits``.
    A power of two: the combine is built for each count a launch uses, so few are built."""
    if batch < 1 or kv_heads < 1 or units < 1:
        raise ValueError(f"batch {batch}, kv_heads {kv_heads}, compute units {units}: need >= 1")
    wanted = math.ceil(cfg.workgroups_per_unit * units / (batch * kv_heads))
    return min(cfg.num_splits, 1 << (wanted - 1).bit_length())


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0
