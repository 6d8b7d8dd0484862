"""The tilelang SGLang backend without an engine: hand-built pools, fake model runner and layers.

Over the FP32 reference ops (the harness's), the adapter must equal tilegate.references.paged on
the pool as SGLang would leave it (prefix K/V already there, the new tokens' K/V written by the
backend at out_cache_loc), and every configuration the kernels do not support must be refused
with a message naming it. Runs in the gate's own environment: no SGLang needed (the backend's
base class is then object).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from suite_helpers import (
    DECODE_BATCHES,
    EXTEND_BATCHES,
    Batch,
    fake_layer,
    fake_runner,
    forward_batch,
)

from tilegate.harness.sglang.instrumented import ReferenceOps
from tilegate.platform import NoLocalTarget
from tilegate.references.paged import ref_paged_decode, ref_paged_extend
from tilegate.serving import sglang_backend
from tilegate.serving.sglang_backend import TileLangAttnBackend
from tilegate.serving.sglang_checks import UnsupportedByTileLangBackend


def _run(b: Batch, dtype=torch.float32, layer_id=1):
    runner = fake_runner(dtype=dtype)
    backend = TileLangAttnBackend(runner, ReferenceOps())
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
    args = (
        q.view(tokens, 8, 64),
        k_pool,
        v_pool,
        runner.req_to_token_pool.req_to_token,
        fb.req_pool_indices,
        fb.seq_lens,
    )
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
    assert torch.equal(runner.token_to_kv_pool.k[1], k_pool) and torch.equal(
        runner.token_to_kv_pool.v[1], v_pool
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reference_mode_computes_fp32_and_returns_q_dtype(dtype):
    out, want, *_ = _run(EXTEND_BATCHES[1], dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out.view_as(want), want.to(dtype))  # one rounding, from the FP32 result


def test_without_save_kv_cache_the_pool_is_untouched():
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, ReferenceOps())
    fb = forward_batch(runner, DECODE_BATCHES[0])
    before = runner.token_to_kv_pool.k[0].clone()
    q = torch.randn(3, 8 * 64)
    backend.forward_decode(
        q, torch.zeros(3, 2, 64), torch.zeros(3, 2, 64), fake_layer(0), fb, save_kv_cache=False
    )
    assert runner.token_to_kv_pool.writes == 0 and torch.equal(runner.token_to_kv_pool.k[0], before)


# -- the production backend runs the kernels or refuses: never a silent stand-in ----------------


def test_without_a_gpu_the_production_backend_refuses_clearly(monkeypatch):
    def no_gpu():
        raise NoLocalTarget("no GPU: TileLang kernels run on a ROCm or CUDA device only")

    # as on this CPU machine, wherever it runs
    monkeypatch.setattr(sglang_backend, "local_target", no_gpu)
    with pytest.raises(
        UnsupportedByTileLangBackend, match="the tilelang backend cannot run here: no GPU"
    ):
        TileLangAttnBackend(fake_runner())


def test_the_reference_ops_say_what_they_are():
    assert TileLangAttnBackend(fake_runner(), ReferenceOps()).mode == "reference"


# -- what the kernels do not support is refused, with its name ----------------------------------


@dataclass(frozen=True)
class Refusal:
    name: str
    runner: dict
    message: str


MODEL_REFUSALS = [
    Refusal(
        "head-dim-32",
        {"head_dim": 32},
        "model: head_dim 32 unsupported: no TileLang tile config (supported: 64, 128)",
    ),
    Refusal("head-dim-256", {"head_dim": 256}, "head_dim 256 unsupported: no TileLang tile config"),
    Refusal("mla-flag", {"use_mla": True}, "MLA"),
    Refusal(
        "qk-ne-v-head-dim", {"head_dim": 128, "v_head_dim": 64}, "qk_head_dim 128 != v_head_dim 64"
    ),
    Refusal("gqa-8-3", {"kv_heads": 3}, "GQA ratio 8:3 does not divide"),
    Refusal("sliding-window", {"sliding_window": 4096}, "sliding-window attention (window 4096)"),
    Refusal("hybrid-swa", {"hybrid_swa": True}, "hybrid sliding-window"),
    Refusal(
        "encoder-decoder", {"encoder_decoder": True}, "encoder-decoder model (cross attention)"
    ),
]


@pytest.mark.parametrize("case", MODEL_REFUSALS, ids=lambda c: c.name)
def test_unsupported_model_is_refused_at_construction(case):
    with pytest.raises(UnsupportedByTileLangBackend, match=re.escape(case.message)):
        TileLangAttnBackend(fake_runner(**case.runner), ReferenceOps())


LAYER_REFUSALS = [
    Refusal("cross-attention-layer", {"is_cross_attention": True}, "layer 0: cross attention"),
    Refusal(
        "encoder-only-layer",
        {"attn_type": SimpleNamespace(name="ENCODER_ONLY")},
        "layer 0: attention type ENCODER_ONLY",
    ),
    Refusal("sliding-window-layer", {"sliding_window_size": 1024}, "layer 0: sliding window 1024"),
    Refusal("logit-cap-layer", {"logit_cap": 30.0}, "layer 0: logit soft-capping (30.0)"),
    Refusal(
        "head-dim-96-layer",
        {"qk_head_dim": 96, "v_head_dim": 96},
        "layer 0: head_dim 96 unsupported: no TileLang",
    ),
]


@pytest.mark.parametrize("case", LAYER_REFUSALS, ids=lambda c: c.name)
def test_unsupported_layer_is_refused_at_first_forward(case):
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, ReferenceOps())
    fb = forward_batch(runner, DECODE_BATCHES[1])
    with pytest.raises(UnsupportedByTileLangBackend, match=re.escape(case.message)):
        backend.forward_decode(torch.randn(1, 8 * 64), None, None, fake_layer(0, **case.runner), fb)
    assert runner.token_to_kv_pool.writes == 0  # refused before touching the pool


@pytest.mark.parametrize("mode", ["TARGET_VERIFY", "DRAFT_EXTEND_V2", "DLLM_EXTEND"])
def test_speculative_and_other_forward_modes_are_refused(mode):
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, ReferenceOps())
    fb = forward_batch(runner, EXTEND_BATCHES[1])
    fb.forward_mode = SimpleNamespace(name=mode)
    with pytest.raises(UnsupportedByTileLangBackend, match=f"forward mode {mode} is not supported"):
        backend.forward_extend(torch.randn(72, 8 * 64), None, None, fake_layer(0), fb)


# -- what SGLang really hands the backend: views of one fused qkv, RoPE applied in place ----------


def _as_kernel_reads(t: torch.Tensor) -> torch.Tensor:
    """``t``'s memory read the way a kernel given only its data pointer reads it: densely, row-major
    from its first element (what the TileLang paged kernels assume of q, the pools and out)."""
    dense = torch.empty(0, dtype=t.dtype).new_empty(t.shape).stride()
    return torch.as_strided(t, t.shape, dense, t.storage_offset())


def _reference_launch(calls: list):
    """Stands in for ``tilegate.runtime.launch`` on a machine without a GPU: it computes the
    kernels' contract over the raw memory of the tensors handed to it, and writes the output there,
    so a strided view passed through unchanged gives a wrong answer, as a kernel would."""

    def launch(factory, shape, cfg, *tensors, **options):
        calls.append(factory.__name__)
        if factory.__name__ != "paged_extend":
            raise AssertionError(f"only the extend kernel is expected here, got {factory.__name__}")
        q, k_pool, v_pool, r2t, req, lens, new, _starts, out = (
            _as_kernel_reads(t) for t in tensors
        )
        want = ref_paged_extend(
            q, k_pool, v_pool, r2t, req, lens, new, scale=options["softmax_scale"]
        )
        out.copy_(want.to(out.dtype))

    return launch


def _rope_in_place(x: torch.Tensor, positions: torch.Tensor) -> None:
    """Llama's rotary embedding (neox halves), written into ``x`` [tokens, heads, d] in place, as
    SGLang's CUDA rotary kernel writes into its split views of qkv."""
    half = x.shape[-1] // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
    angle = positions[:, None, None].float() * inv_freq
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    first, second = x[..., :half].clone(), x[..., half:].clone()
    x[..., :half] = first * cos - second * sin
    x[..., half:] = second * cos + first * sin


