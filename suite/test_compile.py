"""Compile tier: every kernel x config lowers for gfx942, and for the local GPU when there is one."""

import re

import pytest
from suite_helpers import build_params

from tilegate.fixtures.compile_cases import cases, shapes
from tilegate.kernels.configs import TARGETS
from tilegate.kernels.registry import KERNELS
from tilegate.testing.precompile import EVERY, Build

GFX942_CASES = cases("gfx942")


@pytest.mark.compile
@pytest.mark.parametrize("case", build_params(GFX942_CASES))
def test_lowers_for_gfx942(builder, case):
    lowered = builder.lowered(case)
    src = lowered.source
    assert f"__launch_bounds__({case.threads})" in src
    if KERNELS[case.kernel].uses_mfma:
        mfma = "__builtin_amdgcn_mfma_f32_16x16x16" + ("f16" if case.shape.dtype == "float16" else "bf16")
        assert mfma in src, f"TileLang did not emit {mfma}"
        assert 0 < lowered.lds_bytes, "TileLang reported no shared memory for a tiled kernel"


def _local_gpu_params() -> list:
    """(kernel, head_dim) params, each declaring every config of the local table on every shape
    class as its builds (compiled ahead of the run, tilegate/testing/precompile.py)."""
    return [pytest.param(name, head_dim, id=f"{name}-d{head_dim}", marks=pytest.mark.builds(
                *(Build(name, shape, EVERY) for shape in shapes(head_dim, KERNELS[name].causal_variants))))
            for name in sorted(KERNELS) for head_dim in (64, 128)]


@pytest.mark.compile
@pytest.mark.gpu
@pytest.mark.parametrize("name, head_dim", _local_gpu_params())
def test_compiles_for_the_local_gpu(name, head_dim):
    from tilegate.platform import local_target
    from tilegate.runtime import compiled

    target = local_target()  # NoLocalTarget names a GPU without a config table
    spec = KERNELS[name]
    configs = spec.config_tables[target][head_dim]
    assert configs, f"{name} has no {target} config for head_dim {head_dim}"
    for cfg in configs:
        for shape in shapes(head_dim, spec.causal_variants):
            cfg.validate(TARGETS[target], shape)
            # the build the other tiers launch (the target's pass configs, e.g. CUDA fast math), which
            # also leaves it in TileLang's disk cache for them
            src = compiled(spec.factory, shape, cfg).get_kernel_source()
            where = f"{name} {shape.name} {cfg.name}"
            bounds = [int(n) for n in re.findall(r"__launch_bounds__\((\d+)", src)]
            assert len(bounds) == 1, f"{where}: {len(bounds)} device kernels in the compiled source, want 1"
            # the config's threads, plus the producer warpgroup (128 threads) that TileLang's
            # warp-specialised Hopper pipelines add
            extra = bounds[0] - spec.threads(shape, cfg)
            assert extra in (0, 128), f"{where}: {bounds[0]} threads for a {cfg.threads}-thread config"
