"""Tile configs and attention shapes: validated before anything compiles."""

import pytest

from tilegate.kernels.configs import (
    CONFIG_TABLES,
    GFX942,
    SM90,
    ConfigError,
    TileConfig,
    configs_for,
    fp16_accum_variant,
)
from tilegate.kernels.problem import AttentionShape, ShapeError

D128 = AttentionShape(32, 8, 128, True)
D64 = AttentionShape(32, 8, 64, True)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_gfx942_has_three_valid_configs_per_head_dim(head_dim):
    shape = AttentionShape(32, 8, head_dim, True)
    configs = configs_for("gfx942", head_dim)
    assert len(configs) >= 3
    for cfg in configs:
        cfg.validate(GFX942, shape)


@pytest.mark.parametrize("target", sorted(CONFIG_TABLES))
def test_every_table_config_validates_on_its_target(target):
    limits = {"gfx942": GFX942, "sm90": SM90}[target]
    for head_dim, configs in CONFIG_TABLES[target].items():
        for cfg in configs:
            cfg.validate(limits, AttentionShape(32, 8, head_dim, True))


def test_128x128_tile_at_d128_is_over_gfx942_lds():
    with pytest.raises(ConfigError, match=r"98304 bytes \(96 KiB\).*over the 64 KiB"):
        TileConfig("m128n128", 128, 128, 1, 256).validate(GFX942, D128)


def test_same_tile_fits_sm90_shared_memory():
    TileConfig("m128n128", 128, 128, 1, 256).validate(SM90, D128)


def test_threads_must_fill_whole_wave64():
    with pytest.raises(ConfigError, match="not a multiple of the 64-wide wavefront"):
        TileConfig("w96", 64, 64, 1, 96).validate(GFX942, D64)


def test_block_must_be_a_multiple_of_16():
    with pytest.raises(ConfigError, match="block_n 40"):
        TileConfig("n40", 64, 40, 1, 128).validate(GFX942, D64)


def test_double_buffering_counts_against_lds():
    # Two stages of K and V at 128x64, d128: 32 KiB Q + 64 KiB K/V.
    with pytest.raises(ConfigError, match="LDS"):
        TileConfig("m128n64s2", 128, 64, 2, 256).validate(GFX942, D128)


def test_unknown_accumulator_dtype_is_rejected():
    with pytest.raises(ConfigError, match="accum_dtype"):
        TileConfig("x", 64, 64, 1, 128, accum_dtype="float64")


def test_every_gfx942_config_prefetches_the_next_key_block():
    """TileLang pipelines no copy below gfx950: without the register prefetch every K/V load of
    the inner loop is waited for before a matrix instruction issues (the ISA tier's load-overlap
    rule)."""
    from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES

    for tables in (CONFIG_TABLES, EXTEND_TABLES, DECODE_TABLES):
        for configs in tables["gfx942"].values():
            assert all(cfg.prefetch_kv and cfg.v_transposed for cfg in configs), [
                c.name for c in configs
            ]


def test_a_gathering_producer_warpgroup_is_refused_where_it_cannot_run():
    ws = dict(block_m=192, block_n=128, num_stages=2, threads=384, gather_warpgroup=True)
    TileConfig("ok", **ws).validate(SM90, D128)
    with pytest.raises(ConfigError, match=r"cp\.async with mbarriers"):
        TileConfig("x", **ws).validate(GFX942, D128)
    with pytest.raises(ConfigError, match="exceed 1024"):
        TileConfig("x", **{**ws, "threads": 1024, "block_n": 16}).validate(SM90, D128)
    with pytest.raises(ConfigError, match="whole warpgroups"):
        TileConfig("x", **{**ws, "threads": 320})
    with pytest.raises(ConfigError, match="does not combine"):
        TileConfig("x", **ws, prefetch_kv=True)


