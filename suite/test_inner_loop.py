"""The inner-loop cycle estimate (tilegate/inner_loop.py) and its golden rule, on the CPU."""

import pytest

from tilegate.inner_loop import NO_LOOP, cycles_per_iteration, inner_loop, inner_loop_report
from tilegate.report import cycles_rise, golden_diff
from tilegate.toolchain import ToolchainMissing, find_toolchain

# Two loops: a short scalar one, then one with an MFMA (the one to pick); offsets from 0x1000.
LISTING = """\
0000000000001000 <k>:
\ts_mov_b32 s0, 0                                            // 000000001000: BE800080
\ts_add_u32 s0, s0, 1                                        // 000000001004: 80008100
\ts_cmp_lg_u32 s0, 4                                         // 000000001008: BF078400
\ts_cbranch_scc1 -3                                          // 00000000100C: BF85FFFD <k+0x4>
\tv_mov_b32_e32 v0, 0                                        // 000000001010: 7E000280
\tds_read_b64 v[2:3], v0                                     // 000000001014: D8EC0000 02000000
\ts_waitcnt lgkmcnt(0)                                       // 00000000101C: BF8CC07F
\tv_mfma_f32_16x16x16_f16 a[0:3], v[2:3], v[2:3], a[0:3]     // 000000001020: D3CD8000 04020502
\ts_add_u32 s0, s0, 1                                        // 000000001028: 80008100
\ts_cmp_lg_u32 s0, 8                                         // 00000000102C: BF078800
\ts_cbranch_scc1 -9                                          // 000000001030: BF85FFF7 <k+0x14>
\ts_endpgm                                                   // 000000001034: BF810000
"""


def test_the_loop_with_the_mfma_is_the_inner_loop():
    loop = inner_loop(LISTING)
    assert loop[0].startswith("ds_read_b64") and any(t.startswith("v_mfma") for t in loop)
    assert not any(t.startswith(("s_cbranch", "s_branch")) for t in loop)
    assert len(loop) == 5  # ds_read, waitcnt, mfma, add, cmp
    assert inner_loop(LISTING.replace("-9 ", "9 ").replace("-3 ", "3 ").replace("<k+0x4>", "<k+0x20>")
                      .replace("<k+0x14>", "<k+0x40>")) is None  # forward branches only


def test_llvm_mca_estimates_the_loop():
    try:
        mca = find_toolchain().mca
    except ToolchainMissing as exc:
        pytest.fail(str(exc))  # the ISA tier needs the toolchain: an error, not a skip
    report = inner_loop_report(mca, LISTING)
    cycles = cycles_per_iteration(report)
    assert cycles is not None and cycles > 0
    assert cycles_per_iteration(inner_loop_report(mca, "no code\n")) is None
    assert inner_loop_report(mca, "no code\n") == NO_LOOP


def test_a_rise_past_ten_percent_fails_the_golden_and_a_drop_passes():
    assert cycles_rise(1000.0, 1100.0) == []
    assert "over the 10% allowed" in cycles_rise(1000.0, 1101.0)[0]
    assert cycles_rise(1000.0, 700.0) == []
    assert cycles_rise(None, 5.0) and not cycles_rise(None, None)
    golden = {"vgpr_count": 100, "inner_loop_cycles": 1000.0}
    assert golden_diff(golden, {"vgpr_count": 100, "inner_loop_cycles": 1050.0}) == []
    assert len(golden_diff(golden, {"vgpr_count": 101, "inner_loop_cycles": 1200.0})) == 2
