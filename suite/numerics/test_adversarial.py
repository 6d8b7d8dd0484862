"""Adversarial inputs: each generator stresses one failure mode and has its own assertion."""

import pytest
import torch
from suite_helpers import DEVICE, judged, with_configs

from tilegate.fixtures.inputs import dominant_key, identical_keys, large_logits
from tilegate.fixtures.shapes import adversarial_cases
from tilegate.references.attention import ref_attention_lowp
from tilegate.references.metrics import judge

pytestmark = [pytest.mark.gpu]


@pytest.mark.parametrize("case, cfg", with_configs(adversarial_cases()))
def test_large_logits_stay_finite_and_accurate(case, cfg, artifacts_dir):
    qkv = large_logits(case, DEVICE, seed=1)
    out, _, verdict = judged(case, cfg, *qkv, artifacts_dir, "large_logits", seed=1)
    assert torch.isfinite(out).all()
    assert verdict.passed, verdict.explain()


@pytest.mark.parametrize("case, cfg", with_configs(adversarial_cases()))
def test_dominant_key_selects_its_value(case, cfg, artifacts_dir):
    q, k, v = dominant_key(case, DEVICE, seed=2)
    out, ref, verdict = judged(case, cfg, q, k, v, artifacts_dir, "dominant_key", seed=2)
    v0 = v[:, 0].repeat_interleave(case.shape.groups, dim=1)  # [b, hq, d]
    expected = v0[:, None].expand_as(out).float()
    assert (ref - expected).abs().max() < 1e-6, "the generator no longer makes key 0 dominant"
    torch.testing.assert_close(out.float(), expected, rtol=0, atol=torch.finfo(out.dtype).eps)
    assert verdict.passed, verdict.explain()


@pytest.mark.parametrize("case, cfg", with_configs(adversarial_cases()))
def test_identical_keys_average_the_visible_values(case, cfg, artifacts_dir):
    q, k, v = identical_keys(case, DEVICE, seed=3)
    out, ref, verdict = judged(case, cfg, q, k, v, artifacts_dir, "identical_keys", seed=3)
    # the mean of the values each query sees: keys 0..i+offset when causal (bottom-right), all
    # otherwise
    vf = v.float().repeat_interleave(case.shape.groups, dim=2)  # [b, sk, hq, d]
    visible = (
        torch.arange(case.seq_q, device=v.device) + (case.seq_k - case.seq_q) + 1
        if case.shape.causal
        else torch.full((case.seq_q,), case.seq_k, device=v.device)
    )
    prefix_mean = (
        vf.cumsum(dim=1) / torch.arange(1, case.seq_k + 1, device=v.device)[None, :, None, None]
    )
    expected = prefix_mean[:, visible - 1]  # [b, sq, hq, d]
    assert (ref - expected).abs().max() < 1e-3, "the generator no longer makes the softmax uniform"
    assert verdict.passed, verdict.explain()
    # and the kernel against that mean directly, by the same rule as against the reference
    to_mean = judge(out, expected, ref_attention_lowp(q, k, v, causal=case.shape.causal))
    assert to_mean.passed, to_mean.explain()
