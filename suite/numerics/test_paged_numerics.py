"""Paged extend and decode kernels against the FP32 paged reference (GPU).

Same judge as the dense kernel: error vs FP32 at most 2x plain torch's in the same dtype.
Pools are NaN wherever the batch owns nothing, and req_to_token is shuffled.
"""

import pytest
import torch
from suite_helpers import DEVICE, failure_row, table_target, with_configs, with_context

from tilegate.fixtures.paged_cases import (
    DECODE_CASES,
    EXTEND_CASES,
    LARGE_LOGIT_CASES,
    LARGE_LOGIT_SEED,
    PagedCase,
    large_logit_batch,
    paged_batch,
)
from tilegate.gate.tile_site import paged_site
from tilegate.kernels.configs import DECODE_TABLES, EXTEND_TABLES
from tilegate.references.metrics import judge
from tilegate.references.paged import baseline_paged_extend, ref_paged_decode, ref_paged_extend
from tilegate.serving.paged import paged_decode, paged_extend

pytestmark = [pytest.mark.gpu, pytest.mark.decode]


def _params(cases, tables, kind):
    return with_configs(cases, tables=tables, kind=kind)


def _judge(case: PagedCase, cfg, batch, artifacts_dir, label="", splits=None, seed=0):
    decode = case.extend_lens is None
    args = batch.args(decode)
    out = paged_decode(*args, cfg=cfg, splits=splits) if decode else paged_extend(*args, cfg=cfg)
    if decode:
        ref = ref_paged_decode(*args)
    else:
        ref = ref_paged_extend(*args)
    base = baseline_paged_extend(*batch.args(False))  # decode is extend with one new token each
    verdict = judge(out, ref, base, ("request" if decode else "token", "head", "col"))
    at = failure_row(verdict)
    block_m = 1 if decode else cfg.block_m  # a decode query is one row
    site = "" if at is None else paged_site(
        at[0], case.seq_lens, case.extend_lens, block_m, cfg.block_n
    )  # fmt: skip
    tables = DECODE_TABLES if decode else EXTEND_TABLES
    verdict = with_context(
        verdict,
        artifacts_dir,
        f"{case.name}-{cfg.name}{label}",
        case.shape.dtype,
        site=site,
        seed=seed,
        target=table_target(cfg, case.shape.head_dim, tables),
    )
    return out, verdict


@pytest.mark.parametrize("case, cfg", _params(EXTEND_CASES, EXTEND_TABLES, "extend"))
def test_paged_extend_matches_fp32_reference(case, cfg, artifacts_dir):
    out, verdict = _judge(case, cfg, paged_batch(case, DEVICE), artifacts_dir)
    assert torch.isfinite(out).all(), (
        f"NaN/Inf: the kernel read a pool slot the batch does not own\n{verdict.explain()}"
    )
    assert verdict.passed, verdict.explain()


# A launch's split count follows its batch size (tilegate/serving/decode_schedule.py): every case
# also runs at one split (the output written directly, no combine), at two (a combine that serving
# uses at large batches) and at the config's most.
SPLITS = {"scheduled": None, "one": 1, "two": 2, "most": -1}


@pytest.mark.parametrize("splits", SPLITS.values(), ids=SPLITS.keys())
@pytest.mark.parametrize("case, cfg", _params(DECODE_CASES, DECODE_TABLES, "decode"))
def test_paged_decode_matches_fp32_reference(case, cfg, splits, artifacts_dir):
    splits = cfg.num_splits if splits == -1 else splits
    label = "" if splits is None else f"-splits{splits}"
    out, verdict = _judge(case, cfg, paged_batch(case, DEVICE), artifacts_dir, label, splits)
    assert torch.isfinite(out).all(), (
        f"NaN/Inf: the kernel read a pool slot the batch does not own\n{verdict.explain()}"
    )
    assert verdict.passed, verdict.explain()


@pytest.mark.parametrize("case, cfg", _params(LARGE_LOGIT_CASES, DECODE_TABLES, "decode"))
def test_split_kv_combine_survives_large_logits(case, cfg, artifacts_dir):
    # q and k x8: per-split maxima differ by hundreds, so a combine without the global max
    # overflows fp32 and one that mixes bases (e vs 2) is visibly wrong.
    out, verdict = _judge(
        case,
        cfg,
        large_logit_batch(case, DEVICE),
        artifacts_dir,
        "-large_logits",
        splits=cfg.num_splits,  # the combine runs whatever the device's schedule
        seed=LARGE_LOGIT_SEED,
    )
    assert torch.isfinite(out).all(), verdict.explain()
    assert verdict.passed, verdict.explain()


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
