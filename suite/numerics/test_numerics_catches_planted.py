"""The numerics tier fails kernels with planted bugs: a check that cannot fail is no check."""

import pytest
import torch
from suite_helpers import DEVICE, local_default_config

from tilegate.fixtures.inputs import random_qkv
from tilegate.fixtures.shapes import LLAMA3_8B, RunCase, baseline, reference
from tilegate.gate.builds import phase_builds
from tilegate.gate.planted import WINDOW_DEFECTS, PrefillDefect, knobs_for
from tilegate.gate.registry import PREFILL_MASKS
from tilegate.kernels.configs import configs_for
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import SHIPPING_TARGET
from tilegate.references.metrics import judge
from tilegate.runtime import flash_attention

# Catalog lengths with a partial last key block (129 = 2 x 64 + 1, 3782 = 59 x 64 + 6).
# A bug may hide at one length (dropping 6 of 3782 causal keys moved the output by 0.99
# of the bound on the H200) and not at another: the tier fails if any case fails.
# Every mask variant flash_fwd implements is a detection case.
CASES = [
    RunCase(AttentionShape.masked(*LLAMA3_8B, 128, mask, "float16"), n, n)
    for mask in PREFILL_MASKS
    for n in (129, 3782)
]
DEFECTS = [
    PrefillDefect.WRONG_SCALE,
    PrefillDefect.CAUSAL_OFF_BY_ONE,
    PrefillDefect.DROP_LAST_BLOCK,
    PrefillDefect.WINDOW_START_PAST_TILE_EDGE,
]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.xdist_group("planted"),
    pytest.mark.builds(
        *(
            b
            for case in CASES
            for defect in (None, *DEFECTS)
            for b in phase_builds("prefill", case.shape, defect=defect)
        )
    ),
]


def _tier_failures(defect=None, cfg=None, cases=CASES) -> list[str]:
    """The detection cases that fail, with ``cfg`` (default: the local default config)."""
    failures = []
    for case in cases:
        tile = cfg or local_default_config(case.shape.head_dim)
        q, k, v = random_qkv(case, DEVICE)
        ref = reference(case.shape, q, k, v)
        base = baseline(case.shape, q, k, v)
        out = torch.full_like(q, float("nan"))  # an element the kernel leaves unwritten stays NaN
        verdict = judge(
            flash_attention(case.shape, tile, q, k, v, out=out, knobs=knobs_for(defect)), ref, base
        )
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


# A defect in a window's code, which only windowed cases may catch: the cases without a window run
# the healthy program (the defect's hook is not built there).
@pytest.mark.parametrize("defect", WINDOW_DEFECTS)
def test_a_variant_defect_leaves_the_other_variants_cases_passing(defect):
    others = [case for case in CASES if case.shape.window is None]
    assert others, "every detection case has a window"
    assert _tier_failures(defect, cases=others) == []


# The shipping table's own bug: gfx942 configs store Out straight from registers (q_in_registers),
# the sm90 ones through shared memory, so only a gfx942 program can drop its last query row there.
# It runs wherever a GPU runs the gfx942 programs (cross-target on the H200, natively on MI300X).
SHIPPING_DEFECT = PrefillDefect.REGISTER_STORE_SKIPS_LAST_ROW
SHIPPING_CONFIGS = configs_for(SHIPPING_TARGET, 128)


@pytest.mark.config_target(SHIPPING_TARGET)
@pytest.mark.parametrize("cfg", SHIPPING_CONFIGS, ids=[cfg.name for cfg in SHIPPING_CONFIGS])
@pytest.mark.builds(
    *(
        b
        for cfg in SHIPPING_CONFIGS
        for case in CASES
        for defect in (None, SHIPPING_DEFECT)
        for b in phase_builds("prefill", case.shape, cfg, defect=defect)
    )
)
def test_gfx942_only_bug_fails_the_numerics_tier(cfg):
    assert _tier_failures(cfg=cfg) == []  # the same program, healthy, passes
    failures = _tier_failures(SHIPPING_DEFECT, cfg)
    assert failures, f"{SHIPPING_DEFECT} passed every case with {cfg.name}"
    print(f"{SHIPPING_DEFECT} caught with {cfg.name} at:", *failures, sep="\n  ")
