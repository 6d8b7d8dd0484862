"""Compile tier: every kernel x config lowers for gfx942, and for the local GPU when there is
one: its own table's configs, and gfx942's programs lowered for it (cross-target)."""

import re

import pytest
from suite_helpers import build_params

from tilegate.fixtures.compile_cases import cases, shapes
from tilegate.gate.builds import EVERY, Build
from tilegate.gate.registry import KERNELS
from tilegate.kernels.configs import TARGETS
from tilegate.platform import SHIPPING_TARGET

GFX942_CASES = cases("gfx942")


@pytest.mark.parametrize("case", build_params(GFX942_CASES))
def test_lowers_for_gfx942(builder, case):
    lowered = builder.lowered(case)
    src = lowered.source
    assert f"__launch_bounds__({case.threads})" in src
    if KERNELS[case.kernel].uses_mfma:
        mfma = "__builtin_amdgcn_mfma_f32_16x16x16" + (
            "f16" if case.shape.dtype == "float16" else "bf16"
        )
        assert mfma in src, f"TileLang did not emit {mfma}"
        assert 0 < lowered.lds_bytes, "TileLang reported no shared memory for a tiled kernel"


PREFETCHING_DECODE = [
    c for c in GFX942_CASES if c.kernel == "paged_decode_split" and c.cfg.prefetch_kv
]


@pytest.mark.parametrize("case", build_params(PREFETCHING_DECODE))
def test_decode_prefetch_reads_the_second_blocks_slots(builder, case):
    # With a split's length written as a shift by 31 - clz(splits), TileLang 0.1.15's simplifier
    # proved the second key block always past the split and stored NO_SLOT (-1) for its slots: every
    # split of two blocks or more then attended to a block of zero keys (errors 10-300x torch's on
    # the H200). The kernel divides instead; this holds the lowering to a real slot read.
    assert not re.search(r"slots_ahead\[\d+\] = -1;", builder.lowered(case).source)


def _local_gpu_params() -> list:
    """(kernel, head_dim) params, each declaring every config of the local table on every shape
    class as its builds (compiled ahead of the run, tilegate/testing/precompile.py)."""
    return [
        pytest.param(
            name,
            head_dim,
            id=f"{name}-d{head_dim}",
            marks=pytest.mark.builds(
                *(Build(name, shape, EVERY) for shape in shapes(head_dim, KERNELS[name].masks))
            ),
        )
        for name in sorted(KERNELS)
        for head_dim in (64, 128)
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("name, head_dim", _local_gpu_params())
def test_compiles_for_the_local_gpu(name, head_dim):
    from tilegate.platform import local_target

    target = local_target()  # NoLocalTarget names a GPU without a config table
    spec = KERNELS[name]
    configs = spec.config_tables[target][head_dim]
    assert configs, f"{name} has no {target} config for head_dim {head_dim}"
    for cfg in configs:
        for shape in shapes(head_dim, spec.masks):
            _builds_for_the_local_gpu(name, shape, cfg, target)


def _shipping_params() -> list:
    """One param per kernel x head_dim x gfx942 config: a config TileLang cannot build for the local
    GPU fails on its own, with TileLang's reason."""
    return [
        pytest.param(
            name,
            head_dim,
            cfg,
            id=f"{name}-d{head_dim}-{cfg.name}",
            marks=[
                pytest.mark.config_target(SHIPPING_TARGET),
                pytest.mark.builds(
                    *(Build(name, shape, cfg) for shape in shapes(head_dim, KERNELS[name].masks))
                ),
            ],
        )
        for name in sorted(KERNELS)
        for head_dim in (64, 128)
        for cfg in KERNELS[name].config_tables[SHIPPING_TARGET][head_dim]
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("name, head_dim, cfg", _shipping_params())
def test_gfx942_program_builds_for_the_local_gpu(name, head_dim, cfg):
    """The programs that ship on MI300X, lowered for whatever GPU runs the gate (cross-target on the
    H200): the numerics, paged, NaN and sanitizer tiers launch these builds."""
    for shape in shapes(head_dim, KERNELS[name].masks):
        _builds_for_the_local_gpu(name, shape, cfg, SHIPPING_TARGET)


def _builds_for_the_local_gpu(name: str, shape, cfg, table: str) -> None:
    from tilegate.runtime import compiled

    spec = KERNELS[name]
    cfg.validate(TARGETS[table], shape)
    # the build the other tiers launch (the local target's pass configs, e.g. CUDA fast math), which
    # also leaves it in TileLang's disk cache for them
    src = compiled(spec.factory, shape, cfg).get_kernel_source()
    where = f"{name} {shape.name} {table} {cfg.name}"
    bounds = [int(n) for n in re.findall(r"__launch_bounds__\((\d+)", src)]
    assert len(bounds) == 1, f"{where}: {len(bounds)} device kernels in the compiled source, want 1"
    # the config's threads, plus the producer warpgroup (128 threads) that TileLang's
    # warp-specialised Hopper pipelines add
    extra = bounds[0] - spec.threads(shape, cfg)
    assert extra in (0, 128), f"{where}: {bounds[0]} threads for a {cfg.threads}-thread config"
