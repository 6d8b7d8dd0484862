"""The inner loop as the control-flow graph has it (tilegate/gfx942/loop_forest.py) and its
latency proxies (tilegate/gfx942/latency.py), on hand-written listings: each proxy moves when the
thing it counts does."""

import json
from types import SimpleNamespace

from tilegate.gfx942.golden import BARRIERS_FIELD, GOLDEN_ROOT, REFERENCE_TOOLCHAIN
from tilegate.gfx942.inner_loop import inner_loop
from tilegate.gfx942.isa_checks import (
    OWN_MAX_BARRIERS,
    check_max_barriers,
    check_min_load_overlap,
    check_without_loop,
)
from tilegate.gfx942.latency import (
    NO_PROXIES,
    LatencyProxies,
    latency_proxies,
    unoverlapped_loads,
)

MFMA = "v_mfma_f32_16x16x16_f16 a[0:3], v[4:5], v[4:5], a[0:3]"

# A loop as LLVM lays out a register prefetch under `kb + 1 < n_blocks`: entered in its middle
# (the staging of the block loaded ahead), and the prefetch itself placed past the branch that
# closes the loop when there is nothing left to load, with a branch of its own back to the top.
ROTATED = """\
0000000000001000 <k>:
\ts_mov_b32 s0, 0                                            // 000000001000: BE800080
\tglobal_load_dwordx4 v[0:3], v[8:9], off                    // 000000001004: DC5C0000 00000008
\ts_branch 8                                                 // 00000000100C: BF820008 <k+0x30>
\tds_read_b64 v[4:5], v10                                    // 000000001010: D8EC0000 0400000A
\ts_waitcnt lgkmcnt(0)                                       // 000000001018: BF8CC07F
\tv_mfma_f32_16x16x16_f16 a[0:3], v[4:5], v[4:5], a[0:3]     // 00000000101C: D3CD8000 04020904
\ts_add_u32 s0, s0, 1                                        // 000000001024: 80008100
\ts_cmp_ge_u32 s0, 8                                         // 000000001028: BF098800
\ts_cbranch_scc1 10                                          // 00000000102C: BF85000A <k+0x58>
\ts_waitcnt vmcnt(0)                                         // 000000001030: BF8C0F70
\tds_write_b128 v10, v[0:3]                                  // 000000001034: D9BE0000 0000000A
\ts_cmp_eq_u32 s0, 7                                         // 00000000103C: BF068700
\ts_cbranch_scc1 -13                                         // 000000001040: BF85FFF3 <k+0x10>
\tglobal_load_dwordx4 v[0:3], v[8:9], off                    // 000000001044: DC5C0000 00000008
\ts_branch -17                                               // 00000000104C: BF82FFEF <k+0x10>
\ts_nop 0                                                    // 000000001050: BF800000
\ts_nop 0                                                    // 000000001054: BF800000
\ts_endpgm                                                   // 000000001058: BF810000
"""

# The same kernel loading each block where it is staged: the load-then-wait order.
IN_LINE = ROTATED.replace(
    "\ts_waitcnt vmcnt(0)                                         // 000000001030",
    "\tglobal_load_dwordx4 v[0:3], v[8:9], off // 00000000102E: 0\n"
    "\ts_waitcnt vmcnt(0)                                         // 000000001030",
).replace(
    "\tglobal_load_dwordx4 v[0:3], v[8:9], off                    // 000000001044",
    "\ts_nop 0 // 000000001044",
)


def test_a_prefetch_laid_out_past_the_loops_closing_branch_belongs_to_the_loop():
    body = inner_loop(ROTATED)
    # the iteration starts where the loop is entered (the staging of the block loaded ahead), and
    # the prefetch past the closing branch is in it, before the compute it runs ahead of
    assert body[0] == "s_waitcnt vmcnt(0)" and MFMA in body
    assert body.index("global_load_dwordx4 v[0:3], v[8:9], off") < body.index(MFMA)
    assert not any(t.startswith(("s_branch", "s_cbranch")) for t in body)


