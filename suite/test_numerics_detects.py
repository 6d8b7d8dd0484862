"""The numerics tier fails kernels with planted bugs: a check that cannot fail is no check."""

import pytest

from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase
from tilegate.kernels.problem import AttentionShape
from tilegate.references.attention import ref_attention, ref_attention_lowp
from tilegate.references.metrics import judge
from tilegate.runtime import flash_attention
from tilegate.suite.gpu_cases import first_config
from tilegate.suite.test_numerics import DEVICE

pytestmark = [pytest.mark.gpu, pytest.mark.numerics]
# 3782 = 59 x 64 + 6: the last key block is partial, so dropping it changes the answer.
CASE = RunCase(AttentionShape(*LLAMA3_8B, 128, True, "float16"), 3782, 3782)


@pytest.mark.parametrize("defect", ["wrong_scale", "causal_off_by_one", "drop_last_block"])
def test_planted_bug_fails_the_numerics_judge(defect):
    cfg = first_config(CASE.shape.head_dim)
    q, k, v = random_qkv(CASE, DEVICE)
    ref = ref_attention(q, k, v, causal=True)
    base = ref_attention_lowp(q, k, v, causal=True)
    assert judge(flash_attention(CASE.shape, cfg, q, k, v), ref, base).passed  # the healthy kernel passes
    verdict = judge(flash_attention(CASE.shape, cfg, q, k, v, defect=defect), ref, base)
    assert not verdict.passed, f"{defect} slipped through: {verdict.explain()}"
