"""Where a served decode step's time goes: SGLang's torch profiler around a batch's generation
(inside the bench child, tilegate.harness.sglang.bench), its Chrome trace summed per step.

The decode window starts at the first CUDA-graph launch (SGLang replays a graph per decode step;
the batch's prefill runs before it, eagerly) and ends at the last kernel's end. Per step: the
window's wall time, the GPU time of each kernel category (the decode attention kernels, their
combine, every other kernel), the time no kernel ran, and the host time spent in the backend's
per-batch preparation (``PREPARE_RANGE``, a record_function the tilelang backend opens) and in
calls that wait for the device.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from tilegate.serving.sglang_backend import PREPARE_RANGE

# Kernel names: tilegate's TileLang kernels, and SGLang's triton decode
# (sglang/kernels/ops/attention/decode_attention.py: stage 1 per split, stage 2 combines).
CATEGORIES = (
    ("decode attention", re.compile(r"paged_decode_split|_fwd_grouped_kernel_stage1|stage1")),
    ("combine", re.compile(r"paged_decode_combine|_fwd_kernel_stage2|stage2")),
)
OTHER = "other kernels"
# runtime calls only: an aten op that reads back (aten::_local_scalar_dense) encloses one of these
HOST_WAITS = re.compile(r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize")


@dataclass(frozen=True)
class StepProfile:
    """Microseconds per decode step, over ``steps`` graph-replayed steps."""

    steps: int
    wall_us: float
    kernel_us: dict[str, float]  # per category, GPU time
    idle_us: float  # wall minus the union of kernel intervals
    prepare_us: float  # host, inside PREPARE_RANGE
    host_wait_us: float  # host, in calls that wait for the device

    def as_dict(self) -> dict:
        return asdict(self)


def category(kernel_name: str) -> str:
    for name, pattern in CATEGORIES:
        if pattern.search(kernel_name):
            return name
    return OTHER


def _busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals: kernels of two streams may overlap."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def summarize(events: list[dict]) -> StepProfile:
    """One profile's trace events (Chrome trace format, times in us) as per-step figures."""
    launches = [e for e in events if e.get("name") == "cudaGraphLaunch"]
    if not launches:
        raise ValueError("no cudaGraphLaunch in the trace: no decode step ran as a graph")
    begin = min(e["ts"] for e in launches)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["ts"] >= begin]
    if not kernels:
        raise ValueError("no kernel in the trace after the first graph launch")
    end = max(e["ts"] + e["dur"] for e in kernels)
    steps = len(launches)
    per_category: dict[str, float] = {name: 0.0 for name, _ in CATEGORIES} | {OTHER: 0.0}
    for e in kernels:
        per_category[category(e["name"])] += e["dur"]
    host = [e for e in events if e.get("ph") == "X" and begin <= e.get("ts", -1) <= end]
    prepare = sum(e["dur"] for e in host if e.get("name") == PREPARE_RANGE)
    waits = sum(e["dur"] for e in host if HOST_WAITS.search(e.get("name", "")))
    wall = end - begin
    busy = _busy_us([(e["ts"], e["ts"] + e["dur"]) for e in kernels])
    return StepProfile(
        steps=steps,
        wall_us=wall / steps,
        kernel_us={k: v / steps for k, v in per_category.items()},
        idle_us=(wall - busy) / steps,
        prepare_us=prepare / steps,
        host_wait_us=waits / steps,
    )


def read_trace(folder: Path) -> list[dict]:
    """The events of the one trace SGLang's profiler wrote under ``folder``."""
    traces = sorted(Path(folder).rglob("*.trace.json*"))
    if len(traces) != 1:
        raise ValueError(f"expected one trace under {folder}, found {[t.name for t in traces]}")
    opener = gzip.open if traces[0].suffix == ".gz" else open
    with opener(traces[0], "rt") as f:
        return json.load(f)["traceEvents"]


def profile_decode(engine, ids: list[list[int]], new_tokens: int, folder: Path) -> StepProfile:
    """Profile ``engine`` generating ``new_tokens`` for the batch ``ids`` (greedy)."""
    folder.mkdir(parents=True, exist_ok=True)
    engine.start_profile(
        output_dir=str(folder), activities=["CPU", "GPU"], with_stack=False, record_shapes=False
    )
    engine.generate(
        input_ids=ids,
        sampling_params={"temperature": 0.0, "max_new_tokens": new_tokens, "ignore_eos": True},
    )
    engine.stop_profile()
    return summarize(read_trace(folder))


def table(profiles: dict[str, dict]) -> list[str]:
    """Markdown: per backend, microseconds per decode step."""
    names = list(profiles)
    rows = [
        ("decode step, wall", lambda p: p["wall_us"]),
        *((f"GPU: {c}", lambda p, c=c: p["kernel_us"][c]) for c, _ in CATEGORIES),
        (f"GPU: {OTHER}", lambda p: p["kernel_us"][OTHER]),
        ("GPU idle", lambda p: p["idle_us"]),
        ("host: backend's batch preparation", lambda p: p["prepare_us"]),
        ("host: waiting for the device", lambda p: p["host_wait_us"]),
    ]
    lines = [
        "| us per decode step | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(f"{get(profiles[n]):.0f}" for n in names) + " |")
    lines.append("steps: " + ", ".join(f"{n} {profiles[n]['steps']}" for n in names))
    return lines
