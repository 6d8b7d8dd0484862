"""The paged references equal the dense reference on the same tokens, wherever they sit in the
pool."""

import torch

from tilegate.fixtures.paged_cases import PagedCase, paged_batch
from tilegate.kernels.problem import AttentionShape
from tilegate.references.attention import ref_attention
from tilegate.references.paged import ref_paged_decode, ref_paged_extend

SHAPE = AttentionShape(8, 2, 64, True, "float16")


def _dense(batch, i, n_new):
    req = int(batch.req_pool_indices[i])
    n = int(batch.seq_lens[i])
    slots = batch.req_to_token[req, :n]
    return batch.k_pool[slots][None], batch.v_pool[slots][None]


def test_extend_equals_dense_attention_per_request():
    case = PagedCase(SHAPE, (1, 40, 9), (1, 13, 9))
    batch = paged_batch(case, "cpu")
    out = ref_paged_extend(*batch.args(False))
    start = 0
    for i, n_new in enumerate(case.extend_lens):
        k, v = _dense(batch, i, n_new)
        want = ref_attention(batch.q[None, start : start + n_new], k, v, causal=True)[0]
        torch.testing.assert_close(out[start : start + n_new], want, rtol=0, atol=0)
        start += n_new
    assert torch.isfinite(out).all()  # the NaN slots nobody owns were never read


def test_decode_is_extend_with_one_new_token():
    case = PagedCase(SHAPE, (3, 50))
    batch = paged_batch(case, "cpu")
    torch.testing.assert_close(
        ref_paged_decode(*batch.args(True)), ref_paged_extend(*batch.args(False)), rtol=0, atol=0
    )


def test_pool_holds_nan_outside_the_batch():
    batch = paged_batch(PagedCase(SHAPE, (4, 6), (4, 6)), "cpu")
    owned = batch.req_to_token[batch.req_pool_indices][:, :6].flatten()
    assert torch.isnan(batch.k_pool[0]).all()  # unused req_to_token entries point at slot 0
    assert (
        torch.isnan(batch.k_pool).any(dim=(1, 2)).sum()
        >= batch.k_pool.shape[0] - owned.unique().numel()
    )
