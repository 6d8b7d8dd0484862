"""Paired timing of a kernel and its peer on one GPU: each side captured as a CUDA/HIP graph of
back-to-back calls, the two graphs replayed alternately, and the ratio taken pair by pair.

Why: launch overhead and the host's jitter are left out (a replay is one launch for many calls),
and a clock or thermal drift of the shared machine moves both sides of a pair alike, so the
ratio keeps a spread of about a percent where timing each side in its own block of calls left
5-15% at the longest prefills (issue 36's measurements). Where a side cannot be captured (a
launch that reads back to the host), both sides are timed eagerly, call by call, and the record
says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

WARMUP = 3
TARGET_REPLAY_MS = 2.0  # calls per graph: enough that one replay lasts about this long
MAX_CALLS = 64


@dataclass(frozen=True)
class PairTiming:
    """Per round: the kernel's and the peer's median ms per call, and the median of the pairs'
    ratios (peer time / kernel time)."""

    kernel_ms: list[float]
    peer_ms: list[float]
    ratios: list[float]
    graphed: bool

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> float:
        """The rounds' ratios, max minus min, over their median."""
        return (max(self.ratios) - min(self.ratios)) / self.ratio


def _event_ms(fn: Callable[[], object]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """``calls`` back-to-back calls of ``fn`` as one graph, warmed up on a side stream first."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def eager_ms(fn: Callable[[], object], calls: int = 10) -> float:
    """Median ms of ``calls`` event-timed calls after warm-up (no graph)."""
    for _ in range(WARMUP):
        fn()
    return statistics.median(_event_ms(fn) for _ in range(calls))


def calls_per_replay(fn: Callable[[], object]) -> int:
    for _ in range(WARMUP):
        fn()
    one = statistics.median(_event_ms(fn) for _ in range(3))
    return max(1, min(MAX_CALLS, math.ceil(TARGET_REPLAY_MS / max(one, 1e-3))))


def paired(
    kernel: Callable[[], object], peer: Callable[[], object], *, rounds: int, pairs: int
) -> PairTiming:
    """``rounds`` rounds of ``pairs`` alternating replays (kernel, peer, kernel, ...)."""
    calls = {"kernel": calls_per_replay(kernel), "peer": calls_per_replay(peer)}
    try:
        runs = {"kernel": capture(kernel, calls["kernel"]), "peer": capture(peer, calls["peer"])}
        sides = {name: graph.replay for name, graph in runs.items()}
        graphed = True
    except RuntimeError:  # a side that cannot be captured: both eagerly, one call at a time
        torch.cuda.synchronize()
        sides, calls, graphed = {"kernel": kernel, "peer": peer}, {"kernel": 1, "peer": 1}, False
    for fn in sides.values():
        fn()
    mine, theirs, ratios = [], [], []
    for _ in range(rounds):
        k_ms, p_ms = [], []
        for _ in range(pairs):
            k_ms.append(_event_ms(sides["kernel"]) / calls["kernel"])
            p_ms.append(_event_ms(sides["peer"]) / calls["peer"])
        mine.append(statistics.median(k_ms))
        theirs.append(statistics.median(p_ms))
        ratios.append(statistics.median(p / k for k, p in zip(k_ms, p_ms)))
    return PairTiming(mine, theirs, ratios, graphed)


def graph_ms(fn: Callable[[], object], replays: int = 10) -> float:
    """Median ms per call of ``fn`` replayed as a graph (eagerly where it cannot be captured)."""
    calls = calls_per_replay(fn)
    try:
        run = capture(fn, calls).replay
    except RuntimeError:
        torch.cuda.synchronize()
        run, calls = fn, 1
    run()
    return statistics.median(_event_ms(run) for _ in range(replays)) / calls