def test_cuda_builds_get_fast_math_and_a_defect_keeps_its_own_pass_configs(monkeypatch):
    from tilegate import runtime

    seen = []
    monkeypatch.setattr(
        runtime, "_compiled", lambda factory, shape, cfg, passes, **kw: seen.append(dict(passes))
    )
    for target in ("sm90", "gfx942"):
        monkeypatch.setattr(runtime, "local_target", lambda target=target: target)
        runtime.compiled(None, D128, None, {"tl.disable_safe_memory_legalize": True})
    # a build's own pass configs (a planted defect's) win over the target's
    monkeypatch.setattr(runtime, "local_target", lambda: "sm90")
    runtime.compiled(None, D128, None, {"tl.enable_fast_math": False})
    assert seen == [
        {"tl.enable_fast_math": True, "tl.disable_safe_memory_legalize": True},
        {"tl.disable_safe_memory_legalize": True},
        {"tl.enable_fast_math": False},
    ]
    # a planted defect's knobs bring the pass configs their build needs (kernels/hooks.py)
    from tilegate.gate.planted import ExtendDefect, PrefillDefect, knobs_for
    from tilegate.kernels.flash_fwd import flash_fwd
    from tilegate.kernels.paged_extend import paged_extend

    seen.clear()
    for defect in (
        ExtendDefect.PREFETCH_OVERWRITES_TILE_IN_USE,
        PrefillDefect.RACE,
        PrefillDefect.WRONG_SCALE,
    ):
        factory = paged_extend if isinstance(defect, ExtendDefect) else flash_fwd
        runtime.compiled(factory, D128, None, knobs=knobs_for(defect))
    assert seen == [
        {"tl.enable_fast_math": True, "tl.disable_thread_storage_sync": True},
        {
            "tl.enable_fast_math": True,
            "tl.disable_thread_storage_sync": True,
            "tl.disable_tma_lower": True,
        },
        {"tl.enable_fast_math": True},
    ]
    # a bare name is refused where the gate turns a defect into knobs: it says which member to pass
    with pytest.raises(TypeError, match="PrefillDefect.RACE"):
        knobs_for("race", PrefillDefect, "flash_fwd")


def test_fp16_accum_variant_keeps_the_tile():
    cfg = configs_for("gfx942", 128)[0]
    twin = fp16_accum_variant(cfg)
    assert (twin.block_m, twin.block_n, twin.threads, twin.accum_dtype) == (
        cfg.block_m,
        cfg.block_n,
        cfg.threads,
        "float16",
    )


def test_missing_head_dim_table_names_what_exists():
    with pytest.raises(ConfigError, match=r"head_dim 96 \(have \[64, 128\]\)"):
        configs_for("gfx942", 96)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(q_heads=32, kv_heads=8, head_dim=96, causal=True), "head_dim 96 unsupported"),
        (dict(q_heads=32, kv_heads=7, head_dim=128, causal=True), "GQA ratio 32:7 does not divide"),
        (
            dict(q_heads=32, kv_heads=8, head_dim=128, causal=True, dtype="float32"),
            "dtype 'float32' unsupported",
        ),
        (
            dict(q_heads=32, kv_heads=8, head_dim=128, causal=False, window=127),
            "sliding window 127: .* not a full mask's",
        ),
        (dict(q_heads=32, kv_heads=8, head_dim=128, causal=True, window=-1), "sliding window -1"),
    ],
    ids=["head-dim-96", "gqa-32-7", "fp32", "window-on-full-mask", "negative-window"],
)
def test_bad_shapes_raise_clear_errors(kwargs, message):
    with pytest.raises(ShapeError, match=message):
        AttentionShape(**kwargs)


def test_shape_names_are_readable():
    assert AttentionShape(64, 8, 128, True, "bfloat16").name == "causal-gqa64x8-d128-bf16"
    assert AttentionShape(8, 8, 64, False).name == "full-mha8-d64-fp16"
    assert AttentionShape(32, 8, 128, True, window=127).name == "swa127-gqa32x8-d128-fp16"
