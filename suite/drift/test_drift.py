"""Drift tier: error growth with length for the fp32-accumulating kernel and its fp16 twin, in
every mask variant of the prefill family (tilegate.gate.registry.PREFILL_MASKS).

The same detector must pass the first and flag the second, in the same run, wherever the
accumulation spans the context; under a sliding window the error must stay flat instead. Writes
artifacts/drift/<shape>-<config>.json and .png; the run's summary prints the table.
"""

import functools

import pytest
from suite_helpers import DEVICE, local_default_config

from tilegate.artifacts.writer import write_drift
from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase, baseline, reference
from tilegate.gate.registry import PREFILL_MASKS
from tilegate.kernels.configs import fp16_accum_variant
from tilegate.kernels.problem import AttentionShape, Mask
from tilegate.references import tolerances as tol
from tilegate.references.drift import DriftSeries, fp16_accumulation_flags
from tilegate.references.metrics import errors
from tilegate.runtime import flash_attention

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("drift")]


def _shape(mask: Mask) -> AttentionShape:
    return AttentionShape.masked(*LLAMA3_8B, 128, mask, "float16")


def _whole_context(mask: Mask) -> bool:
    """Whether a row's accumulation spans the context up to the longest drift length."""
    return mask.window is None or mask.window + 1 >= max(tol.DRIFT_LENGTHS)


def _params(masks) -> list:
    return [pytest.param(m, id=_shape(m).name) for m in masks]


@functools.cache
def _drift(mask: Mask, artifacts_dir) -> dict[str, DriftSeries]:
    shape = _shape(mask)
    cfg = local_default_config(shape.head_dim)
    variants = {"fp32-acc": cfg, "fp16-acc": fp16_accum_variant(cfg)}
    rel: dict[str, list[float]] = {label: [] for label in variants}
    base = []
    for n in tol.DRIFT_LENGTHS:
        q, k, v = random_qkv(RunCase(shape, n, n), DEVICE)
        ref = reference(shape, q, k, v)
        base.append(errors(baseline(shape, q, k, v), ref).mean_rel)
        for label, c in variants.items():
            rel[label].append(errors(flash_attention(shape, c, q, k, v), ref).mean_rel)
    series = [
        DriftSeries(label, tol.DRIFT_LENGTHS, tuple(errs), tuple(base))
        for label, errs in rel.items()
    ]
    write_drift(artifacts_dir, f"{shape.name}-{cfg.name}", series)
    return {s.label: s for s in series}


@pytest.mark.parametrize("mask", _params(PREFILL_MASKS))
def test_fp32_accumulation_passes_the_drift_detector(mask, artifacts_dir):
    assert fp16_accumulation_flags(_drift(mask, artifacts_dir)["fp32-acc"]) == []


@pytest.mark.parametrize("mask", _params(m for m in PREFILL_MASKS if _whole_context(m)))
def test_fp16_accumulation_is_flagged_by_the_same_detector(mask, artifacts_dir):
    series = _drift(mask, artifacts_dir)["fp16-acc"]
    assert fp16_accumulation_flags(series), series.ratios


@pytest.mark.parametrize("mask", _params(m for m in PREFILL_MASKS if _whole_context(m)))
def test_fp16_accumulation_error_grows_faster_than_fp32(mask, artifacts_dir):
    drift = _drift(mask, artifacts_dir)
    assert drift["fp16-acc"].kernel_slope > drift["fp32-acc"].kernel_slope


@pytest.mark.parametrize("mask", _params(m for m in PREFILL_MASKS if not _whole_context(m)))
def test_a_sliding_window_keeps_the_error_flat(mask, artifacts_dir):
    errs = _drift(mask, artifacts_dir)["fp32-acc"].kernel_rel_err
    spread = max(errs) / min(errs)
    assert spread <= tol.WINDOW_FLAT_SPREAD, (
        f"mean error {min(errs):.3e} to {max(errs):.3e} over {tol.DRIFT_LENGTHS} tokens: "
        f"{spread:.2f}x, over {tol.WINDOW_FLAT_SPREAD}x for a window of {mask.window}"
    )
