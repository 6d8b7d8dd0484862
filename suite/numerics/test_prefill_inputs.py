"""The prefill's launch path refuses what the kernel was not built for. Its numerics, NaN padding,
adversarial inputs and determinism are the dense family's cases (tilegate/families/dense.py), run on
it as on any dense kernel (tilegate/families/own.py, suite/families/test_kernels.py)."""

import pytest
from suite_helpers import DEVICE, local_default_config

from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import RunCase, numerics_cases
from tilegate.runtime import flash_attention

pytestmark = [pytest.mark.gpu]


def test_inputs_the_kernel_was_not_built_for_are_rejected():
    case = numerics_cases()[0]
    cfg = local_default_config(case.shape.head_dim)
    q, k, v = random_qkv(RunCase(case.shape, 8, 4), DEVICE)
    with pytest.raises(ValueError, match=r"seq_q \(8\) <= seq_k \(4\)"):
        flash_attention(case.shape, cfg, q, k, v)
    q, k, v = random_qkv(RunCase(case.shape, 4, 4), DEVICE)
    with pytest.raises(ValueError, match="built for"):
        flash_attention(case.shape, cfg, q.float(), k, v)
