"""How many splits a decode launch takes (tilegate/serving/decode_schedule.py), on the CPU."""

from dataclasses import replace

import pytest

from tilegate.kernels.configs import DECODE_TABLES, GFX942, ConfigError, DecodeConfig
from tilegate.kernels.problem import AttentionShape
from tilegate.serving.decode_schedule import decode_splits, is_power_of_two

N64 = DECODE_TABLES["sm90"][128][0]  # 2 workgroups per unit, at most 16 splits
H200_SMS, MI300X_CUS = 132, 304


@pytest.mark.parametrize(
    "batch, splits",
    # 8 KV heads: batch x 8 x splits workgroups for 2 x 132 wanted, rounded up to a power of two
    [(1, 16), (8, 8), (16, 4), (32, 2), (64, 1), (128, 1), (132, 1), (256, 1)],
)
def test_splits_fill_the_device_and_no_more(batch, splits):
    assert decode_splits(batch, 8, N64, H200_SMS) == splits


def test_every_choice_is_a_power_of_two_within_the_config():
    for cfg in (*DECODE_TABLES["sm90"][128], *DECODE_TABLES["gfx942"][128]):
        for units in (H200_SMS, MI300X_CUS):
            for batch in range(1, 300):
                s = decode_splits(batch, 8, cfg, units)
                assert is_power_of_two(s) and s <= cfg.num_splits, (cfg.name, units, batch, s)


def test_more_compute_units_take_more_splits():
    assert decode_splits(32, 8, N64, MI300X_CUS) >= decode_splits(32, 8, N64, H200_SMS)


@pytest.mark.parametrize("bad", [(0, 8, 132), (4, 0, 132), (4, 8, 0)])
def test_an_empty_batch_or_device_is_refused(bad):
    batch, heads, units = bad
    with pytest.raises(ValueError, match="need >= 1"):
        decode_splits(batch, heads, N64, units)


@pytest.mark.parametrize("splits", [3, 12, 0])
def test_a_config_whose_split_count_is_no_power_of_two_is_refused(splits):
    cfg = replace(DECODE_TABLES["gfx942"][128][0], num_splits=splits)
    with pytest.raises(ConfigError, match="not a power of two"):
        cfg.validate(GFX942, AttentionShape(32, 8, 128, True, "float16"))


def test_decode_config_defaults_to_four_workgroups_per_unit():
    assert DecodeConfig("x", block_n=32, threads=64, num_splits=8).workgroups_per_unit == 4


def _cpu_batch():
    from tilegate.fixtures.paged_cases import PagedCase, paged_batch
    from tilegate.serving.batch_indices import prepare_decode

    batch = paged_batch(PagedCase(AttentionShape(32, 8, 128, True, "float16"), (57, 9)), "cpu")
    meta = prepare_decode(batch.req_to_token, batch.req_pool_indices, batch.seq_lens, "cpu")
    return meta, batch


@pytest.mark.parametrize("splits", [0, 3, 32])
def test_a_launch_with_another_split_count_is_refused_before_it_runs(splits):
    from tilegate.serving.paged import decode_batch

    meta, b = _cpu_batch()
    with pytest.raises(ValueError, match=f"splits {splits}: need a power of two in 1..16"):
        decode_batch(meta, b.q, b.k_pool, b.v_pool, cfg=N64, splits=splits)


def test_a_combine_defect_is_refused_where_one_split_skips_the_combine():
    from tilegate.gate.planted import CombineDefect, knobs_for
    from tilegate.serving.paged import decode_batch

    meta, b = _cpu_batch()
    defect = next(iter(CombineDefect))
    with pytest.raises(ValueError, match="which one split skips"):
        decode_batch(meta, b.q, b.k_pool, b.v_pool, cfg=N64, splits=1, knobs=knobs_for(defect))
