"""The inner-loop cycle estimate (tilegate/gfx942/inner_loop.py) and its golden rule, on the CPU."""

import resource
import time
from pathlib import Path

import pytest

from tilegate.gfx942.golden import cycles_rise, golden_diff
from tilegate.gfx942.inner_loop import (
    MCA_HUNG,
    NO_LOOP,
    counter_rewrite,
    counter_rewritten,
    cycles_per_iteration,
    inner_loop,
    inner_loop_report,
    mca_report,
)
from tilegate.gfx942.toolchain import ToolchainMissing, find_toolchain

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
    assert (
        inner_loop(
            LISTING.replace("-9 ", "9 ")
            .replace("-3 ", "3 ")
            .replace("<k+0x4>", "<k+0x20>")
            .replace("<k+0x14>", "<k+0x40>")
        )
        is None
    )  # forward branches only


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
    (rise,) = cycles_rise(1000.0, 1101.0)
    assert rise.rule == "inner_loop_cycles" and "over the 10% allowed" in rise.detail
    assert cycles_rise(1000.0, 700.0) == []
    assert cycles_rise(None, 5.0) and not cycles_rise(None, None)
    golden = {"vgpr_count": 100, "inner_loop_cycles": 1000.0}
    assert golden_diff(golden, {"vgpr_count": 100, "inner_loop_cycles": 1050.0}) == []
    changed = golden_diff(golden, {"vgpr_count": 101, "inner_loop_cycles": 1200.0})
    assert [v.rule for v in changed] == ["vgpr_count", "inner_loop_cycles"]
    # as the golden test's message shows it
    assert str(changed[0]) == "vgpr_count: golden 100 -> now 101"
    # barriers: one fewer passes (a redundant one lost to the hash seed), one more fails
    assert golden_diff({"barriers_per_iteration": 7}, {"barriers_per_iteration": 6}) == []
    assert [
        v.rule for v in golden_diff({"barriers_per_iteration": 7}, {"barriers_per_iteration": 8})
    ] == ["barriers_per_iteration"]


# A persistent kernel: an outer loop over query blocks (0x1004-0x102C) around the key loop
# (0x1008-0x1020), which holds every MFMA; an epilogue after the key loop converts acc * (1/l) to
# fp16 with a fused multiply whose addend is 0 (v_fma_mixlo_f16 ..., 0).
PERSISTENT = """\
0000000000001000 <p>:
\ts_mov_b32 s1, 0                                            // 000000001000: BE810080
\ts_mov_b32 s0, 0                                            // 000000001004: BE800080
\tds_read_b64 v[2:3], v0                                     // 000000001008: D8EC0000 02000000
\tv_mfma_f32_16x16x16_f16 a[0:3], v[2:3], v[2:3], a[0:3]     // 000000001010: D3CD8000 04020502
\ts_add_u32 s0, s0, 1                                        // 000000001018: 80008100
\ts_cmp_lg_u32 s0, 8                                         // 00000000101C: BF078800
\ts_cbranch_scc1 -7                                          // 000000001020: BF85FFF9 <p+0x8>
\ts_add_u32 s1, s1, 1                                        // 000000001024: 80018101
\ts_cmp_lg_u32 s1, 4                                         // 000000001028: BF078401
\ts_cbranch_scc1 -11                                         // 00000000102C: BF85FFF5 <p+0x4>
\tv_fma_mixlo_f16 v4, v5, v6, 0                              // 000000001030: D3A10004 02020D05
\ts_endpgm                                                   // 000000001038: BF810000
"""


def test_a_persistent_kernels_inner_loop_is_its_key_loop():
    """Symptom: in a persistent kernel (SGLang's DSA decode) the pick was the outer loop over query
    blocks, which holds the same MFMAs and more (3330 llvm-mca cycles where the key loop has 2344).
    Fix: a loop's own MFMAs, not those of a loop nested in it, and the tightest loop on a tie."""
    loop = inner_loop(PERSISTENT)
    assert loop == [
        "ds_read_b64 v[2:3], v0",
        "v_mfma_f32_16x16x16_f16 a[0:3], v[2:3], v[2:3], a[0:3]",
        "s_add_u32 s0, s0, 1",
        "s_cmp_lg_u32 s0, 8",
    ]


def test_fp16_in_an_epilogue_is_no_fp16_accumulation():
    """Symptom: a kernel accumulating in fp32 was flagged for the v_fma_mix of its epilogue (acc
    * (1/l) to fp16, addend 0). Fix: the fp16-accumulation signature is judged inside the loops."""
    from collections import Counter

    from tilegate.gfx942.inner_loop import loop_mnemonics
    from tilegate.gfx942.isa_checks import FP16_ACCUMULATION_SIGNATURE

    inside = Counter(loop_mnemonics(PERSISTENT))
    assert inside["v_mfma_f32_16x16x16_f16"] == 1 and inside["v_fma_mixlo_f16"] == 0
    # accumulating in the key loop
    moved = PERSISTENT.replace("\ts_add_u32 s0, s0, 1   ", "\tv_fma_mixlo_f16 v7, v5, v6, v7")
    assert (
        Counter(loop_mnemonics(moved))["v_fma_mixlo_f16"] == 1
        and "v_fma_mixlo_f16" in FP16_ACCUMULATION_SIGNATURE
    )
    assert (
        Counter(loop_mnemonics("\tv_add_f16 v1, v2, v3   // 000000001000: 00000000\n"))["v_add_f16"]
        == 1
    )  # no loop: all
    # in the loop, P's scale-and-convert (a product rounded to fp16, addend 0) adds nothing; a real
    # addend does
    scaled = PERSISTENT.replace("\ts_add_u32 s0, s0, 1   ", "\tv_fma_mixlo_f16 v7, v5, v6, 0 ")
    assert Counter(loop_mnemonics(scaled))["v_fma_mixlo_f16"] == 0


