"""How a KV storage format holds the family's inputs: what the kernel is given, and the exact values
that storage represents (what the FP32 reference attends over).

  bfloat16     as made
  float8_e4m3  Q and KV cast to the platform's e4m3 (fnuz under ROCm, as MI300X computes; fn on
  CUDA)
  v4-fp8       DeepSeek-V4's MODEL1_FP8Sparse paged cache (SGLang's KVLayout.V4): per token 448 e4m3
               latent values with one ue8m0 (power of two) scale per 64, then the 64 rope values as
               bf16; a block holds its tokens' 576 data bytes, then their 8 scale bytes (7 + 1 pad)
Written from the format's description (sglang/kernels/ops/attention/dsv4/kv_layout.py and the
kernel's decode), not from SGLang's quantizer: the gate's own encoding, checked by decoding it back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

V4_NOPE, V4_ROPE, V4_TILE, V4_BLOCK = 448, 64, 64, 64
V4_DATA_BYTES, V4_SCALE_BYTES = V4_NOPE + 2 * V4_ROPE, 8
E4M3_MAX = 448.0


@dataclass
class Stored:
    q: torch.Tensor  # what the kernel is given
    kv: torch.Tensor
    q_seen: torch.Tensor  # the values they represent, fp32
    kv_seen: torch.Tensor


def fp8_dtype() -> torch.dtype:
    return torch.float8_e4m3fnuz if torch.version.hip else torch.float8_e4m3fn


def store(fmt: str, q: torch.Tensor, kv: torch.Tensor) -> Stored:
    if fmt == "bfloat16":
        return Stored(q, kv, q.float(), kv.float())
    if fmt == "float8_e4m3":
        q8, kv8 = q.to(fp8_dtype()), kv.to(fp8_dtype())
        return Stored(q8, kv8, q8.float(), kv8.float())
    if fmt == "v4-fp8":
        cache, seen = v4_encode(kv)
        return Stored(q, cache, q.float(), seen)
    raise ValueError(f"unknown KV format {fmt!r}: bfloat16, float8_e4m3, v4-fp8")


def v4_encode(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """kv [rows, 512] -> (cache [blocks, 64, 1, 584] uint8, the values it holds [rows, 512] fp32).
    rows must be a multiple of the 64-token block."""
    rows = kv.shape[0]
    if rows % V4_BLOCK or kv.shape[1] != V4_NOPE + V4_ROPE:
        raise ValueError(
            f"v4-fp8 takes [k * {V4_BLOCK}, {V4_NOPE + V4_ROPE}] rows, got {list(kv.shape)}"
        )
    nope = kv[:, :V4_NOPE].float().reshape(rows, V4_NOPE // V4_TILE, V4_TILE)
    amax = nope.abs().nan_to_num(nan=0.0).amax(dim=-1, keepdim=True).clamp(min=2.0**-100)
    # scale 2^e, stored as e + 127
    exponent = torch.ceil(torch.log2(amax / E4M3_MAX)).clamp(-127, 127)
    codes = (nope / torch.exp2(exponent)).to(torch.float8_e4m3fn)
    rope = kv[:, V4_NOPE:].to(torch.bfloat16)
    seen = torch.cat(
        [(codes.float() * torch.exp2(exponent)).reshape(rows, V4_NOPE), rope.float()], dim=1
    )
    data = torch.cat(
        [codes.reshape(rows, V4_NOPE).view(torch.uint8), rope.contiguous().view(torch.uint8)], dim=1
    )
    scales = torch.zeros(rows, V4_SCALE_BYTES, dtype=torch.uint8, device=kv.device)
    scales[:, : V4_NOPE // V4_TILE] = (exponent.reshape(rows, -1) + 127).to(torch.uint8)
    blocks = rows // V4_BLOCK
    cache = torch.cat([data.reshape(blocks, -1), scales.reshape(blocks, -1)], dim=1)
    return cache.reshape(blocks, V4_BLOCK, 1, V4_DATA_BYTES + V4_SCALE_BYTES).contiguous(), seen
