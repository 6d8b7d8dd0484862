"""Serving benchmark on the MI300X runner (perf tier, opt-in): SGLang serving the local Llama-3
checkpoint with attention_backend="tilelang" (the TileLang kernels) and with SGLang's default ROCm
backend, one after the other in one child process (tilegate.harness.sglang_bench): batch 32 x
1024 input tokens -> 512 output tokens, and one 32768-token prompt. A report: the table goes to
the terminal and artifacts/perf/serving.{md,json}; what is asserted is that both backends served
every token asked for, the 32k prompt whole.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tilegate.harness.sglang_bench import table
from tilegate.harness.sglang_driver import EngineRun
from tilegate.report import PERF_DIR

pytestmark = [pytest.mark.perf, pytest.mark.rocm, pytest.mark.gpu, pytest.mark.llama3, pytest.mark.slow,
              pytest.mark.xdist_group("perf")]

BENCH = {"backends": ["tilelang", "default"], "batch": 32, "input_len": 1024, "output_len": 512,
         "long_len": 32768, "long_output": 32, "seed": 0}


def bench_spec(model: str, bench: dict, device: str = "cuda", dtype: str = "bfloat16", engine_kwargs=None) -> dict:
    """A child spec with only the benchmark phase (no comparison prompts, no reference)."""
    kw = engine_kwargs if engine_kwargs is not None else {"context_length": bench["long_len"] + 64,
                                                          "mem_fraction_static": 0.8, "log_level": "error"}
    return {"model": model, "rounds": [], "max_new_tokens": 1, "reference": False, "backends": [],
            "device": device, "dtype": dtype, "engine_kwargs": kw, "bench": bench}


def check_bench(bench: dict, artifacts_dir: Path) -> None:
    out = artifacts_dir / PERF_DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / "serving.json").write_text(json.dumps(bench, indent=1))
    (out / "serving.md").write_text("\n".join(table(bench)) + "\n")
    print("\n" + "\n".join(table(bench)))
    spec = bench["spec"]
    for name, r in bench["backends"].items():
        assert r["batch_generated"] == spec["batch"] * spec["output_len"], (name, r)
        assert r["long_prompt_tokens"] == spec["long_len"], f"{name} served {r['long_prompt_tokens']} prompt tokens"


def test_sglang_serving_tilelang_vs_default_backend(tmp_path_factory, artifacts_dir, request):
    path = str(Path(request.config.getoption("--llama3-path")).resolve())
    run = EngineRun(tmp_path_factory.mktemp("serving-bench"), bench_spec(path, BENCH), python=Path(sys.executable),
                    cpu=False)
    check_bench(run.result(timeout=3600)["bench"], artifacts_dir)
