"""Where a served decode step's time goes: SGLang's torch profiler around a batch's generation
(inside the bench child, tilegate.harness.sglang.bench), its Chrome trace summed per step.

The decode window starts at a CUDA-graph launch (SGLang replays a graph per decode step; the
batch's prefill runs eagerly, before and between the first of them) a quarter of the way through
the steps, and ends at the last kernel's end. Per step: the
window's wall time, the GPU time of each kernel category (the decode attention kernels, their
combine, every other kernel), the time no kernel ran, and the host time spent in the backend's
per-batch preparation (``PREPARE_RANGE``, a record_function the tilelang backend opens) and in
calls that wait for the device. Two breakdowns say where to look next: the kernels with the most GPU
time, and the kernels the GPU was idle before (a gap is charged to the kernel that ends it, so idle
between graph replays lands on each step's first kernel).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
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
TOP = 12  # kernels named in each breakdown
# SGLang's profiler activities, by default both. ["GPU"] alone (what the serving benchmark asks)
# records kernels and CUDA runtime calls (the graph launches and syncs the summary needs) without
# timing every host op, which slows the host enough to leave the GPU waiting for it: the idle
# figure is then the unprofiled host's, nearly; the backend's preparation is not recorded.
ACTIVITIES = ("CPU", "GPU")
NAME_CHARS = 100  # of a kernel's name in the table (templated names run to thousands)


@dataclass(frozen=True)
class StepProfile:
    """Microseconds per decode step, over ``steps`` graph-replayed steps."""

    steps: int
    wall_us: float
    kernel_us: dict[str, float]  # per category, GPU time
    idle_us: float  # wall minus the union of kernel intervals
    prepare_us: float | None  # host, inside PREPARE_RANGE; None: host ops were not recorded
    host_wait_us: float  # host, in calls that wait for the device
    top_kernels: dict[str, float]  # the TOP kernel names with the most GPU time
    idle_before: dict[str, float]  # the TOP kernel names the GPU was idle longest before
    window_start: str  # where the profiled steps begin (summarize)

    def as_dict(self) -> dict:
        return asdict(self)


def category(kernel_name: str) -> str:
    for name, pattern in CATEGORIES:
        if pattern.search(kernel_name):
            return name
    return OTHER


def _busy_and_gaps(kernels: list[dict], begin: float) -> tuple[float, Counter[str]]:
    """Length of the union of the kernels' [start, end) intervals (kernels of two streams may
    overlap), and each idle gap from ``begin`` on, charged to the kernel that ends it."""
    busy, reach, gaps = 0.0, begin, Counter[str]()
    for e in sorted(kernels, key=lambda e: e["ts"]):
        start, end = e["ts"], e["ts"] + e["dur"]
        if start > reach:
            gaps[e["name"]] += start - reach
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy, gaps


def _top(per_name: Counter[str], steps: int) -> dict[str, float]:
    return {name: us / steps for name, us in per_name.most_common(TOP)}


def _window_start(launch: dict, kernels: list[dict]) -> tuple[float, str]:
    """The first kernel a graph launch ran (the profiler gives both one correlation id), so that
    the previous step's kernels, still running when the host launched this one, stay out; the
    launch call's own time where no kernel is correlated with it."""
    corr = launch.get("args", {}).get("correlation")
    starts = [
        k["ts"]
        for k in kernels
        if corr is not None and k.get("args", {}).get("correlation") == corr
    ]
    if starts:
        return min(starts), "the first kernel of a graph replay"
    return launch["ts"], "a graph launch call (no kernel correlated with it)"


