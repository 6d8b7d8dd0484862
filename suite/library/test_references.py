"""The references are checked before they judge anything: chunking, precision, masking, GQA."""

import pytest
import torch

from tilegate.references.attention import ref_attention, ref_attention_lowp


def _inputs(b=2, sq=37, sk=53, hq=8, hkv=2, d=64, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, hq, d, generator=g).to(dtype)
    k = torch.randn(b, sk, hkv, d, generator=g).to(dtype)
    v = torch.randn(b, sk, hkv, d, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize("causal", [True, False])
def test_chunked_equals_unchunked(causal):
    q, k, v = _inputs()
    whole = ref_attention(q, k, v, causal=causal, chunk=10_000)
    chunked = ref_attention(q, k, v, causal=causal, chunk=7)
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_fp32_reference_within_bound_of_fp64(causal):
    # FP32 unit roundoff is 6e-8; a softmax over 53 keys and a 64-term dot product stay
    # far inside 1e-5 absolute for O(1) inputs.
    q, k, v = _inputs()
    fp64 = ref_attention(q, k, v, causal=causal, precision=torch.float64)
    fp32 = ref_attention(q, k, v, causal=causal)
    assert fp32.dtype == torch.float32
    assert (fp32.double() - fp64).abs().max().item() < 1e-5


def test_fp16_baseline_is_measurably_worse_than_fp32():
    q, k, v = _inputs()
    fp64 = ref_attention(q, k, v, causal=True, precision=torch.float64)
    err32 = (ref_attention(q, k, v, causal=True).double() - fp64).abs().max()
    err16 = (ref_attention_lowp(q, k, v, causal=True).double() - fp64).abs().max()
    assert ref_attention_lowp(q, k, v, causal=True).dtype == torch.float16
    assert err16 > 10 * err32


def test_causal_is_bottom_right_aligned():
    q, k, v = _inputs(sq=5, sk=12)
    out = ref_attention(q, k, v, causal=True, precision=torch.float64)
    # The last query row is the last token: it sees every key, as without a mask.
    full = ref_attention(q, k, v, causal=False, precision=torch.float64)
    torch.testing.assert_close(out[:, -1], full[:, -1])
    # The first query row sits at position 7: keys 8.. must not matter.
    k2, v2 = k.clone(), v.clone()
    k2[:, 8:], v2[:, 8:] = 100.0, -100.0
    again = ref_attention(q, k2, v2, causal=True, precision=torch.float64)
    torch.testing.assert_close(again[:, 0], out[:, 0])
    assert not torch.allclose(again[:, 1], out[:, 1])  # row 1 (position 8) does see key 8


def test_single_query_over_one_key_returns_that_value():
    q, k, v = _inputs(sq=1, sk=1)
    out = ref_attention(q, k, v, causal=True)
    torch.testing.assert_close(out, v.float().repeat_interleave(4, dim=2))


def test_gqa_equals_mha_with_repeated_kv_heads():
    q, k, v = _inputs(hq=8, hkv=2)
    gqa = ref_attention(q, k, v, causal=True)
    mha = ref_attention(
        q, k.repeat_interleave(4, dim=2), v.repeat_interleave(4, dim=2), causal=True
    )
    torch.testing.assert_close(gqa, mha, rtol=0, atol=0)


def test_matches_torch_sdpa():
    q, k, v = _inputs(sq=53, sk=53, hq=4, hkv=4)
    ours = ref_attention(q, k, v, causal=True, precision=torch.float64)
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.double().transpose(1, 2),
        k.double().transpose(1, 2),
        v.double().transpose(1, 2),
        is_causal=True,
    ).transpose(1, 2)
    torch.testing.assert_close(ours, sdpa)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 4, 8, 64), (1, 4, 3, 64)), "GQA ratio 8:3"),
        (((1, 9, 8, 64), (1, 4, 2, 64)), "seq_q 9 > seq_k 4"),
        (((1, 4, 8, 64), (1, 4, 2, 32)), "expected q"),
    ],
)
def test_bad_inputs_raise(shapes, message):
    qs, ks = shapes
    with pytest.raises(ValueError, match=message):
        ref_attention(torch.zeros(qs), torch.zeros(ks), torch.zeros(ks), causal=True)