# The prefetch under `kb + 1 < n_blocks` placed after the kernel's end: it runs between the header's
# staging and the compute, so its load has the compute's MFMA before its wait in the next iteration.
# Walked in address order, the load would come last and meet that wait at once.
OUT_OF_LINE = """\
0000000000001000 <k>:
\ts_mov_b32 s0, 0                                            // 000000001000: BE800080
\tglobal_load_dwordx4 v[0:3], v[8:9], off                    // 000000001004: DC5C0000 00000008
\ts_waitcnt vmcnt(0)                                         // 00000000100C: BF8C0F70
\tds_write_b128 v10, v[0:3]                                  // 000000001010: D9BE0000 0000000A
\ts_cmp_eq_u32 s0, 7                                         // 000000001018: BF068700
\ts_cbranch_scc0 9                                           // 00000000101C: BF840009 <k+0x44>
\tds_read_b64 v[4:5], v10                                    // 000000001020: D8EC0000 0400000A
\ts_waitcnt lgkmcnt(0)                                       // 000000001028: BF8CC07F
\tv_mfma_f32_16x16x16_f16 a[0:3], v[4:5], v[4:5], a[0:3]     // 00000000102C: D3CD8000 04020904
\ts_add_u32 s0, s0, 1                                        // 000000001034: 80008100
\ts_cmp_ge_u32 s0, 8                                         // 000000001038: BF098800
\ts_cbranch_scc0 -13                                         // 00000000103C: BF84FFF3 <k+0xc>
\ts_endpgm                                                   // 000000001040: BF810000
\tglobal_load_dwordx4 v[0:3], v[8:9], off                    // 000000001044: DC5C0000 00000008
\ts_branch -11                                               // 00000000104C: BF82FFF5 <k+0x20>
"""


def test_the_iteration_is_walked_in_the_order_its_blocks_run():
    body = inner_loop(OUT_OF_LINE)
    assert body.index("global_load_dwordx4 v[0:3], v[8:9], off") < body.index(MFMA)
    proxies = latency_proxies(body)
    assert (proxies.loads, proxies.loads_not_overlapped) == (1, 0)


def test_the_prefetched_load_overlaps_the_next_blocks_mfma():
    proxies = latency_proxies(inner_loop(ROTATED))
    assert (proxies.loads, proxies.loads_not_overlapped) == (1, 0)
    in_line = latency_proxies(inner_loop(IN_LINE))
    assert (in_line.loads, in_line.loads_not_overlapped) == (1, 1)


def test_vmcnt_retires_all_but_the_newest_n():
    first, second = (
        "global_load_dwordx4 v[0:3], v[8:9], off",
        "global_load_dwordx4 v[4:7], v[8:9], off",
    )
    # vmcnt(1) retires the first load only, before any MFMA; the second meets one before vmcnt(0)
    assert unoverlapped_loads(
        [first, second, "s_waitcnt vmcnt(1)", MFMA, "s_waitcnt vmcnt(0)"]
    ) == (2, 1)
    # a store counts on vmcnt too: vmcnt(1) after a load and a store retires the load
    store = "global_store_dwordx4 v[8:9], v[0:3], off"
    assert unoverlapped_loads([first, store, "s_waitcnt vmcnt(1)", MFMA]) == (1, 1)
    # a spill's scratch load counts on vmcnt too: vmcnt(1) retires the global load before the MFMA
    spill = "scratch_load_dword v9, off, s0"
    assert unoverlapped_loads([first, spill, "s_waitcnt vmcnt(1)", MFMA, "s_waitcnt vmcnt(0)"]) == (
        2,
        1,
    )
    # lgkmcnt alone retires no global load
    assert unoverlapped_loads([first, "s_waitcnt lgkmcnt(0)", MFMA, "s_waitcnt vmcnt(0)"]) == (1, 0)


def test_barriers_and_reduction_round_trips_are_counted_per_iteration():
    body = [
        "s_barrier",
        "ds_bpermute_b32 v1, v2, v3",
        "s_waitcnt lgkmcnt(0)",
        "ds_swizzle_b32 v1, v1 offset:0x401f",
        MFMA,
        "s_barrier",
        "ds_read_b64 v[4:5], v10",
    ]
    proxies = latency_proxies(body)
    assert (proxies.barriers, proxies.reduction_lds_round_trips) == (2, 2)
    assert latency_proxies(None).barriers == 0  # a kernel without a loop