def summarize(events: list[dict]) -> StepProfile:
    """One profile's trace events (Chrome trace format, times in us) as per-step figures."""
    launches = sorted(
        (e for e in events if e.get("name") == "cudaGraphLaunch"), key=lambda e: e["ts"]
    )
    if not launches:
        raise ValueError("no cudaGraphLaunch in the trace: no decode step ran as a graph")
    # The first quarter of the steps is left out: requests whose prefill chunk is done may decode
    # (as a graph) while the rest of the batch still prefills, which put prefill kernels into a
    # profiled triton window on the H200.
    launches = launches[len(launches) // 4 :]
    all_kernels = [e for e in events if e.get("cat") == "kernel"]
    begin, window_start = _window_start(launches[0], all_kernels)
    kernels = [e for e in all_kernels if e["ts"] >= begin]
    if not kernels:
        raise ValueError("no kernel in the trace after the first graph launch")
    end = max(e["ts"] + e["dur"] for e in kernels)
    steps = len(launches)
    per_category: dict[str, float] = {name: 0.0 for name, _ in CATEGORIES} | {OTHER: 0.0}
    per_kernel: Counter[str] = Counter()
    for e in kernels:
        per_category[category(e["name"])] += e["dur"]
        per_kernel[e["name"]] += e["dur"]
    host = [e for e in events if e.get("ph") == "X" and begin <= e.get("ts", -1) <= end]
    prepare = sum(e["dur"] for e in host if e.get("name") == PREPARE_RANGE)
    host_ops = any(e.get("cat") == "cpu_op" for e in events)  # the CPU activity was on
    waits = sum(e["dur"] for e in host if HOST_WAITS.search(e.get("name", "")))
    wall = end - begin
    busy, gaps = _busy_and_gaps(kernels, begin)
    return StepProfile(
        steps=steps,
        wall_us=wall / steps,
        kernel_us={k: v / steps for k, v in per_category.items()},
        idle_us=(wall - busy) / steps,
        prepare_us=prepare / steps if host_ops else None,
        host_wait_us=waits / steps,
        top_kernels=_top(per_kernel, steps),
        idle_before=_top(gaps, steps),
        window_start=window_start,
    )


def read_trace(folder: Path) -> list[dict]:
    """The events of the one trace SGLang's profiler wrote under ``folder``."""
    traces = sorted(Path(folder).rglob("*.trace.json*"))
    if len(traces) != 1:
        raise ValueError(f"expected one trace under {folder}, found {[t.name for t in traces]}")
    opener = gzip.open if traces[0].suffix == ".gz" else open
    with opener(traces[0], "rt") as f:
        return json.load(f)["traceEvents"]


def profile_decode(
    engine, ids: list[list[int]], new_tokens: int, folder: Path, activities=ACTIVITIES
) -> StepProfile:
    """Profile ``engine`` generating ``new_tokens`` for the batch ``ids`` (greedy)."""
    folder.mkdir(parents=True, exist_ok=True)
    engine.start_profile(
        output_dir=str(folder), activities=list(activities), with_stack=False, record_shapes=False
    )
    engine.generate(
        input_ids=ids,
        sampling_params={"temperature": 0.0, "max_new_tokens": new_tokens, "ignore_eos": True},
    )
    engine.stop_profile()
    return summarize(read_trace(folder))


def _us(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.0f}"


def table(profiles: dict[str, dict]) -> list[str]:
    """Markdown: per backend, microseconds per decode step."""
    names = list(profiles)
    rows = [
        ("decode step, wall", lambda p: p["wall_us"]),
        *((f"GPU: {c}", lambda p, c=c: p["kernel_us"][c]) for c, _ in CATEGORIES),
        (f"GPU: {OTHER}", lambda p: p["kernel_us"][OTHER]),
        ("GPU idle", lambda p: p["idle_us"]),
        ("host: backend's batch preparation", lambda p: p["prepare_us"]),  # None: not recorded
        ("host: waiting for the device", lambda p: p["host_wait_us"]),
    ]
    lines = [
        "| us per decode step | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(_us(get(profiles[n])) for n in names) + " |")
    lines.append("steps: " + ", ".join(f"{n} {profiles[n]['steps']}" for n in names))
    lines.append("window from: " + ", ".join(f"{n} {profiles[n]['window_start']}" for n in names))
    for n in names:
        for title, key in (("GPU time", "top_kernels"), ("GPU idle before", "idle_before")):
            lines.append(
                f"{n}, {title}, us per step: "
                + "; ".join(f"{k[:NAME_CHARS]} {v:.0f}" for k, v in profiles[n][key].items())
            )
    return lines