def test_a_branch_to_the_kernels_first_instruction_closes_a_loop():
    """llvm-objdump names that target <kernel>, with no offset."""
    from tilegate.gfx942.inner_loop import parse_listing
    from tilegate.gfx942.loop_forest import basic_blocks, loop_forest

    to_start = PERSISTENT.replace("<p+0x4>", "<p>").replace("-11 ", "-12 ")
    blocks = basic_blocks(parse_listing(to_start))
    (outer,) = loop_forest(blocks)
    # the key loop, nested in the one back to the start
    assert 0 in outer.blocks and len(outer.inner) == 1


# The key-block loop of paged_decode_split (d128, fp16, n64w4s8) as TileLang 0.1.15 and LLVM 19
# built it once: llvm-mca 19 never finishes on it, and finishes in 0.1 s without its one
# v_add_co_u32. Six of its lines are enough to hang llvm-mca 19 (MCA_19_HANG_CORE).
HUNG_LOOP = (Path(__file__).parent / "llvm_mca_19_hang.s").read_text().splitlines()
MCA_19_HANG_CORE = [
    "ds_read_b64 v[42:43], v99 offset:20736",
    "v_mfma_f32_16x16x16_f16 a[0:3], v[120:121], v[40:41], a[0:3]",
    "v_add_f32_e32 v34, v127, v128",
    "ds_bpermute_b32 v44, v57, v34",
    "v_add_co_u32_e32 v110, vcc, 1, v110",
    "v_mfma_f32_16x16x16_f16 a[0:3], v[42:43], v[38:39], a[0:3]",
]


def _mca():
    try:
        return find_toolchain().mca
    except ToolchainMissing as exc:
        pytest.fail(str(exc))


def test_a_loop_llvm_mca_does_not_finish_is_estimated_with_its_counter_rewritten():
    """Symptom: llvm-mca 19 hung on 4 gfx942 decode loops, which got no cycles at all.
    Fix: the loop counter's two-micro-op add is run as an equivalent pair; the report says so."""
    mca = _mca()
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = mca_report(mca, HUNG_LOOP, cpu_limit_s=3)
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the hang costs its limit of CPU (3 s), not more: the rewritten loop then finishes in < 1 s
    assert (now.ru_utime + now.ru_stime) - (spent.ru_utime + spent.ru_stime) < 3 + 1 + 2
    assert counter_rewritten(report) and cycles_per_iteration(report) > 0
    finishing = [line for line in HUNG_LOOP if not line.startswith("v_add_co_u32")]
    plain = mca_report(mca, finishing, cpu_limit_s=10)
    assert not counter_rewritten(plain) and cycles_per_iteration(plain) > 0


def test_a_loop_that_finishes_slowly_on_a_busy_machine_is_not_taken_for_a_hang(tmp_path):
    """Symptom: the hang was judged on the wall clock, so a loop llvm-mca finishes could be taken
    for one when the machine was busy, and its report (the docs' dagger) changed with the load.
    Here llvm-mca starts 4 s late, spending no CPU, under a 2 s limit: still its own report."""
    mca = _mca()
    late = tmp_path / "llvm-mca"
    late.write_text(f'#!/bin/sh\nsleep 4\nexec "{mca}" "$@"\n')
    late.chmod(0o755)
    finishing = [line for line in HUNG_LOOP if not line.startswith("v_add_co_u32")]
    started = time.monotonic()
    report = mca_report(late, finishing, cpu_limit_s=2)
    assert time.monotonic() - started > 4
    assert not counter_rewritten(report) and cycles_per_iteration(report) > 0


def test_a_loop_that_hangs_even_rewritten_gets_no_estimate_not_a_hung_build():
    mca = _mca()
    # no counter to rewrite: the six lines with another two-micro-op add in the counter's place
    core = [line.replace("vcc, 1,", "vcc, 2,") for line in MCA_19_HANG_CORE]
    assert counter_rewrite(core) is None
    report = mca_report(mca, core, cpu_limit_s=2)
    assert report == MCA_HUNG and cycles_per_iteration(report) is None


def test_the_counter_rewrite_keeps_the_sum_and_the_carry():
    assert counter_rewrite(MCA_19_HANG_CORE)[4:6] == [
        "v_add_u32_e32 v110, 1, v110",
        "v_cmp_eq_u32_e32 vcc, 0, v110",
    ]
    assert counter_rewrite(["v_add_co_u32_e32 v1, vcc, 1, v2"]) is None  # not a counter
