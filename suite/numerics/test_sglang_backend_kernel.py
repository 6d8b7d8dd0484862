"""The tilelang SGLang backend with its production ops (the kernels), on the GPU: the same fake
runner and batches as suite/serving/test_sglang_backend.py, with the pools on the device and the
TileLang paged kernels answering, judged against the FP32 paged reference like every numerics
check."""

import pytest
import torch
from suite_helpers import (
    DECODE_BATCHES,
    DEVICE,
    EXTEND_BATCHES,
    causal_builds,
    fake_layer,
    fake_runner,
    forward_batch,
)

from tilegate.references.metrics import judge
from tilegate.references.paged import baseline_paged_extend, ref_paged_decode, ref_paged_extend
from tilegate.serving.sglang_backend import TileLangAttnBackend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.xdist_group("sglang-backend-kernel"),
    causal_builds(8, 2, 64, "extend", "decode"),
]  # fake_layer's heads


def _on_device(runner):
    runner.device = DEVICE
    runner.req_to_token_pool.req_to_token = runner.req_to_token_pool.req_to_token.to(DEVICE)
    pool = runner.token_to_kv_pool
    pool.k, pool.v = [t.to(DEVICE) for t in pool.k], [t.to(DEVICE) for t in pool.v]
    return runner


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("b", EXTEND_BATCHES + DECODE_BATCHES, ids=lambda b: b.name)
def test_kernel_mode_matches_fp32_reference(b, dtype):
    runner = _on_device(fake_runner(dtype=dtype))
    backend = TileLangAttnBackend(runner)  # the production ops: the kernels
    layer = fake_layer(1)
    fb = forward_batch(runner, b)
    for name in (
        "out_cache_loc",
        "req_pool_indices",
        "seq_lens",
        "extend_seq_lens",
        "extend_prefix_lens",
    ):
        if getattr(fb, name) is not None:
            setattr(fb, name, getattr(fb, name).to(DEVICE))
    tokens = fb.out_cache_loc.shape[0]
    gen = torch.Generator(device=DEVICE).manual_seed(1)
    q = torch.randn(tokens, 8 * 64, generator=gen, device=DEVICE).to(dtype)
    k = torch.randn(tokens, 2, 64, generator=gen, device=DEVICE).to(dtype)
    v = torch.randn(tokens, 2, 64, generator=gen, device=DEVICE).to(dtype)
    backend.init_forward_metadata(fb)
    out = (backend.forward_decode if b.decode else backend.forward_extend)(q, k, v, layer, fb)
    pool = runner.token_to_kv_pool
    args = (
        q.view(tokens, 8, 64),
        pool.k[1],
        pool.v[1],
        runner.req_to_token_pool.req_to_token,
        fb.req_pool_indices,
        fb.seq_lens,
    )
    new = torch.ones_like(fb.seq_lens) if b.decode else fb.extend_seq_lens
    ref = (
        ref_paged_decode(*args, scale=layer.scaling)
        if b.decode
        else ref_paged_extend(*args, new, scale=layer.scaling)
    )
    assert out.dtype == dtype and out.shape == (tokens, 8 * 64)
    verdict = judge(out.view_as(ref), ref, baseline_paged_extend(*args, new))
    assert verdict.passed, verdict.explain()
