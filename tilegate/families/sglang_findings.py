"""What the gate found in SGLang 0.5.23's TileLang kernels for MI300X, as strict expected
failures (each turns red once SGLang fixes it, when the build breaks anything else, or when it
gets worse than the finding's ``worst`` figures: the highest measured under TileLang 0.1.12 and
0.1.15). Figures: gfx942, Debian's clang 19 with the wave size pinned to 64
(tilegate/gfx942/toolchain.py CROSS_WAVE_SIZE_FLAGS: the register and scratch figures moved by up
to 2% when it was). docs/kernel-families.md has the reports."""

from tilegate.families import Finding, params
from tilegate.families.sparse_mla import FEATURE_OF, KINDS

NAN_CASES = frozenset({"t1-nan-unused", "t8-nan-unused", "t17-nan-unused"})
NAN_LEAK = (
    "a slot whose index is -1 loads KV[0] (T.if_then_else(idx >= 0, idx, 0)) and relies on P = 0 "
    "to cancel "
    "it: a NaN in row 0, which no used slot names, makes the output NaN (H200, CUDA build of the "
    "MI300X tiles)"
)
H16, H128 = frozenset({"h16-d576-top2048-bf16"}), frozenset({"h128-d576-top2048-bf16"})
NARROW_AND_THIN = frozenset({"lds-read-width", "waves-per-simd"})
# the latency proxies (IsaExpectations.min_load_overlap, max_barriers_per_iteration)
UNHIDDEN = frozenset({"load-overlap"})
UNHIDDEN_AND_BARRED = frozenset({"load-overlap", "barriers"})

