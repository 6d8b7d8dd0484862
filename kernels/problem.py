"""The attention problem a kernel is built for: heads, head_dim, dtype, masking.

A mask variant is a field here with a default that changes nothing, a line in the kernels' mask
and one in the reference: the gate's tiers read their cases from each kernel's list of masks
(tilegate/gate/registry.py), so a variant listed there is compiled, judged and counted by every
tier without another edit.
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = ("float16", "bfloat16")


class ShapeError(ValueError):
    """The attention problem is outside what the kernels support."""


def dtype_bytes(dtype: str) -> int:
    return {"float16": 2, "bfloat16": 2, "float32": 4}[dtype]


@dataclass(frozen=True)
class Mask:
    """Which keys a query row sees: causal (bottom-right) or all, and a sliding window or none."""

    causal: bool
    window: int | None = None  # AttentionShape.window


CAUSAL = Mask(causal=True)
FULL = Mask(causal=False)


@dataclass(frozen=True)
class AttentionShape:
    """Compile-time part of an attention call. Batch and sequence lengths stay dynamic.

    Layout [batch, seq, heads, head_dim]; q_heads query heads share kv_heads K/V heads
    (GQA: Llama-3-8B is 32:8, 70B is 64:8).
    """

    q_heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    dtype: str = "float16"
    # Sliding window, SGLang's convention (sliding_window_size): the query at position p sees the
    # keys at p - window .. p, window + 1 of them; None: no window. Causal masks only.
    window: int | None = None

    def __post_init__(self) -> None:
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ShapeError(
                f"head_dim {self.head_dim} unsupported: no TileLang tile config "
                f"(supported: {', '.join(map(str, SUPPORTED_HEAD_DIMS))})"
            )
        if self.dtype not in SUPPORTED_DTYPES:
            raise ShapeError(f"dtype {self.dtype!r} unsupported: use one of {SUPPORTED_DTYPES}")
        if self.q_heads <= 0 or self.kv_heads <= 0 or self.q_heads % self.kv_heads:
            raise ShapeError(
                f"GQA ratio {self.q_heads}:{self.kv_heads} does not divide: q_heads must be a "
                "multiple of kv_heads"
            )
        if self.window is not None and (not self.causal or self.window < 0):
            raise ShapeError(
                f"sliding window {self.window!r}: a window is a number of keys >= 0 to the left of "
                "a causal diagonal (SGLang's sliding_window_size), not a full mask's"
            )

    @classmethod
    def masked(cls, q_heads: int, kv_heads: int, head_dim: int, mask: Mask, dtype: str):
        return cls(q_heads, kv_heads, head_dim, mask.causal, dtype, mask.window)

    @property
    def groups(self) -> int:
        return self.q_heads // self.kv_heads

    @property
    def name(self) -> str:
        mask = "causal" if self.causal else "full"
        if self.window is not None:
            mask = f"swa{self.window}"
        heads = f"mha{self.q_heads}" if self.groups == 1 else f"gqa{self.q_heads}x{self.kv_heads}"
        short = {"float16": "fp16", "bfloat16": "bf16"}[self.dtype]
        return f"{mask}-{heads}-d{self.head_dim}-{short}"
