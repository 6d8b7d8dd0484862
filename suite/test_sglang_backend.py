"""The tilelang SGLang backend without an engine: hand-built pools, fake model runner and layers.

Reference mode must equal tilegate.references.paged on the pool as SGLang would leave it
(prefix K/V already there, the new tokens' K/V written by the backend at out_cache_loc), and
every configuration the kernels do not support must be refused with a message naming it.
Runs in the gate's own environment: no SGLang needed (the backend's base class is then object).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch
from tilegate.kernels.sglang_backend import (
    MODE_ENV,
    TileLangAttnBackend,
    UnsupportedByTileLangBackend,
    resolve_mode,
)
from tilegate.references.paged import ref_paged_decode, ref_paged_extend

POOL_TOKENS, MAX_REQS, MAX_CTX = 1024, 6, 160


class FakeKVPool:
    """SGLang's MHATokenToKVPool as the backend sees it: per-layer [tokens, kv_heads, head_dim]."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype, gen):
        self.k = [torch.randn(POOL_TOKENS, kv_heads, head_dim, generator=gen).to(dtype) for _ in range(layers)]
        self.v = [torch.randn(POOL_TOKENS, kv_heads, head_dim, generator=gen).to(dtype) for _ in range(layers)]
        self.writes = 0

    def set_kv_buffer(self, layer, loc, cache_k, cache_v):
        self.writes += 1
        self.k[layer.layer_id][loc] = cache_k.to(self.k[layer.layer_id].dtype)
        self.v[layer.layer_id][loc] = cache_v.to(self.v[layer.layer_id].dtype)

    def get_key_buffer(self, layer_id):
        return self.k[layer_id]

    def get_value_buffer(self, layer_id):
        return self.v[layer_id]