DSA_FINDINGS: dict[str, tuple[Finding, ...]] = {
    "sglang-dsa-partial": (
        Finding(
            rules=NARROW_AND_THIN,
            problems=H16,
            reason="P@V reads KV_shared one bf16 a ds_read_u16 (64-256 a wave), and one "
            "128-thread workgroup a CU (38-55 KB of LDS) is 0.5 waves/SIMD: half of "
            "every CU's SIMDs idle",
            worst=params(narrow_lds_reads=256, waves_per_simd=0.5, lds_bytes=55296),
        ),
        Finding(
            rules=frozenset({"lds-budget"}),
            problems=H128,
            configs=frozenset({"bi32-it1"}),
            reason="128 heads a rank (DP attention), inner_iter 1 (up to 9 tokens): Q in "
            "shared (64 x 576 bf16) and the KV tile: lowered LDS up to 110592 B > gfx942's "
            "65536 B: the launch fails",
            worst=params(lds_bytes=110592),
        ),
        Finding(
            rules=NARROW_AND_THIN | {"spill"},
            problems=H128,
            configs=frozenset({"bi32-it2", "bi32-it64"}),
            reason="128 heads a rank, inner_iter > 1: a 64-head block's fp32 acc_o on 128 "
            "threads spills 386-394 VGPRs (1508-1532 B of scratch), besides the narrow "
            "reads and 0.5 waves/SIMD",
            worst=params(
                vgpr_spill_count=394,
                private_segment_bytes=1532,
                narrow_lds_reads=64,
                waves_per_simd=0.5,
            ),
        ),
        Finding(rules=frozenset({"numerics"}), reason=NAN_LEAK, cases=NAN_CASES, nonfinite=True),
        Finding(
            rules=frozenset({"numerics", "determinism"}),
            cases=frozenset(f"t17-{k}" for k in KINDS if k not in FEATURE_OF),
            reason="inner_iter 2 (10-19 tokens): outputs change from launch to launch on the "
            "same inputs (14200 of 139264 in one pair) and the max error reaches "
            "2.2-45x the bf16 torch baseline's bound (H200); memcheck, racecheck and "
            "initcheck report nothing",
            worst=params(max_ratio=100),
        ),
        Finding(
            rules=UNHIDDEN,
            problems=H16,
            configs=frozenset({"bi32-it64"}),
            reason="16 heads, inner_iter 64 (8192 tokens): each KV row's loads (and its index) "
            "are waited for before the block's MFMAs, 37 of 37 an iteration: nothing is in "
            "flight while they run",
            worst=params(loads_not_overlapped=37),
        ),
        Finding(
            rules=UNHIDDEN_AND_BARRED,
            problems=H128,
            configs=frozenset({"bi32-it2", "bi32-it64"}),
            reason="128 heads, inner_iter > 1: 262-267 of 276-280 loads an iteration (239-243 of "
            "them the spills' scratch reloads) are waited for before an MFMA issues, and 22-28 "
            "s_barriers an iteration (the gate's most: 13)",
            worst=params(loads_not_overlapped=267, load_overlap=0.043, barriers_per_iteration=28),
        ),
    ),
    "sglang-dsa-partial-fp8": (
        Finding(
            rules=frozenset({"lds-read-width"}),
            reason="P@V reads the fp8 KV tiles one byte a ds_read_u8 (128 a wave)",
            worst=params(narrow_lds_reads=128),
        ),
        Finding(rules=frozenset({"numerics"}), reason=NAN_LEAK, cases=NAN_CASES, nonfinite=True),
        Finding(
            rules=UNHIDDEN,
            configs=frozenset({"bi64-it32"}),
            reason="inner_iter 32: the fp8 KV tile's loads and their indices are waited for "
            "before the block's MFMAs, 10 of 10 an iteration",
            worst=params(loads_not_overlapped=10),
        ),
    ),
    "sglang-dsa-combine": (
        Finding(
            rules=frozenset({"spill"}),
            configs=frozenset({"bi32-ni64"}),
            reason="after the bf16 decode partial (64 groups): the scale[4, 64] fragment "
            "indexed by the serial group loop lives in scratch (528 B, 34 scratch "
            "instructions)",
            worst=params(private_segment_bytes=528),
        ),
    ),
}
DSV4_FINDINGS: dict[str, tuple[Finding, ...]] = {
    "sglang-dsv4-fp8-partial": (
        Finding(
            rules=NARROW_AND_THIN | {"spill"},
            reason="the 64-head block's fp32 acc_o (64 x 512) on 128 threads fills all 512 "
            "registers and spills 3 VGPRs (inner_iter 1) to 643-711 (2256-2488 B of "
            "scratch, inner_iter 16); P@V reads bf16 one a ds_read_u16 (256 a wave); "
            "51-57 KB of LDS: 0.5 waves/SIMD",
            worst=params(
                vgpr_spill_count=711,
                private_segment_bytes=2488,
                narrow_lds_reads=256,
                waves_per_simd=0.5,
                lds_bytes=56704,
            ),
        ),
        Finding(
            rules=frozenset({"lowering"}),
            gpu="cuda",
            error="cannot be reordered",
            cases=frozenset(f"t{t}-{k}" for t in (1, 8, 17) for k in KINDS)
            | {"t8192-dense", "t8192-tail-padded"},
            reason="built for CUDA, TileLang 0.1.12 and 0.1.15 both refuse the partial's "
            "T.Pipelined(num_stages=1) loop: 'two statements with buffer access "
            "dependency in the same stage of the software pipeline cannot be reordered' "
            "(tilelang_fp8_attention.py:580); gfx942 lowers under both, so its GPU "
            "numerics need the MI300X runner",
        ),
        Finding(
            rules=UNHIDDEN_AND_BARRED,
            configs=frozenset({"bi32-it16"}),
            reason="inner_iter 16: 363-414 of 423-475 loads an iteration (384-436 of them the "
            "spills' scratch reloads) are waited for before an MFMA issues, and 35-37 "
            "s_barriers an iteration (the gate's most: 13)",
            worst=params(loads_not_overlapped=414, load_overlap=0.128, barriers_per_iteration=37),
        ),
    ),
}
# The QSA indexer's head sum crosses the workgroup's waves (T.GemmWarpPolicy.FullCol splits the
# heads among them), through an LDS workspace between two barriers per step.
QSA_BARRIERS = "19-22 s_barriers a key tile (the gate's most: 13)"
QSA_FINDINGS: dict[str, tuple[Finding, ...]] = {
    "sglang-qsa-prefill": (
        Finding(
            rules=UNHIDDEN_AND_BARRED,
            reason="the K tile's loads are waited for before its MFMAs, 2 of 2 an iteration: "
            "T.Pipelined(num_stages=3) prefetches nothing on gfx942; the head sum crosses the 8 "
            f"waves through LDS: {QSA_BARRIERS}",
            worst=params(loads_not_overlapped=2, barriers_per_iteration=22),
        ),
    ),
    "sglang-qsa-prefill-relative": (
        Finding(
            rules=UNHIDDEN_AND_BARRED,
            reason="as the packed prefill, and Starts[row] is read again before each of a "
            "thread's 4 logit stores: 6 of 6 loads an iteration waited for before an MFMA; "
            f"{QSA_BARRIERS}",
            worst=params(loads_not_overlapped=6, barriers_per_iteration=22),
        ),
    ),
    "sglang-qsa-decode": (
        Finding(
            rules=frozenset({"waves-per-simd", "load-overlap"}),
            reason="one 128-thread workgroup a CU: Q and a 64-row K tile (32768 B) and the head "
            "sum's 1024 B workspace are 33792 B of LDS, over half of 65536: 0.5 waves/SIMD; each "
            "K sub-page's loads are waited for before it is written to LDS, 8 of 8 a group",
            worst=params(waves_per_simd=0.5, loads_not_overlapped=8),
        ),
        Finding(
            rules=frozenset({"barriers"}),
            tilelang="0.1.15",
            reason="under TileLang 0.1.15, a barrier more before each of 3 reuses of the head "
            "sum's workspace: 14 s_barriers a group (0.1.12: 11; the gate's most: 13)",
            worst=params(barriers_per_iteration=14),
        ),
    ),
}
