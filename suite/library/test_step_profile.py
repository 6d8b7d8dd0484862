"""The decode-step profile's arithmetic (tilegate/harness/sglang/step_profile.py) on a hand-built
Chrome trace: the trace format is torch's profiler's (kernel events ``cat: kernel``, host ranges
``ph: X``, times in us)."""

import gzip
import json

import pytest

from tilegate.harness.sglang import step_profile
from tilegate.serving.sglang_backend import PREPARE_RANGE


def _kernel(name, ts, dur):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}


def _host(name, ts, dur):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur}


TRACE = [
    _kernel("flash_fwd_prefill", 0, 500),  # before the first graph launch: the prefill, left out
    _host("cudaGraphLaunch", 1000, 5),
    _host(PREPARE_RANGE, 990, 8),
    _kernel("paged_decode_split_kernel_kernel", 1010, 40),
    _kernel("paged_decode_combine_kernel_kernel", 1050, 5),
    _kernel("gemm", 1055, 100),
    _host("cudaGraphLaunch", 1200, 5),
    _host(PREPARE_RANGE, 1190, 12),
    _host("cudaStreamSynchronize", 1195, 30),
    _kernel("_fwd_grouped_kernel_stage1", 1210, 40),  # triton's names fall in the same rows
    _kernel("_fwd_kernel_stage2", 1250, 5),
    _kernel("gemm", 1255, 100),
    _kernel("gemm_overlapping", 1300, 100),  # a second stream: counted once in the busy time
]


def test_a_step_is_split_into_attention_combine_other_and_idle():
    p = step_profile.summarize(TRACE)
    assert p.steps == 2
    assert p.wall_us == pytest.approx((1400 - 1000) / 2)
    assert p.kernel_us == {"decode attention": 40, "combine": 5, "other kernels": 150}
    # busy: 1010-1155 and 1210-1400; the rest of 1000-1400 idle
    assert p.idle_us == pytest.approx((400 - 145 - 190) / 2)
    assert p.prepare_us == pytest.approx(12 / 2)  # the first range began before the window
    assert p.host_wait_us == pytest.approx(30 / 2)


def test_a_trace_without_graph_replays_is_refused():
    with pytest.raises(ValueError, match="no cudaGraphLaunch"):
        step_profile.summarize([_kernel("gemm", 0, 10)])


def test_the_one_trace_is_read_from_its_folder_and_two_are_refused(tmp_path):
    with gzip.open(tmp_path / "a.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": TRACE}, f)
    assert step_profile.read_trace(tmp_path) == TRACE
    (tmp_path / "b.trace.json").write_text("{}")
    with pytest.raises(ValueError, match="expected one trace"):
        step_profile.read_trace(tmp_path)


def test_the_table_has_a_column_per_backend():
    p = step_profile.summarize(TRACE).as_dict()
    lines = step_profile.table({"tilelang": p, "triton": p})
    assert lines[0] == "| us per decode step | tilelang | triton |"
    assert "| GPU idle | 32 | 32 |" in lines


def test_gpu_time_is_named_by_kernel_and_each_idle_gap_by_the_kernel_that_ends_it():
    p = step_profile.summarize(TRACE)
    assert p.top_kernels["gemm"] == pytest.approx(200 / 2)
    assert p.top_kernels["gemm_overlapping"] == pytest.approx(100 / 2)
    assert list(p.top_kernels)[0] == "gemm"
    # 1000 -> 1010 before the first replay's first kernel; 1155 -> 1210 before the second's
    assert p.idle_before == {
        "paged_decode_split_kernel_kernel": pytest.approx(10 / 2),
        "_fwd_grouped_kernel_stage1": pytest.approx(55 / 2),
    }
    assert sum(p.idle_before.values()) == pytest.approx(p.idle_us)
    lines = step_profile.table({"tilelang": p.as_dict()})
    assert "tilelang, GPU idle before, us per step: _fwd_grouped_kernel_stage1 28; " in "\n".join(
        lines
    )


def test_the_first_quarter_of_the_steps_where_prefill_chunks_interleave_is_left_out():
    trace = [
        _host("cudaGraphLaunch", 0, 5),
        _kernel("gemm", 10, 10),
        _kernel("prefill_chunk_gemm", 30, 500),  # the rest of the batch still prefilling
        *(
            e
            for t in (600, 700, 800)
            for e in (_host("cudaGraphLaunch", t, 5), _kernel("gemm", t + 10, 50))
        ),
    ]
    p = step_profile.summarize(trace)
    assert p.steps == 3
    assert "prefill_chunk_gemm" not in p.top_kernels
    assert p.wall_us == pytest.approx((860 - 600) / 3)


def _correlated(event, correlation):
    return event | {"args": {"correlation": correlation}}


def test_the_window_begins_at_the_first_kernel_of_a_replay_not_at_its_launch_call():
    # the host runs ahead: it launches a step while the last one's kernels still run; those must
    # not be charged to the window (the launch call is correlated with its kernels by id)
    def launch(t, c):
        return _correlated(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t, "dur": 5}, c
        )

    trace = [
        launch(0, 1),
        _correlated(_kernel("gemm", 10, 200), 1),
        launch(100, 2),  # the window's first step (1 launch of 4 is left out)
        launch(300, 3),
        launch(500, 4),
        _correlated(_kernel("tail_of_step_1", 210, 40), 1),  # after launch 2's call: not counted
        _correlated(_kernel("gemm", 250, 200), 2),
        _correlated(_kernel("gemm", 450, 200), 3),
        _correlated(_kernel("gemm", 650, 200), 4),
    ]
    p = step_profile.summarize(trace)
    assert p.window_start == "the first kernel of a graph replay"
    assert p.steps == 3
    assert p.wall_us == pytest.approx((850 - 250) / 3)
    assert "tail_of_step_1" not in p.top_kernels
    # the same trace with nothing correlated: the launch call's time, and the tail counted
    plain = step_profile.summarize([{k: v for k, v in e.items() if k != "args"} for e in trace])
    assert plain.window_start.startswith("a graph launch call")
    assert plain.top_kernels["tail_of_step_1"] == pytest.approx(40 / 3)


def test_a_profile_without_host_ops_says_the_preparation_was_not_recorded():
    # runtime calls are recorded with GPU activity alone; host ops (the preparation range) are not
    runtime = ("cudaGraphLaunch", "cudaStreamSynchronize")
    gpu_only = [
        e | {"cat": "cuda_runtime"} if e["name"] in runtime else e
        for e in TRACE
        if e["cat"] != "cpu_op" or e["name"] in runtime
    ]
    p = step_profile.summarize(gpu_only)
    assert p.prepare_us is None
    assert step_profile.summarize(TRACE).prepare_us is not None
    lines = step_profile.table({"tilelang": p.as_dict()})
    assert "| host: backend's batch preparation | not recorded |" in lines


def test_kernels_whose_names_share_their_first_hundred_characters_stay_apart():
    stem = "void at::native::elementwise_kernel<" + "x" * 100
    trace = [
        _host("cudaGraphLaunch", 0, 5),
        _kernel(stem + "<add>", 10, 30),
        _kernel(stem + "<mul>", 40, 20),
    ]
    p = step_profile.summarize(trace)
    assert p.top_kernels == {stem + "<add>": 30, stem + "<mul>": 20}
