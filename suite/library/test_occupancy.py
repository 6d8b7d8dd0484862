"""gfx942 occupancy arithmetic against the figures in LLVM AMDGPUUsage / AMD's CDNA3 guide."""

import pytest

from tilegate.gfx942.isa import occupancy


@pytest.mark.parametrize(
    "vgpr, waves_per_simd",
    [(64, 8), (128, 4), (129, 3), (168, 3), (169, 2), (256, 2), (257, 1), (512, 1)],
)
def test_vgpr_limit(vgpr, waves_per_simd):
    # One-wave workgroups and no LDS: registers alone decide (<=128 -> 4, <=168 -> 3, <=256 -> 2).
    occ = occupancy(vgpr=vgpr, sgpr=32, lds_bytes=0, threads=64)
    assert occ.limits["vgpr"] == waves_per_simd * 4
    if waves_per_simd < 4:
        assert occ.limited_by == "vgpr" and occ.waves_per_simd == waves_per_simd


def test_lds_limit_rounds_to_512_byte_granules():
    # 32769 bytes round to 33280: one workgroup per 64 KiB CU; 32768 exactly: two.
    assert occupancy(64, 32, 32769, 256).limits["lds"] == 1
    assert occupancy(64, 32, 32768, 256).limits["lds"] == 2


def test_two_wave_workgroup_with_half_the_lds_leaves_simds_idle():
    occ = occupancy(vgpr=200, sgpr=96, lds_bytes=50176, threads=128)
    assert (occ.workgroups_per_cu, occ.waves_per_cu, occ.waves_per_simd, occ.limited_by) == (
        1,
        2,
        0.5,
        "lds",
    )


def test_lds_over_64k_fits_no_workgroup():
    assert occupancy(64, 32, 66 * 1024, 256).workgroups_per_cu == 0


def test_workgroup_slots_cap_small_workgroups():
    # 16 workgroups per CU at most, even when each is one wave.
    occ = occupancy(vgpr=32, sgpr=16, lds_bytes=0, threads=64)
    assert occ.workgroups_per_cu == 16 and occ.limited_by == "workgroup slots"
