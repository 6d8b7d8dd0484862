"""The counters tier's parts that need no GPU: ncu's CSV read per launch, launches named in order
and by kernel, the regression verdict (rocprofv3's output: test_rocprofv3_output.py)."""

import pytest

from tilegate.harness.counters import driver as counters
from tilegate.harness.counters import protocol
from tilegate.harness.counters.dispatches import Dispatch, name_launches


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
    assert [(d.ident, d.kernel) for d in launches] == [
        (0, "flash_fwd_kernel_kernel"),
        (1, "flash_fwd_kernel_kernel"),
    ]
    figures = counters.ncu_figures(launches[0].counters)
    assert figures["ld_conflicts_per_request"] == pytest.approx(2.0)  # 1200 / (400 + 200)
    assert figures["occupancy_pct"] == pytest.approx(7.85)
    assert counters.ncu_figures(launches[1].counters)["ld_conflicts_per_request"] is None


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
    one = [Dispatch(0, "flash_fwd_kernel_kernel", {})]
    with pytest.raises(counters.ProfilerError, match="profiled 1 launches, the workload made 2"):
        name_launches(protocol.launch_names(out), one, counters.ncu_figures, "ncu")
    named = name_launches(protocol.launch_names(out), one * 2, counters.ncu_figures, "ncu")
    assert [launch.key for launch in named] == ["flash_fwd-m64n64w4", "flash_fwd-m128n64w8"]


def test_an_ncu_launch_of_another_kernel_is_refused():
    out = protocol.launch_line("flash_fwd", "m64n64w4")
    stray = [Dispatch(0, "paged_decode_combine_kernel_kernel", {})]
    with pytest.raises(counters.ProfilerError, match="paged_decode_combine_kernel_kernel"):
        name_launches(protocol.launch_names(out), stray, counters.ncu_figures, "ncu")
