"""Numerics tier: kernel vs FP32 reference, judged against a same-precision torch baseline."""

import pytest
import torch
from suite_helpers import DEVICE, judged, local_default_config, with_configs

from tilegate.fixtures.inputs import nan_padded, random_qkv
from tilegate.fixtures.shapes import (
    RunCase,
    determinism_cases,
    nan_padding_cases,
    numerics_cases,
)
from tilegate.runtime import flash_attention

pytestmark = [pytest.mark.gpu]


@pytest.mark.parametrize("case, cfg", with_configs(numerics_cases()))
def test_matches_fp32_reference(case, cfg, artifacts_dir):
    q, k, v = random_qkv(case, DEVICE)
    out, _, verdict = judged(case, cfg, q, k, v, artifacts_dir)
    assert torch.isfinite(out).all(), f"NaN/Inf in the output: {verdict.explain()}"
    assert verdict.passed, verdict.explain()


NAN_PADDING_CASES = nan_padding_cases()


@pytest.mark.parametrize("case, cfg", with_configs(NAN_PADDING_CASES))
def test_memory_past_the_sequence_is_never_read_or_written(case, cfg):
    # Symptom this catches: a partial tile that loads past seq_k (or writes past seq_q).
    q, k, v = random_qkv(case, DEVICE)
    expected = flash_attention(case.shape, cfg, q, k, v)
    qb, kb, vb = nan_padded(q), nan_padded(k), nan_padded(v)
    outb = torch.full_like(qb, float("nan"))
    n_q, n_k = case.seq_q, case.seq_k
    flash_attention(case.shape, cfg, qb[:, :n_q], kb[:, :n_k], vb[:, :n_k], out=outb[:, :n_q])
    assert torch.equal(outb[:, :n_q], expected), "NaN past the sequence changed the output"
    assert torch.isnan(outb[:, n_q:]).all(), "the kernel wrote past seq_q"


DETERMINISM_CASES = determinism_cases()


@pytest.mark.parametrize("case, cfg", with_configs(DETERMINISM_CASES))
def test_repeated_runs_are_bitwise_equal(case, cfg):
    q, k, v = random_qkv(case, DEVICE)
    first = flash_attention(case.shape, cfg, q, k, v)
    for _ in range(2):
        assert torch.equal(flash_attention(case.shape, cfg, q, k, v), first)


def test_inputs_the_kernel_was_not_built_for_are_rejected():
    case = numerics_cases()[0]
    cfg = local_default_config(case.shape.head_dim)
    q, k, v = random_qkv(RunCase(case.shape, 8, 4), DEVICE)
    with pytest.raises(ValueError, match=r"seq_q \(8\) <= seq_k \(4\)"):
        flash_attention(case.shape, cfg, q, k, v)
    q, k, v = random_qkv(RunCase(case.shape, 4, 4), DEVICE)
    with pytest.raises(ValueError, match="built for"):
        flash_attention(case.shape, cfg, q.float(), k, v)
