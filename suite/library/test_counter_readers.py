"""The counters tier's parts that need no GPU: ncu's and rocprofv3's CSV read per launch,
launches named in order, the regression verdict."""

import pytest

from tilegate.harness.counters import driver as counters
from tilegate.harness.counters import protocol


def _ncu_row(launch: int, metric: str, value: str) -> str:
    return (
        f'"{launch}","2310","python3.12","h","flash_fwd_kernel_kernel","1","7","(256, 1, 1)","(3, '
        '4, 1)","0","9.0",'
        f'"Command line profiler metrics","{metric}","","{value}"'
    )


NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)

NCU_CSV = (
    "\n".join(
        [
            "==PROF== Disconnected from process 2310",
            NCU_HEADER,
            _ncu_row(0, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "1,200"),
            _ncu_row(0, "smsp__inst_executed_op_shared_ld.sum", "400"),
            _ncu_row(0, "smsp__inst_executed_op_ldsm.sum", "200"),
            _ncu_row(0, "sm__warps_active.avg.pct_of_peak_sustained_active", "7.85"),
            _ncu_row(1, "smsp__inst_executed_op_shared_ld.sum", "n/a"),
        ]
    )
    + "\n"
)


def test_ncu_csv_is_read_per_launch():
    launches = counters.parse_ncu_csv(NCU_CSV)
    assert len(launches) == 2
    figures = counters.ncu_figures(launches[0])
    assert figures["ld_conflicts_per_request"] == pytest.approx(2.0)  # 1200 / (400 + 200)
    assert figures["occupancy_pct"] == pytest.approx(7.85)
    assert counters.ncu_figures(launches[1])["ld_conflicts_per_request"] is None


def test_regressions_are_named_and_noise_is_not():
    base = {"ld_conflicts_per_request": 0.5, "occupancy_pct": 40.0, "dram_pct": 60.0}
    decode = counters.Launch(
        "paged_decode_split",
        "n64w4s8",
        {"ld_conflicts_per_request": 0.52, "occupancy_pct": 37.0, "dram_pct": 58.0},
    )
    assert counters.regressions(decode, base) == []
    worse = counters.Launch(
        "paged_decode_split",
        "n64w4s8",
        {"ld_conflicts_per_request": 1.0, "occupancy_pct": 20.0, "dram_pct": 30.0},
    )
    assert {r.figure for r in counters.regressions(worse, base)} == {
        "ld_conflicts_per_request",
        "occupancy_pct",
        "dram_pct",
    }
    prefill = counters.Launch(
        "flash_fwd",
        "m64n64w4",
        {"ld_conflicts_per_request": 0.5, "occupancy_pct": 40.0, "dram_pct": 1.0},
    )
    assert counters.regressions(prefill, base) == []  # DRAM throughput is judged for decode only


def test_launches_are_named_in_order():
    out = "\n".join(
        [
            "x",
            protocol.launch_line("flash_fwd", "m64n64w4"),
            "noise",
            protocol.launch_line("flash_fwd", "m128n64w8"),
            protocol.DONE,
        ]
    )
    assert protocol.launch_names(out) == [("flash_fwd", "m64n64w4"), ("flash_fwd", "m128n64w8")]
    assert protocol.finished(out) and not protocol.finished(out.replace(protocol.DONE, ""))
    with pytest.raises(counters.ProfilerError):
        counters._named(protocol.launch_names(out), [{}], "ncu")


def test_rocprof_csv_is_summed_per_dispatch():
    csv_text = (
        "Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n"
        "1,flash_fwd_kernel,SQ_LDS_BANK_CONFLICT,30\n1,flash_fwd_kernel,SQ_LDS_BANK_CONFLICT,10\n"
        "1,flash_fwd_kernel,SQ_INSTS_LDS,80\n2,flash_fwd_kernel,SQ_INSTS_LDS,5\n"
    )
    rows = counters.parse_rocprof_csv(csv_text)
    assert counters.rocprof_figures(rows[0])["lds_conflicts_per_instruction"] == pytest.approx(0.5)
    assert len(rows) == 2
