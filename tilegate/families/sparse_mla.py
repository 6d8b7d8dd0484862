"""The sparse-MLA decode family: the GPU cases a sparse-MLA kernel is judged on, their inputs as
each KV storage format holds them, the FP32 reference and the plain-torch baseline.

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
from typing import TYPE_CHECKING, Any

import torch

from tilegate.families.kv_formats import Stored, fp8_dtype, store
from tilegate.references.sparse_mla import fp8_rounded_probabilities, sparse_mla

if TYPE_CHECKING:
    from tilegate.families.spec import Kernel

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
AXES: tuple[str, ...] = ("token", "head", "col")  # the output's axes, as a failure names them
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


# the cases two launches of must agree bit for bit, and the sanitizers' (memcheck: () is every case
# below 1024 tokens, sanitized_by_default)
DETERMINISM_CASES: tuple[str, ...] = ("t17-tail-padded", "t8192-tail-padded")
SANITIZED_CASES: dict[str, tuple[str, ...]] = {
    "memcheck": (),
    "racecheck": ("t1-tail-padded", "t17-tail-padded"),
    "initcheck": ("t17-tail-padded",),
}


def refusal(kernel: Kernel) -> str | None:
    """Why the adapter cannot be judged by this family, or None."""
    if kernel.launcher is None or kernel.gpu_shape is None:
        return "a GPU family needs a launcher and a gpu_shape, and they a family"
    if kernel.kv_format not in kernel.capabilities.dtypes:
        return (
            f"its GPU cases store KV as {kernel.kv_format!r}, a dtype its "
            f"capabilities do not declare ({kernel.capabilities.dtypes})"
        )
    return None


def family_cases(kernel: Kernel) -> list[Case]:
    assert kernel.gpu_shape is not None  # refusal() saw to it
    return cases(Shape(*kernel.gpu_shape))


def missing(kernel: Kernel, case: Case) -> str | None:
    feature = FEATURE_OF.get(case.kind)
    if feature and feature not in kernel.capabilities.features:
        return (
            f"{kernel.name}: its capabilities leave out {feature!r} (features: "
            f"{', '.join(kernel.capabilities.features) or 'none'})"
        )
    return None


def build_of(case: Case) -> str | None:
    return None  # one build serves every case (the launcher compiles what it needs)


def is_slow(case: Case) -> bool:
    return False


def sanitized_by_default(case: Case) -> bool:
    return case.tokens < 1024  # under memcheck the 8192-token cases take minutes


@dataclass
class Prepared:
    inputs: Inputs
    stored: Stored


def prepare(kernel: Kernel, case: Case, device: str) -> Prepared:
    x = make_inputs(case, device)
    return Prepared(x, store(kernel.kv_format, x.q, x.kv))


def launch(kernel: Kernel, module, p: Prepared) -> torch.Tensor:
    assert kernel.launcher is not None  # refusal() saw to it
    return kernel.launcher(module, p.inputs, p.stored)


def reference(kernel: Kernel, p: Prepared) -> torch.Tensor:
    x, s = p.inputs, p.stored
    return sparse_mla(
        s.q_seen, s.kv_seen, x.indices, x.sm_scale, x.d_v, topk_length=x.topk_length, sink=x.sink
    )


def baseline(kernel: Kernel, p: Prepared) -> torch.Tensor:
    """Plain torch on the stored values, both products in bf16 (fp8 values are exact there), P
    rounded as the kernel's P operand must be: fp8 for an fp8 P@V (float8_e4m3 storage)."""
    x, s = p.inputs, p.stored
    p_round = (
        fp8_rounded_probabilities(fp8_dtype())
        if kernel.kv_format == "float8_e4m3"
        else (lambda v: v)
    )
    return sparse_mla(
        s.q_seen,
        s.kv_seen,
        x.indices,
        x.sm_scale,
        x.d_v,
        topk_length=x.topk_length,
        sink=x.sink,
        operand=torch.bfloat16,
        p_round=p_round,
    ).to(torch.bfloat16)


def record_dtype(kernel: Kernel, case: Case) -> str:
    return kernel.kv_format


def case_axes(case: Case) -> dict[str, Any]:
    """Its cases take dtype and head_dim from the kernel (gpu_shape): only its problems say them."""
    return {}


def seed(case: Case) -> int:
    return case.seed


def site(case: Case, index: tuple[int, ...], tiles: tuple[int, int]) -> str:
    return ""  # no launch options: the family knows no tiling


def closed_form_failure(case: Case, p: Prepared, out: torch.Tensor, ref: torch.Tensor) -> None:
    return None


def stray_writes(p: Prepared) -> str | None:
    return None  # the output is the launcher's own tensor