def fake_runner(*, heads=8, kv_heads=2, head_dim=64, v_head_dim=None, dtype=torch.float32, use_mla=False,
                sliding_window=None, encoder_decoder=False, hybrid_swa=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    # slots scattered over the pool, as SGLang's allocator leaves them after a while, and never one
    # slot for two requests (a shared slot would make the order of the K/V writes matter)
    req_to_token = torch.randperm(POOL_TOKENS, generator=gen)[: MAX_REQS * MAX_CTX]
    req_to_token = req_to_token.reshape(MAX_REQS, MAX_CTX).to(torch.int32)
    model_config = SimpleNamespace(num_attention_heads=heads, get_num_kv_heads=lambda tp: kv_heads,
                                   head_dim=head_dim, v_head_dim=v_head_dim or head_dim,
                                   is_encoder_decoder=encoder_decoder, is_hybrid_swa=hybrid_swa)
    return SimpleNamespace(device="cpu", model_config=model_config, use_mla_backend=use_mla, tp_size=1,
                           sliding_window_size=sliding_window, is_hybrid_swa=hybrid_swa,
                           req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
                           token_to_kv_pool=FakeKVPool(2, kv_heads, head_dim, dtype, gen))


def fake_layer(layer_id=0, heads=8, kv_heads=2, head_dim=64, **overrides):
    attrs = {"layer_id": layer_id, "tp_q_head_num": heads, "tp_k_head_num": kv_heads, "qk_head_dim": head_dim,
                 "v_head_dim": head_dim, "scaling": head_dim**-0.5, "is_cross_attention": False,
                 "attn_type": SimpleNamespace(name="DECODER"), "sliding_window_size": -1, "logit_cap": 0.0}
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
DECODE_BATCHES = [Batch("decode-ragged", seq_lens=(1, 33, 160)), Batch("decode-single", seq_lens=(77,), reqs=(2,))]


def forward_batch(runner, b: Batch):
    new = b.extend_lens or (1,) * len(b.seq_lens)
    r2t = runner.req_to_token_pool.req_to_token
    # the new tokens are each request's last positions; their pool slots are out_cache_loc
    out_cache_loc = torch.cat([r2t[r, s - n:s].long() for r, s, n in zip(b.reqs, b.seq_lens, new)])
    return SimpleNamespace(
        forward_mode=SimpleNamespace(name="DECODE" if b.decode else "EXTEND"),
        out_cache_loc=out_cache_loc,
        req_pool_indices=torch.tensor(b.reqs),
        seq_lens=torch.tensor(b.seq_lens),
        extend_seq_lens=None if b.decode else torch.tensor(new),
        extend_prefix_lens=None if b.decode else torch.tensor([s - n for s, n in zip(b.seq_lens, new)]),
        encoder_lens=None,
    )


def _run(b: Batch, dtype=torch.float32, layer_id=1):
    runner = fake_runner(dtype=dtype)
    backend = TileLangAttnBackend(runner, mode="reference")
    layer = fake_layer(layer_id)
    fb = forward_batch(runner, b)
    tokens = fb.out_cache_loc.shape[0]
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(tokens, 8 * 64, generator=gen).to(dtype)
    k = torch.randn(tokens, 2, 64, generator=gen).to(dtype)
    v = torch.randn(tokens, 2, 64, generator=gen).to(dtype)
    # what the pool must hold after the backend's write: built independently of the backend
    k_pool = runner.token_to_kv_pool.k[layer_id].clone()
    v_pool = runner.token_to_kv_pool.v[layer_id].clone()
    k_pool[fb.out_cache_loc], v_pool[fb.out_cache_loc] = k, v
    backend.init_forward_metadata(fb)
    call = backend.forward_decode if b.decode else backend.forward_extend
    out = call(q, k, v, layer, fb)
    args = (q.view(tokens, 8, 64), k_pool, v_pool, runner.req_to_token_pool.req_to_token, fb.req_pool_indices,
            fb.seq_lens)
    if b.decode:
        want = ref_paged_decode(*args, scale=layer.scaling)
    else:
        want = ref_paged_extend(*args, fb.extend_seq_lens, scale=layer.scaling)
    return out, want, runner, k_pool, v_pool


@pytest.mark.parametrize("b", EXTEND_BATCHES + DECODE_BATCHES, ids=lambda b: b.name)
def test_reference_mode_equals_ref_paged(b):
    out, want, runner, k_pool, v_pool = _run(b)
    assert out.shape == (want.shape[0], 8 * 64) and out.dtype == torch.float32
    torch.testing.assert_close(out.view_as(want), want, rtol=0, atol=0)  # the same FP32 computation
    assert runner.token_to_kv_pool.writes == 1
    assert torch.equal(runner.token_to_kv_pool.k[1], k_pool) and torch.equal(runner.token_to_kv_pool.v[1], v_pool)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reference_mode_computes_fp32_and_returns_q_dtype(dtype):
    out, want, *_ = _run(EXTEND_BATCHES[1], dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out.view_as(want), want.to(dtype))  # one rounding, from the FP32 result


def test_without_save_kv_cache_the_pool_is_untouched():
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, mode="reference")
    fb = forward_batch(runner, DECODE_BATCHES[0])
    before = runner.token_to_kv_pool.k[0].clone()
    q = torch.randn(3, 8 * 64)
    backend.forward_decode(q, torch.zeros(3, 2, 64), torch.zeros(3, 2, 64), fake_layer(0), fb, save_kv_cache=False)
    assert runner.token_to_kv_pool.writes == 0 and torch.equal(runner.token_to_kv_pool.k[0], before)


# -- mode selection: never silent ---------------------------------------------------------------


def test_mode_defaults_to_reference_without_gpu_and_says_so():
    assert resolve_mode({}, cuda_available=False)[0] == "reference"
    assert "no GPU" in resolve_mode({}, cuda_available=False)[1]
    assert resolve_mode({}, cuda_available=True)[0] == "kernel"
    assert resolve_mode({MODE_ENV: "reference"}, cuda_available=True)[0] == "reference"
    assert resolve_mode({MODE_ENV: "kernel"}, cuda_available=False)[0] == "kernel"


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="TILEGATE_BACKEND_MODE='triton': expected one of kernel, reference"):
        resolve_mode({MODE_ENV: "triton"})


