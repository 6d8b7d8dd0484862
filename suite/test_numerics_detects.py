"""The numerics tier fails kernels with planted bugs: a check that cannot fail is no check."""

import pytest
from suite_helpers import DEVICE, local_default_config

from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase
from tilegate.kernels.problem import AttentionShape
from tilegate.references.attention import ref_attention, ref_attention_lowp
from tilegate.references.metrics import judge
from tilegate.runtime import flash_attention
from tilegate.testing.precompile import kind_builds

# Catalog lengths with a partial last key block (129 = 2 x 64 + 1, 3782 = 59 x 64 + 6).
# A bug may hide at one length (dropping 6 of 3782 causal keys moved the output by 0.99
# of the bound on the H200) and not at another: the tier fails if any case fails.
CASES = [RunCase(AttentionShape(*LLAMA3_8B, 128, causal, "float16"), n, n)
         for causal in (True, False) for n in (129, 3782)]
DEFECTS = ["wrong_scale", "causal_off_by_one", "drop_last_block"]
pytestmark = [pytest.mark.gpu, pytest.mark.numerics, pytest.mark.xdist_group("planted"),
              pytest.mark.builds(*(b for case in CASES for defect in (None, *DEFECTS)
                                   for b in kind_builds("flash_fwd", case.shape, defect=defect)))]


def _tier_failures(defect=None) -> list[str]:
    failures = []
    for case in CASES:
        cfg = local_default_config(case.shape.head_dim)
        q, k, v = random_qkv(case, DEVICE)
        ref = ref_attention(q, k, v, causal=case.shape.causal)
        base = ref_attention_lowp(q, k, v, causal=case.shape.causal)
        verdict = judge(flash_attention(case.shape, cfg, q, k, v, defect=defect), ref, base)
        if not verdict.passed:
            failures.append(f"{case.name}: {verdict.explain()}")
    return failures


def test_healthy_kernel_passes_the_detection_cases():
    assert _tier_failures() == []


@pytest.mark.parametrize("defect", DEFECTS)
def test_planted_bug_fails_the_numerics_tier(defect):
    failures = _tier_failures(defect)
    assert failures, f"{defect} passed every case"
    print(f"{defect} caught at:", *failures, sep="\n  ")
