"""Compiling kernels for the local GPU and calling the prefill kernel on torch tensors.

Compiled kernels are cached per (factory, shape, config, options) for the session; TileLang
keeps its own disk cache underneath. Nothing here runs at import: CPU machines import it.
"""

from __future__ import annotations

import functools

import torch

from tilegate.kernels.configs import TARGETS, TileConfig
from tilegate.kernels.dtypes import TORCH_DTYPES
from tilegate.kernels.flash_fwd import flash_fwd
from tilegate.kernels.hooks import Knobs, PrefillKnobs
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import detect, local_target

# What this process launched last, for the hang watchdog's message (tilegate.testing.watchdog).
last_launch: dict[str, str | None] = {"kernel": None}

# TileLang pass configs every build for a target gets. CUDA: nvcc --use_fast_math (exp2 as the
# hardware's ex2.approx, as flash-attention's own CUDA builds are compiled): prefill 0.87x -> 1.0x
# of cuDNN at 3782 causal on the H200 (docs/perf.md), errors unchanged in the numerics tier.
TARGET_PASS_CONFIGS: dict[str, dict[str, object]] = {"sm90": {"tl.enable_fast_math": True}}

# TileLang pass configs added to every build of this process. Empty in production and in the
# numerics tiers; the sanitizer's initcheck child sets {"tl.disable_tma_lower": True}
# (tilegate/harness/sanitize/child.py says why).
process_pass_configs: dict[str, object] = {}


@functools.cache
def _compiled(factory, shape: AttentionShape, cfg, pass_configs: tuple, **options):
    import tilelang

    cfg.validate(TARGETS[local_target()], shape)
    tilelang_target = "hip" if detect().kind == "rocm" else "cuda"
    return tilelang.compile(
        factory(shape, cfg, **options),
        out_idx=None,
        target=tilelang_target,
        pass_configs=dict(pass_configs) or None,
    )


def compiled(factory, shape: AttentionShape, cfg, pass_configs: dict | None = None, **options):
    """``factory(shape, cfg, **options)`` compiled for the local GPU, once per session, with the
    pass configs its knobs need (``options["knobs"]``, kernels/hooks.py) and ``pass_configs`` on
    top of ``process_pass_configs``. Healthy knobs are the factory's default: one cache entry."""
    knobs = options.get("knobs")
    if isinstance(knobs, Knobs) and knobs.healthy:
        options = {**options, "knobs": None}
    planted = knobs.pass_configs() if isinstance(knobs, Knobs) else {}
    merged = {
        **TARGET_PASS_CONFIGS.get(local_target(), {}),
        **process_pass_configs,
        **planted,
        **(pass_configs or {}),
    }
    # None is each factory's default: one cache entry
    given = {k: v for k, v in options.items() if v is not None}
    return _compiled(factory, shape, cfg, tuple(sorted(merged.items())), **given)


def launch(
    factory, shape: AttentionShape, cfg, *tensors, pass_configs: dict | None = None, **options
) -> None:
    """Compile (once) and run ``factory``'s kernel on ``tensors``, noting which kernel it was."""
    kernel = compiled(factory, shape, cfg, pass_configs, **options)
    extra = "".join(f" {k}={v}" for k, v in options.items() if v is not None)
    last_launch["kernel"] = f"{factory.__name__} {shape.name} {cfg.name}{extra}"
    kernel(*tensors)


def check_inputs(shape: AttentionShape, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Reject what the kernel was not built for: never pad, truncate or cast silently."""
    want = TORCH_DTYPES[shape.dtype]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != want:
            raise ValueError(f"{name} is {t.dtype}, the kernel was built for {want}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous [batch, seq, heads, head_dim]")
        if t.dim() != 4 or t.shape[-1] != shape.head_dim:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}, want [batch, seq, heads, {shape.head_dim}]"
            )
    if q.shape[2] != shape.q_heads or k.shape[2] != shape.kv_heads or k.shape != v.shape:
        raise ValueError(
            f"heads q {q.shape[2]}, k {k.shape[2]}, v {v.shape[2]}: kernel built for "
            f"{shape.q_heads}:{shape.kv_heads}"
        )
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"batch {q.shape[0]} for q but {k.shape[0]} for k/v")
    if not 1 <= q.shape[1] <= k.shape[1]:
        raise ValueError(f"need 1 <= seq_q ({q.shape[1]}) <= seq_k ({k.shape[1]})")


def flash_attention(
    shape: AttentionShape, cfg: TileConfig, q, k, v, out=None, knobs: PrefillKnobs | None = None
):
    """Run the flash forward kernel; ``out`` (same shape as q) may be given to check its bounds.
    ``knobs`` change its hooks (the gate's planted defects only; None: healthy)."""
    check_inputs(shape, q, k, v)
    if out is None:
        out = torch.empty_like(q)
    launch(flash_fwd, shape, cfg, q, k, v, out, knobs=knobs)
    return out
