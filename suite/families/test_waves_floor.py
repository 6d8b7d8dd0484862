"""The waves/SIMD floor of an adapted kernel's ISA expectations: one number for every build, or one
per head_dim as the gate's own kernels have (2 at d64, 1 at d128; issue 37, item 4). The scores
kernel of suite/families/usual/autotuned.py (loaded by path), built for gfx942 on the CPU at d64 and
d128."""

import pytest

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    KernelDeclarationError,
    Problem,
    Provenance,
    params,
)
from tilegate.families.case import KernelBuild
from tilegate.families.verdicts import KnownFinding
from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.isa_checks import MIN_WAVES_PER_SIMD
from tilegate.testing.kernel_tiers import test_kernel_isa as isa_tier

pytestmark = pytest.mark.isa

SOURCE = REPO_ROOT / "suite" / "families" / "usual" / "autotuned.py"
CFG = Config("m64n64", kwargs=params(block_m=64, block_n=64, threads=128), threads=128)
PROBLEMS = tuple(
    Problem(f"d{d}", dtype="bfloat16", head_dim=d, mask="full", args=(d,)) for d in (64, 128)
)


def kernel(floor) -> Kernel:
    return Kernel(
        name="waves-scores",
        provenance=Provenance("tilegate_test_waves_scores", path=str(SOURCE)),
        factory="scores",
        configs={"gfx942": (CFG,)},
        problems=PROBLEMS,
        capabilities=Capabilities(
            dtypes=("bfloat16",), head_dims=(64, 128), masks=("full",), compile_time=()
        ),
        isa=IsaExpectations(
            mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=floor
        ),
        lds_estimate=lambda p, c: (64 + 64) * p.head_dim * 2,
    )


def test_a_floor_per_head_dim_must_name_exactly_the_problems_head_dims():
    assert [kernel(MIN_WAVES_PER_SIMD).isa.waves_floor(p.head_dim) for p in PROBLEMS] == [2.0, 1.0]
    assert kernel(1.0).isa.waves_floor(576) == 1.0  # one number: every build
    with pytest.raises(KernelDeclarationError) as info:
        kernel({128: 1.0})
    assert str(info.value).endswith(
        "Kernel 'waves-scores': isa.min_waves_per_simd has floors for head_dims [128], its "
        "problems build [64, 128]: one floor for each, or one number for every build"
    )
    with pytest.raises(KernelDeclarationError, match=r"floors for head_dims \[64, 128, 576\]"):
        kernel({**MIN_WAVES_PER_SIMD, 576: 1.0})


def _isa(builder, artifacts_dir, floor, problem: Problem) -> None:
    isa_tier(builder, artifacts_dir, KernelBuild.of(kernel(floor), problem, CFG, "gfx942"))


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_the_isa_tier_judges_each_build_by_its_head_dims_floor(builder, artifacts_dir, problem):
    # Symptom: one floor per kernel: 2 failed its d128 builds (1 wave/SIMD, LDS-bound), 1 let its
    # d64 builds fall to 1. Fix: a floor per head_dim, like the gate's own kernels.
    _isa(builder, artifacts_dir, MIN_WAVES_PER_SIMD, problem)  # 2.0 at d64, 1.0 at d128: passes
    _isa(builder, artifacts_dir, 1.0, problem)  # one number, still valid
    with pytest.raises(AssertionError) as info:
        _isa(builder, artifacts_dir, {64: 4.0, 128: 2.0}, problem)
    assert not isinstance(info.value, KnownFinding)
    want = {
        64: "2.0 at waves-scores-d64-m64n64 (head_dim 64), want >= 4.0",
        128: "1.0 at waves-scores-d128-m64n64 (head_dim 128), want >= 2.0",
    }[problem.head_dim]
    assert f"waves-per-simd: {want}" in str(info.value)