def test_kernel_ops_take_q_k_v_split_from_a_fused_qkv(monkeypatch):
    """Symptom: on CUDA the first extend failed with "q must be contiguous": SGLang splits q, k
    and v from one qkv projection and applies RoPE in place, so q reaches the backend as a
    strided view. Fix: the paged entry points copy q to the kernels' dense layout (one copy); k
    and v go through the pool's own set_kv_buffer."""
    from tilegate.serving import paged

    calls: list = []
    monkeypatch.setattr(sglang_backend, "local_target", lambda: "sm90")
    monkeypatch.setattr(paged, "local_target", lambda: "sm90")
    monkeypatch.setattr(paged, "launch", _reference_launch(calls))
    runner = fake_runner(dtype=torch.bfloat16)
    backend = TileLangAttnBackend(runner)  # the production ops, over the stand-in launch
    layer = fake_layer(1)
    b = EXTEND_BATCHES[1]
    fb = forward_batch(runner, b)
    tokens = fb.out_cache_loc.shape[0]
    qkv = torch.randn(tokens, (8 + 2 + 2) * 64, generator=torch.Generator().manual_seed(3)).to(
        torch.bfloat16
    )
    # as LlamaAttention.forward_prepare_native
    q, k, v = qkv.split([8 * 64, 2 * 64, 2 * 64], dim=-1)
    positions = torch.cat([torch.arange(s - n, s) for s, n in zip(b.seq_lens, b.extend_lens)])
    _rope_in_place(q.view(tokens, 8, 64), positions)
    _rope_in_place(k.view(tokens, 2, 64), positions)
    assert not q.is_contiguous() and q.stride() == (12 * 64, 1)
    k, v = k.view(tokens, 2, 64), v.view(tokens, 2, 64)  # RadixAttention's views, strided too
    pool = runner.token_to_kv_pool
    k_pool, v_pool = pool.k[1].clone(), pool.v[1].clone()
    k_pool[fb.out_cache_loc], v_pool[fb.out_cache_loc] = k, v
    backend.init_forward_metadata(fb)
    out = backend.forward_extend(q, k, v, layer, fb)
    assert calls == ["paged_extend"]
    want = ref_paged_extend(
        q.reshape(tokens, 8, 64).contiguous(),
        k_pool,
        v_pool,
        runner.req_to_token_pool.req_to_token,
        fb.req_pool_indices,
        fb.seq_lens,
        fb.extend_seq_lens,
        scale=layer.scaling,
    )
    assert torch.equal(pool.k[1], k_pool) and torch.equal(pool.v[1], v_pool)
    assert out.dtype == torch.bfloat16 and torch.equal(out.view_as(want), want.to(torch.bfloat16))