def test_32k_never_builds_a_full_score_matrix(monkeypatch):
    # Every matmul the reference makes is bounded by chunk x seq_k, never seq_q x seq_k.
    seen = []
    real = torch.matmul
    monkeypatch.setattr(
        torch, "matmul", lambda a, b: seen.append(a.shape[-2] * b.shape[-1]) or real(a, b)
    )
    q, k, v = _inputs(b=1, sq=4096, sk=4096, hq=1, hkv=1, d=16, dtype=torch.float32)
    ref_attention(q, k, v, causal=True, chunk=512)
    assert max(seen) <= 512 * 4096


def test_a_step_s_scores_stay_within_their_budget_at_any_length(monkeypatch):
    # Symptom: 1024 query rows a step over 32768 keys at 32 heads is a 4 GiB score matrix, and the
    # softmax and the mask make two more: on an 80 GB H100, six workers ran out of memory in the
    # reference, not the kernel. Fix: the rows a step takes follow from a byte budget.
    from tilegate.references.attention import SCORE_BYTES, rows_per_step

    assert rows_per_step(1, 32, 32768, torch.float32) * 32 * 32768 * 4 <= SCORE_BYTES
    assert rows_per_step(1, 32, 32768, torch.float32) >= 64  # not one row a step either
    assert rows_per_step(64, 64, 2**24, torch.float64) == 1
    seen = []
    real = torch.matmul
    monkeypatch.setattr(
        torch, "matmul", lambda a, b: seen.append(a.shape[:-1].numel() * b.shape[-1]) or real(a, b)
    )
    q, k, v = _inputs(b=1, sq=4096, sk=4096, hq=8, hkv=2, d=16, dtype=torch.float32)
    got = ref_attention(q, k, v, causal=True)
    assert max(seen) * 4 <= SCORE_BYTES < 8 * 4096 * 4096 * 4  # more than one step was needed
    monkeypatch.setattr(torch, "matmul", real)
    whole = ref_attention(q, k, v, causal=True, chunk=4096)
    torch.testing.assert_close(got, whole, rtol=0, atol=1e-6)


def _masked_softmax(q, k, v, visible):
    """Attention over an explicit [sq, sk] mask, in float64: the window's reference checked by
    nothing the reference shares."""
    groups = q.shape[2] // k.shape[2]
    kh = k.double().repeat_interleave(groups, dim=2)
    vh = v.double().repeat_interleave(groups, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), kh) * q.shape[3] ** -0.5
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", weights, vh)


@pytest.mark.parametrize("window", [0, 1, 5, 20, 52, 100])
def test_a_window_keeps_the_keys_at_most_window_before_the_diagonal(window):
    q, k, v = _inputs(sq=37, sk=53)
    rows = torch.arange(37)[:, None] + (53 - 37)  # bottom-right diagonal
    keys = torch.arange(53)[None, :]
    visible = (keys <= rows) & (rows <= keys + window)  # SGLang: q_id <= kv_id + window
    want = _masked_softmax(q, k, v, visible)
    got = ref_attention(q, k, v, causal=True, window=window, precision=torch.float64, chunk=7)
    torch.testing.assert_close(got, want)


def test_a_window_of_0_returns_each_rows_own_value_and_a_long_one_the_causal_output():
    q, k, v = _inputs(sq=9, sk=9, hq=2, hkv=2)
    own = ref_attention(q, k, v, causal=True, window=0, precision=torch.float64)
    torch.testing.assert_close(own, v.double())
    long = ref_attention(q, k, v, causal=True, window=8, precision=torch.float64)
    torch.testing.assert_close(long, ref_attention(q, k, v, causal=True, precision=torch.float64))
    assert not torch.allclose(
        ref_attention(q, k, v, causal=True, window=7, precision=torch.float64), long
    )


@pytest.mark.parametrize("causal, window", [(False, 4), (True, -1)])
def test_a_window_without_a_causal_mask_or_below_0_is_refused(causal, window):
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="causal mask only"):
        ref_attention(q, k, v, causal=causal, window=window)
