"""Compile tier: every kernel x config lowers for gfx942, and for the local GPU when there is one."""

import pytest
from tilegate.fixtures.compile_cases import cases
from tilegate.kernels.configs import TARGETS
from tilegate.kernels.registry import KERNELS

GFX942_CASES = cases("gfx942")


@pytest.mark.compile
@pytest.mark.parametrize("case", GFX942_CASES, ids=lambda c: c.name)
def test_lowers_for_gfx942(builder, case):
    lowered = builder.lowered(case)
    src = lowered.source
    assert f"__launch_bounds__({case.threads})" in src
    if KERNELS[case.kernel].uses_mfma:
        mfma = "__builtin_amdgcn_mfma_f32_16x16x16" + ("f16" if case.shape.dtype == "float16" else "bf16")
        assert mfma in src, f"TileLang did not emit {mfma}"
        assert 0 < lowered.lds_bytes, "TileLang reported no shared memory for a tiled kernel"


@pytest.mark.compile
@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_compiles_for_the_local_gpu(platform, head_dim):
    import tilelang
    from tilegate.fixtures.compile_cases import shapes

    target = platform.config_target
    assert target is not None, f"no tile-config table for {platform.describe()}: add one to kernels/configs.py"
    for name, spec in KERNELS.items():
        for cfg in spec.config_tables[target][head_dim]:
            for shape in shapes(head_dim, spec.causal_variants):
                cfg.validate(TARGETS[target], shape)
                kernel = tilelang.compile(spec.factory(shape, cfg), out_idx=None)
                assert kernel is not None, f"{name} {shape.name} {cfg.name}"