def test_chosen_mode_is_logged(monkeypatch, caplog):
    monkeypatch.delenv(MODE_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="tilegate.kernels.sglang_backend"):
        backend = TileLangAttnBackend(fake_runner())
    if not torch.cuda.is_available():
        assert backend.mode == "reference"
    assert f"tilelang attention backend: {backend.mode} mode" in caplog.text


# -- what the kernels do not support is refused, with its name ----------------------------------


@dataclass(frozen=True)
class Refusal:
    name: str
    runner: dict
    message: str


MODEL_REFUSALS = [
    Refusal("head-dim-32", {"head_dim": 32}, "head_dim 32 has no TileLang tile config (supported: 64, 128)"),
    Refusal("head-dim-256", {"head_dim": 256}, "head_dim 256 has no TileLang tile config"),
    Refusal("mla-flag", {"use_mla": True}, "MLA"),
    Refusal("qk-ne-v-head-dim", {"head_dim": 128, "v_head_dim": 64}, "qk_head_dim 128 != v_head_dim 64"),
    Refusal("gqa-8-3", {"kv_heads": 3}, "GQA ratio 8:3 does not divide"),
    Refusal("sliding-window", {"sliding_window": 4096}, "sliding-window attention (window 4096)"),
    Refusal("hybrid-swa", {"hybrid_swa": True}, "hybrid sliding-window"),
    Refusal("encoder-decoder", {"encoder_decoder": True}, "encoder-decoder model (cross attention)"),
]


@pytest.mark.parametrize("case", MODEL_REFUSALS, ids=lambda c: c.name)
def test_unsupported_model_is_refused_at_construction(case):
    with pytest.raises(UnsupportedByTileLangBackend, match=_re(case.message)):
        TileLangAttnBackend(fake_runner(**case.runner), mode="reference")


LAYER_REFUSALS = [
    Refusal("cross-attention-layer", {"is_cross_attention": True}, "layer 0: cross attention"),
    Refusal("encoder-only-layer", {"attn_type": SimpleNamespace(name="ENCODER_ONLY")},
            "layer 0: attention type ENCODER_ONLY"),
    Refusal("sliding-window-layer", {"sliding_window_size": 1024}, "layer 0: sliding window 1024"),
    Refusal("logit-cap-layer", {"logit_cap": 30.0}, "layer 0: logit soft-capping (30.0)"),
    Refusal("head-dim-96-layer", {"qk_head_dim": 96, "v_head_dim": 96}, "layer 0: head_dim 96 has no TileLang"),
]


@pytest.mark.parametrize("case", LAYER_REFUSALS, ids=lambda c: c.name)
def test_unsupported_layer_is_refused_at_first_forward(case):
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, mode="reference")
    fb = forward_batch(runner, DECODE_BATCHES[1])
    with pytest.raises(UnsupportedByTileLangBackend, match=_re(case.message)):
        backend.forward_decode(torch.randn(1, 8 * 64), None, None, fake_layer(0, **case.runner), fb)
    assert runner.token_to_kv_pool.writes == 0  # refused before touching the pool


@pytest.mark.parametrize("mode", ["TARGET_VERIFY", "DRAFT_EXTEND_V2", "DLLM_EXTEND"])
def test_speculative_and_other_forward_modes_are_refused(mode):
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, mode="reference")
    fb = forward_batch(runner, EXTEND_BATCHES[1])
    fb.forward_mode = SimpleNamespace(name=mode)
    with pytest.raises(UnsupportedByTileLangBackend, match=f"forward mode {mode} is not supported"):
        backend.forward_extend(torch.randn(72, 8 * 64), None, None, fake_layer(0), fb)


def _re(text: str) -> str:
    import re

    return re.escape(text)