def test_the_gates_barrier_ceiling_is_the_most_its_own_shipped_kernels_have():
    # OWN_MAX_BARRIERS, which adapted kernels are held to, is read off the gate's own gfx942
    # snapshots (the fp16-accumulating twins are planted defects, not shipped)
    snapshots = [
        json.loads(path.read_text())
        for path in (GOLDEN_ROOT / REFERENCE_TOOLCHAIN).glob("tilelang-*/*.json")
        if not path.stem.endswith("-acc16")
    ]
    assert snapshots, f"no golden snapshots under {GOLDEN_ROOT / REFERENCE_TOOLCHAIN}"
    assert max(s[BARRIERS_FIELD] for s in snapshots) == OWN_MAX_BARRIERS


def test_a_load_overlap_floor_of_one_fails_on_one_load_in_thousands():
    # the share is compared exact, and shown rounded down: never as the floor it misses
    one_late = SimpleNamespace(latency=LatencyProxies(3000, 1, 0, 0))
    (miss,) = check_min_load_overlap(one_late, 1.0, "k")
    assert miss.rule == "load-overlap"
    assert miss.detail.startswith("0.999 at k, want >= 1.0: 1 of the inner loop's 3000 loads")
    (over,) = check_max_barriers(SimpleNamespace(latency=LatencyProxies(0, 0, 14, 0)), 13, "k")
    assert over.detail == "14 s_barrier per iteration of the inner loop at k, want <= 13"


def test_a_latency_expectation_without_a_loop_is_a_violation_not_a_pass():
    # Symptom: with no inner loop the proxies read 0 loads and 0 barriers, so a floor on overlap
    # and a ceiling on barriers both passed, judging nothing. Fix: each says it cannot be judged.
    no_loop = SimpleNamespace(latency=NO_PROXIES)  # latency_proxies(None): no loop found
    (floor,) = check_min_load_overlap(no_loop, 1.0, "k")
    (ceiling,) = check_max_barriers(no_loop, 13, "k")
    assert (floor.rule, ceiling.rule) == ("inner-loop", "inner-loop")
    assert floor.detail.startswith("min_load_overlap 1.0 cannot be judged at k: its gfx942 code")
    assert ceiling.detail.startswith("max_barriers_per_iteration 13 cannot be judged at k")
    # a loop with no load and no barrier (K hoisted out of it) meets both
    empty_loop = SimpleNamespace(latency=latency_proxies([MFMA]))
    assert empty_loop.latency.loads == empty_loop.latency.barriers == 0
    assert not check_min_load_overlap(empty_loop, 1.0, "k")
    assert not check_max_barriers(empty_loop, 0, "k")


def test_a_loop_without_mfma_is_not_the_key_loop_of_a_kernel_that_does_matrix_products():
    # Symptom: where the key loop was unrolled, inner_loop takes the longest loop left (an index
    # or copy loop, no MFMA); its 0 loads and 0 barriers met both expectations, judging nothing.
    # Fix: a kernel with an MFMA input is judged on a loop that issues MFMAs, or fails.
    copy_loop = SimpleNamespace(latency=latency_proxies(["v_add_u32 v1, v2, v3"]))
    assert copy_loop.latency.has_loop and copy_loop.latency.mfmas == 0
    (floor,) = check_min_load_overlap(copy_loop, 1.0, "k", mfma=True)
    (ceiling,) = check_max_barriers(copy_loop, 13, "k", mfma=True)
    assert (floor.rule, ceiling.rule) == ("inner-loop", "inner-loop")
    assert "a loop, but none that issues an MFMA" in floor.detail
    # the same loop is declared without a key loop, and spared; an MFMA loop declared so is not
    assert not check_without_loop(copy_loop, "k", mfma=True)
    key_loop = SimpleNamespace(latency=latency_proxies([MFMA]))
    (declared,) = check_without_loop(key_loop, "k", mfma=True)
    assert declared.rule == "inner-loop"
    # a kernel without matrix products (no MFMA input) is judged on the loop it has
    assert not check_min_load_overlap(copy_loop, 1.0, "k", mfma=False)
