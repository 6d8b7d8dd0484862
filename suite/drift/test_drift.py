"""Drift tier: error growth with length for the fp32-accumulating kernel and its fp16 twin.

The same detector must pass the first and flag the second, in the same run. Writes
artifacts/drift/drift.json and drift.png; the run's summary prints the table.
"""

import pytest
from suite_helpers import DEVICE, local_default_config

from tilegate.artifacts.writer import write_drift
from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase
from tilegate.kernels.configs import fp16_accum_variant
from tilegate.kernels.problem import AttentionShape
from tilegate.references import tolerances as tol
from tilegate.references.attention import ref_attention, ref_attention_lowp
from tilegate.references.drift import DriftSeries, fp16_accumulation_flags
from tilegate.references.metrics import errors
from tilegate.runtime import flash_attention

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("drift")]
SHAPE = AttentionShape(*LLAMA3_8B, 128, True, "float16")


@pytest.fixture(scope="module")
def drift(artifacts_dir):
    cfg = local_default_config(SHAPE.head_dim)
    variants = {"fp32-acc": cfg, "fp16-acc": fp16_accum_variant(cfg)}
    rel = {label: [] for label in variants}
    base = []
    for n in tol.DRIFT_LENGTHS:
        case = RunCase(SHAPE, n, n)
        q, k, v = random_qkv(case, DEVICE)
        ref = ref_attention(q, k, v, causal=True)
        base.append(errors(ref_attention_lowp(q, k, v, causal=True), ref).mean_rel)
        for label, c in variants.items():
            rel[label].append(errors(flash_attention(SHAPE, c, q, k, v), ref).mean_rel)
    series = [
        DriftSeries(label, tol.DRIFT_LENGTHS, tuple(errs), tuple(base))
        for label, errs in rel.items()
    ]
    write_drift(artifacts_dir, f"{SHAPE.name}-{cfg.name}", series)
    return {s.label: s for s in series}


def test_fp32_accumulation_passes_the_drift_detector(drift):
    assert fp16_accumulation_flags(drift["fp32-acc"]) == []


def test_fp16_accumulation_is_flagged_by_the_same_detector(drift):
    assert fp16_accumulation_flags(drift["fp16-acc"]), drift["fp16-acc"].ratios


def test_fp16_accumulation_error_grows_faster_than_fp32(drift):
    assert drift["fp16-acc"].kernel_slope > drift["fp32-acc"].kernel_slope
