"""The sparse-MLA decode family: the GPU cases a sparse-MLA kernel is judged on, their inputs, and
how each KV storage format holds them.

Cases (tokens 1, 8, 17 and 8192; heads, top-k and widths from the adapter):
  dense            every slot names a distinct KV row
  tail-padded      each token's slots past a random count are -1 (the indexer's padding)
  all-masked-rows  tail-padded, and every third token (the first included) has only -1 slots: output
  0
  duplicates       the second half of each token's slots repeats the first half
  nan-unused       tail-padded, and every KV row no used slot names is NaN, row 0 included (a masked
                   slot that loads row 0 and relies on P = 0 to cancel it leaks the NaN)
  zeros            a quarter of the KV entries are exactly 0 (fp8 formats: the zero and subnormal
  codes)
  sink             dense, with a per-head attention sink (capability feature "sink")
  topk-length      dense, with a topk_length shorter than top-k (capability feature "topk-length")
The 8192-token cases are dense and tail-padded only: the FP32 reference gathers 8192 x top-k rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

KINDS = (
    "dense",
    "tail-padded",
    "all-masked-rows",
    "duplicates",
    "nan-unused",
    "zeros",
    "sink",
    "topk-length",
)
FEATURE_OF = {"sink": "sink", "topk-length": "topk-length"}  # kinds that need a capability feature
TOKENS = (1, 8, 17, 8192)
LONG_KINDS = ("dense", "tail-padded")
KV_ROWS = 4096


@dataclass(frozen=True)
class Shape:
    heads: int
    topk: int
    d_qk: int
    d_v: int


@dataclass(frozen=True)
class Case:
    tokens: int
    kind: str
    shape: Shape
    seed: int = 0

    @property
    def name(self) -> str:
        return f"t{self.tokens}-{self.kind}"


def cases(shape: Shape) -> list[Case]:
    return [
        Case(t, kind, shape) for t in TOKENS for kind in KINDS if t < 8192 or kind in LONG_KINDS
    ]


@dataclass
class Inputs:
    q: torch.Tensor  # [tokens, heads, d_qk] bf16
    kv: torch.Tensor  # [rows, d_qk] bf16
    indices: torch.Tensor  # [tokens, topk] int32, -1 unused
    sm_scale: float
    d_v: int
    topk_length: torch.Tensor | None = None  # [1] int32 (one sequence)
    sink: torch.Tensor | None = None  # [heads] fp32
    extras: dict = field(default_factory=dict)


def make_inputs(case: Case, device: str) -> Inputs:
    s = case.shape
    gen = torch.Generator(device=device).manual_seed(1000 * case.seed + case.tokens)
    q = torch.randn(case.tokens, s.heads, s.d_qk, device=device, generator=gen).to(torch.bfloat16)
    kv = torch.randn(KV_ROWS, s.d_qk, device=device, generator=gen)
    # row 0 never named: it must stay out of the result
    first = 1 if case.kind == "nan-unused" else 0
    order = (
        torch.rand(case.tokens, KV_ROWS - first, device=device, generator=gen).argsort(dim=-1)
        + first
    )
    indices = order[:, : s.topk].to(torch.int32)
    if case.kind == "duplicates":
        indices[:, s.topk // 2 :] = indices[:, : s.topk - s.topk // 2]
    if case.kind in ("tail-padded", "all-masked-rows", "nan-unused"):
        count = torch.randint(1, s.topk, (case.tokens, 1), device=device, generator=gen)
        indices = torch.where(torch.arange(s.topk, device=device) < count, indices, -1)
    if case.kind == "all-masked-rows":
        indices[::3] = -1
    if case.kind == "nan-unused":
        named = torch.zeros(KV_ROWS, dtype=torch.bool, device=device)
        named[indices[indices >= 0].long()] = True
        kv[~named] = float("nan")
    if case.kind == "zeros":
        kv[torch.rand(kv.shape, device=device, generator=gen) < 0.25] = 0.0
    x = Inputs(q, kv.to(torch.bfloat16), indices.contiguous(), s.d_qk**-0.5, s.d_v)
    if case.kind == "sink":
        x.sink = torch.randn(s.heads, device=device, generator=gen) * 2
    if case.kind == "topk-length":
        x.topk_length = torch.tensor(
            [max(1, s.topk * 3 // 4 - 3)], dtype=torch.int32, device=device
        )  # < topk
    return x
