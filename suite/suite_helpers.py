"""What several test modules share (no test module imports another): GPU-case parameters and the
fake SGLang model runner, pools, layers and batches.

GPU cases are parametrized over every target's config table without touching the device: each
param carries ``config_target(<target>)`` and the plugin (tilegate/testing/skips.py) skips it at
run time unless the local GPU runs that table (its own, or gfx942's programs lowered for it:
tilegate.platform.executed_targets). Each (shape, config) pair is one compiled kernel; tests that
share one are put in the same xdist group (--dist loadgroup), so each kernel compiles once per
run."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from tilegate.gate.builds import phase_builds
from tilegate.kernels.configs import CONFIG_TABLES, configs_for, default_config
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import local_target

DEVICE = "cuda"  # torch's name for the current device under CUDA and ROCm alike


def build_params(cases) -> list:
    """pytest params for gfx942 builds (KernelCase), one xdist group per build: the compile, ISA
    and golden tests of one kernel share a worker, so it is lowered and built once per run."""
    return [
        pytest.param(case, marks=pytest.mark.xdist_group(f"build-{case.name}"), id=case.name)
        for case in cases
    ]


def with_configs(cases, marks=(), tables=CONFIG_TABLES, phase: str = "prefill"):
    """pytest params: every case x every config of every target for its head_dim. ``phase`` is
    what the test launches (tilegate.gate.registry.PHASES)."""
    params = []
    for target in tables:
        for case in cases:
            for cfg in configs_for(target, case.shape.head_dim, tables):
                group = pytest.mark.xdist_group(f"{phase}-{target}-{case.shape.name}-{cfg.name}")
                builds = pytest.mark.builds(*phase_builds(phase, case.shape, cfg))
                slow = [pytest.mark.slow] if getattr(case, "slow", False) else []
                params.append(
                    pytest.param(
                        case,
                        cfg,
                        id=f"{target}-{case.name}-{cfg.name}",
                        marks=[group, builds, pytest.mark.config_target(target), *slow, *marks],
                    )
                )
    return params


def causal_builds(heads: int, kv_heads: int, head_dim: int, *phases: str, **options):
    """The builds mark of a test that launches, in fp16 and bf16, causal, the local default config
    of each phase in ``phases`` (tilegate.gate.registry.PHASES)."""
    shapes = [
        AttentionShape(heads, kv_heads, head_dim, True, dtype) for dtype in ("float16", "bfloat16")
    ]
    return pytest.mark.builds(
        *(b for shape in shapes for phase in phases for b in phase_builds(phase, shape, **options))
    )


# -- a fake SGLang model runner, KV pool, layer and batch (tests of the backend without SGLang) ---

POOL_TOKENS, MAX_REQS, MAX_CTX = 1024, 6, 160


class FakeKVPool:
    """SGLang's MHATokenToKVPool as the backend sees it: per-layer [tokens, kv_heads, head_dim]."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype, gen):
        self.k = [
            torch.randn(POOL_TOKENS, kv_heads, head_dim, generator=gen).to(dtype)
            for _ in range(layers)
        ]
        self.v = [
            torch.randn(POOL_TOKENS, kv_heads, head_dim, generator=gen).to(dtype)
            for _ in range(layers)
        ]
        self.writes = 0

    def set_kv_buffer(self, layer, loc, cache_k, cache_v):
        self.writes += 1
        self.k[layer.layer_id][loc] = cache_k.to(self.k[layer.layer_id].dtype)
        self.v[layer.layer_id][loc] = cache_v.to(self.v[layer.layer_id].dtype)

    def get_key_buffer(self, layer_id):
        return self.k[layer_id]

    def get_value_buffer(self, layer_id):
        return self.v[layer_id]


def fake_runner(
    *,
    heads=8,
    kv_heads=2,
    head_dim=64,
    v_head_dim=None,
    dtype=torch.float32,
    use_mla=False,
    sliding_window=None,
    encoder_decoder=False,
    hybrid_swa=False,
    seed=0,
):
    gen = torch.Generator().manual_seed(seed)
    # slots scattered over the pool, as SGLang's allocator leaves them after a while, and never one
    # slot for two requests (a shared slot would make the order of the K/V writes matter)
    req_to_token = torch.randperm(POOL_TOKENS, generator=gen)[: MAX_REQS * MAX_CTX]
    req_to_token = req_to_token.reshape(MAX_REQS, MAX_CTX).to(torch.int32)
    model_config = SimpleNamespace(
        num_attention_heads=heads,
        get_num_kv_heads=lambda tp: kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim or head_dim,
        is_encoder_decoder=encoder_decoder,
        is_hybrid_swa=hybrid_swa,
    )
    return SimpleNamespace(
        device="cpu",
        model_config=model_config,
        use_mla_backend=use_mla,
        tp_size=1,
        sliding_window_size=sliding_window,
        is_hybrid_swa=hybrid_swa,
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
        token_to_kv_pool=FakeKVPool(2, kv_heads, head_dim, dtype, gen),
    )


def fake_layer(layer_id=0, heads=8, kv_heads=2, head_dim=64, **overrides):
    attrs = {
        "layer_id": layer_id,
        "tp_q_head_num": heads,
        "tp_k_head_num": kv_heads,
        "qk_head_dim": head_dim,
        "v_head_dim": head_dim,
        "scaling": head_dim**-0.5,
        "is_cross_attention": False,
        "attn_type": SimpleNamespace(name="DECODER"),
        "sliding_window_size": -1,
        "logit_cap": 0.0,
    }
    return SimpleNamespace(**(attrs | overrides))


@dataclass(frozen=True)
class Batch:
    name: str
    seq_lens: tuple[int, ...]
    extend_lens: tuple[int, ...] = field(default=())  # empty: decode (one new token each)
    reqs: tuple[int, ...] = (3, 0, 5)

    @property
    def decode(self) -> bool:
        return not self.extend_lens


EXTEND_BATCHES = [
    Batch("extend-prefill-ragged", seq_lens=(1, 17, 129), extend_lens=(1, 17, 129)),
    Batch("extend-over-cached-prefix", seq_lens=(40, 150, 64), extend_lens=(7, 1, 64)),
]
DECODE_BATCHES = [
    Batch("decode-ragged", seq_lens=(1, 33, 160)),
    Batch("decode-single", seq_lens=(77,), reqs=(2,)),
]


def forward_batch(runner, b: Batch):
    new = b.extend_lens or (1,) * len(b.seq_lens)
    r2t = runner.req_to_token_pool.req_to_token
    # the new tokens are each request's last positions; their pool slots are out_cache_loc
    out_cache_loc = torch.cat(
        [r2t[r, s - n : s].long() for r, s, n in zip(b.reqs, b.seq_lens, new)]
    )
    return SimpleNamespace(
        forward_mode=SimpleNamespace(name="DECODE" if b.decode else "EXTEND"),
        out_cache_loc=out_cache_loc,
        req_pool_indices=torch.tensor(b.reqs),
        seq_lens=torch.tensor(b.seq_lens),
        extend_seq_lens=None if b.decode else torch.tensor(new),
        extend_prefix_lens=None
        if b.decode
        else torch.tensor([s - n for s, n in zip(b.seq_lens, new)]),
        encoder_lens=None,
    )


def local_default_config(head_dim: int, tables=CONFIG_TABLES):
    """The local GPU's default config (asked inside a test, never at collection)."""
    return default_config(local_target(), head_dim, tables)
