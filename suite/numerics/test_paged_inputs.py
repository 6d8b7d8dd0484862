"""The paged launch path: a decode is an extend of one token, and bad inputs get clear errors.
The paged kernels' numerics (every config of every table, a decode's split counts, large logits)
are the paged family's cases (tilegate/families/paged.py), run on them as on any paged kernel
(tilegate/families/own.py, suite/families/test_kernels.py)."""

import pytest
import torch
from suite_helpers import DEVICE

from tilegate.fixtures.paged_cases import DECODE_CASES, PagedCase, paged_batch
from tilegate.references.paged import ref_paged_decode
from tilegate.serving.paged import paged_decode, paged_extend

pytestmark = [pytest.mark.gpu, pytest.mark.decode]


def test_decode_matches_extend_of_one_token():
    case = PagedCase(DECODE_CASES[4].shape, (1, 3782, 17))
    batch = paged_batch(case, DEVICE)
    decode = paged_decode(*batch.args(True))
    extend = paged_extend(*batch.args(False))
    ref = ref_paged_decode(*batch.args(True))
    assert (decode.float() - ref).abs().max() <= 2 * (extend.float() - ref).abs().max() + 1e-3


def test_bad_paged_inputs_raise_clear_errors():
    case = PagedCase(DECODE_CASES[4].shape, (5, 9), (2, 9))
    batch = paged_batch(case, DEVICE)
    with pytest.raises(ValueError, match="extend_lens add up to"):
        paged_extend(batch.q[:-1], *batch.args(False)[1:])
    bad = batch.args(False)
    with pytest.raises(ValueError, match="1 <= extend_len <= seq_len"):
        paged_extend(*bad[:-1], torch.tensor([2, 10], device=DEVICE))
    with pytest.raises(ValueError, match="need one of fp16/bf16"):
        paged_extend(batch.q.float(), *bad[1:])
