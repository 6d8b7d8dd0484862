"""The serving benchmark (perf tier, opt-in: -m perf): SGLang serving a Llama-3-8B-shaped model
(fixtures/llama3_shape.py, random weights from its config: load_format="dummy") with
attention_backend="tilelang" (the TileLang kernels) and with its peer (triton on CUDA, SGLang's
default on ROCm), both engines resident, measured in interleaved rounds in one child
(tilegate.harness.sglang.bench): batch 32 x 1024 -> 512 tokens (tokens/s, TTFT) and one
32768-token prompt (TTFT, decode tokens/s). The table, JSON and chart go to
artifacts/perf/serving.*; the ratios are judged against the device's perf baseline
(suite/baselines/perf/<device>.json, keys "serving | ..."), each with the tolerance its recording
runs' noise set (tilegate.harness.perf.driver)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tilegate.artifacts.writer import PERF_DIR
from tilegate.harness.perf import driver as perf
from tilegate.harness.sglang import bench as sglang_bench
from tilegate.harness.sglang import step_profile
from tilegate.harness.sglang.driver import EngineRun
from tilegate.platform import detect
from tilegate.testing import skips

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.sglang,
    pytest.mark.slow,
    pytest.mark.deadline(2400),
    pytest.mark.xdist_group("perf"),
]

PEER = "default" if detect().kind == "rocm" else "triton"
BENCH = {
    "backends": ["tilelang", PEER],
    "batch": 32,
    "input_len": 1024,
    "output_len": 512,
    "long_len": 32768,
    # 512 decode steps: the decode rate is two calls' difference, and 128 steps left it 8% noisy
    "long_output": 512,
    "seed": 0,
    "rounds": 3,
    # after the rounds: where a batch decode step's time goes (step_profile), GPU activity only so
    # that the profiler does not slow the host it measures
    "profile_tokens": 64,
    "profile_activities": ["GPU"],
    # both engines resident: SGLang sizes each pool from the memory free at its start, the cap
    # holds the batch's 49k tokens and the long prompt
    "engine_kwargs": {
        "mem_fraction_static": 0.3,
        "max_total_tokens": 98304,
        "context_length": 32768 + 1024,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "cuda_graph_max_bs_decode": 32,
        # decode graphs on, prefill graphs off: SGLang's default on ROCm
        # (fixtures/sglang_gpu_plan.py says why the H200 cannot run CUDA's)
        "disable_prefill_cuda_graph": True,
        "sampling_backend": "pytorch",
        "grammar_backend": "none",
        "log_level": "error",
    },
}


def run_bench(workdir: Path) -> dict:
    """The benchmark child, its engines serving ``tilelang`` through the production plugin: the
    harness plugin's observed backend reads each replayed batch back to the host to record it,
    which held the GPU idle about 1.4 ms of each batch-32 decode step on the H200."""
    result = EngineRun(
        workdir,
        sglang_bench.child_spec(BENCH),
        python=Path(sys.executable),
        cpu=False,
        observed=False,
    ).result(timeout=2000)
    return sglang_bench.figures_of(result)


def check_served(bench: dict) -> None:
    spec = bench["spec"]
    for name, b in bench["backends"].items():
        for r in b["rounds"]:
            assert r["batch_generated"] == spec["batch"] * spec["output_len"], (name, r)
            assert r["long_prompt_tokens"] == spec["long_len"], (
                f"{name} served {r['long_prompt_tokens']} prompt tokens"
            )


def _tables(bench: dict) -> list[str]:
    """The figures, then the decode step's profile where the bench took one."""
    profile = bench.get("profile")
    return sglang_bench.table(bench) + (["", *step_profile.table(profile)] if profile else [])


def write_artifacts(benches: list[dict], device: str, artifacts_dir: Path) -> dict:
    """serving.json (every run), serving.md (the first's table), serving.png; returns the first
    run as a perf document (tilegate.harness.perf.driver's table, chart and regressions read it)."""
    out = artifacts_dir / PERF_DIR
    out.mkdir(parents=True, exist_ok=True)
    doc = {"device": device, "records": sglang_bench.records(benches[0])}
    (out / "serving.json").write_text(json.dumps(benches, indent=1))
    (out / "serving.md").write_text("\n".join(_tables(benches[0])) + "\n")
    perf.chart(doc, out / "serving.png")
    return doc


def test_serving_tilelang_against_the_peer(request, platform, tmp_path_factory, artifacts_dir):
    device = platform.device_name or platform.describe()
    recording = request.config.getoption("--update-perf-baseline")
    benches = [
        run_bench(tmp_path_factory.mktemp("serving-bench")) for _ in range(2 if recording else 1)
    ]
    for bench in benches:
        check_served(bench)
    doc = write_artifacts(benches, device, artifacts_dir)
    print("\n" + "\n".join(_tables(benches[0])))
    runs = [{"device": device, "records": sglang_bench.records(b)} for b in benches]
    if recording:
        path = perf.update_baseline(device, runs)
        print(
            f"baseline recorded: {path}\n"
            + "\n".join(
                f"  {k}: noise {v['noise']:.1%} -> allowed fall {v['tolerance']:.0%}"
                for k, v in perf.baseline_from(runs).items()
            )
        )
        return
    baseline = (perf.load_baseline(device) or {}).get("records", {})
    if not any(perf.key(r) in baseline for r in doc["records"]):
        skips.missing(
            f"no serving baseline for {device}: table in "
            f"{artifacts_dir / PERF_DIR / 'serving.md'}; "
            "record one with -m perf --update-perf-baseline"
        )
    problems = perf.regressions(doc, baseline, owns=perf.is_serving_key)
    assert not problems, f"slower than {device}'s serving baseline:\n" + "\n".join(
        map(str, problems)
    )
