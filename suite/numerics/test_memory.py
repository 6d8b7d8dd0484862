"""No kernel allocates O(seq^2) intermediates: peak device memory of a 32k call."""

import pytest
import torch
from suite_helpers import DEVICE, with_configs

from tilegate.artifacts.writer import record_memory
from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase
from tilegate.gate.registry import PREFILL_MASKS
from tilegate.kernels.problem import AttentionShape
from tilegate.references import tolerances as tol
from tilegate.runtime import flash_attention

pytestmark = [pytest.mark.gpu]
CASES = [
    RunCase(AttentionShape.masked(*LLAMA3_8B, 128, mask, "float16"), 32768, 32768)
    for mask in PREFILL_MASKS
]


@pytest.mark.parametrize("case, cfg", with_configs(CASES))
def test_32k_call_allocates_no_workspace(case, cfg, artifacts_dir):
    q, k, v = random_qkv(case, DEVICE)
    out = torch.empty_like(q)
    flash_attention(case.shape, cfg, q, k, v, out=out)  # compile and warm up outside the window
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    flash_attention(case.shape, cfg, q, k, v, out=out)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    io_bytes = sum(t.numel() * t.element_size() for t in (q, k, v, out))
    record_memory(artifacts_dir, f"{case.name}-{cfg.name}", io_bytes, extra)
    # what one fp16 score matrix would take
    scores_bytes = case.seq_q * case.seq_k * case.shape.q_heads * 2
    assert extra <= tol.WORKSPACE_LIMIT_BYTES, (
        f"{extra} bytes allocated during the call (a score matrix is {scores_bytes})"
    )
