"""Adversarial inputs: each generator stresses one failure mode and has its own assertion."""

import pytest
import torch
from suite_helpers import DEVICE, judged, with_configs

from tilegate.fixtures.inputs import dominant_key, identical_keys, large_logits
from tilegate.fixtures.shapes import adversarial_cases, baseline
from tilegate.references.metrics import judge

pytestmark = [pytest.mark.gpu]


@pytest.mark.parametrize("case, cfg", with_configs(adversarial_cases()))
def test_large_logits_stay_finite_and_accurate(case, cfg, artifacts_dir):
    qkv = large_logits(case, DEVICE, seed=1)
    out, _, verdict = judged(case, cfg, *qkv, artifacts_dir, "large_logits", seed=1)
    assert torch.isfinite(out).all()
    assert verdict.passed, verdict.explain()


def _every_row_sees_key_0(case) -> bool:
    window = case.shape.window
    return window is None or window >= case.seq_k - 1


# key 0 dominates the rows that see it: a sliding window hides it from the rows past the window
@pytest.mark.parametrize(
    "case, cfg", with_configs([c for c in adversarial_cases() if _every_row_sees_key_0(c)])
)
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
    # the mean of the values each query sees: keys first..last, last = i + offset when causal
    # (bottom-right), the last key otherwise; first = last - window with a window, else key 0
    vf = v.float().repeat_interleave(case.shape.groups, dim=2)  # [b, sk, hq, d]
    last = (
        torch.arange(case.seq_q, device=v.device) + (case.seq_k - case.seq_q)
        if case.shape.causal
        else torch.full((case.seq_q,), case.seq_k - 1, device=v.device)
    )
    window = case.shape.window
    first = last * 0 if window is None else (last - window).clamp(min=0)
    sums = torch.nn.functional.pad(vf.cumsum(dim=1), (0, 0, 0, 0, 1, 0))  # sums[:, j]: keys < j
    expected = (sums[:, last + 1] - sums[:, first]) / (last - first + 1)[None, :, None, None]
    assert (ref - expected).abs().max() < 1e-3, "the generator no longer makes the softmax uniform"
    assert verdict.passed, verdict.explain()
    # and the kernel against that mean directly, by the same rule as against the reference
    to_mean = judge(out, expected, baseline(case.shape, q, k, v))
    assert to_mean.passed, to_mean.explain()
