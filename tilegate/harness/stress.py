"""The stress tier's engine (suite/stress/test_stress.py): one launch repeated on the same inputs,
each output compared bit for bit with the first, alone and then with a second stream of copies
competing for the GPU.

A race on an asynchronous path (TMA, cp.async on mbarriers, a producer warpgroup, a register
prefetch staged into shared memory) is lost only when one side runs late, so a launch shows it
or not by timing. Bits rather than an error bound: a race that changes one element by one ulp
is still a race. The repeats are enqueued back to back and compared on the GPU, with one
read-back per pass, so that no host round trip spaces the launches out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tilegate.kernels.configs import PRODUCER_WARPGROUP, REGISTER_PREFETCH, TMA_PIPELINE

# Same-width integer views: a bitwise comparison (NaN equals NaN with the same bits; -0 is not +0).
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class StressPass:
    repeats: int
    differing: int  # repeats whose output differs from the first in any bit
    most_elements_differing: int
    seconds: float
    competitor: str = ""  # what shared the GPU ("" when alone)


def cuda_source_shows(path: str, source: str) -> bool:
    """Whether a CUDA build's ``source`` takes ``path`` (kernels/configs.py's asynchronous paths): a
    check that the tier is not repeating a synchronous kernel."""
    if path == TMA_PIPELINE:
        return "tma_load" in source
    if path == PRODUCER_WARPGROUP:
        return "mbarrier_cp_async_arrive" in source
    # the next block's K written into its registers before this block's first product
    if path == REGISTER_PREFETCH:
        loop = source[source.find("for (int kb = 0;") :].splitlines()
        for line in loop:
            if "wgmma" in line or "mma_sync" in line:
                return False
            target, assigns, _ = line.partition(" = ")
            if assigns and "k_next" in target:
                return True
        return False
    raise ValueError(f"unknown asynchronous path {path!r}")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(_BITS[t.element_size()])


class CompetingCopies:
    """A second stream copying a buffer while the kernel runs: it takes SMs, memory bandwidth and
    L2 from the kernel's blocks, so that their relative timing shifts from launch to launch. Each
    ``keep_busy`` enqueues enough copies to last about one launch (``calibrate``)."""

    name = "device-to-device copies on a second stream"

    def __init__(self, device: torch.device, mib: int = 256):
        self.stream = torch.cuda.Stream(device)
        self.src = torch.empty(mib << 20, dtype=torch.uint8, device=device)
        self.dst = torch.empty_like(self.src)
        self.copies_per_launch = 1

    def copy_seconds(self) -> float:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            self.dst.copy_(self.src)  # warm
            start.record()
            self.dst.copy_(self.src)
            stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    def calibrate(self, launch_seconds: float) -> None:
        self.copies_per_launch = max(1, math.ceil(launch_seconds / self.copy_seconds()))

    def keep_busy(self) -> None:
        with torch.cuda.stream(self.stream):
            for _ in range(self.copies_per_launch):
                self.dst.copy_(self.src)

    def drain(self) -> None:
        self.stream.synchronize()


def repeat_bitwise(
    launch: Callable[[], torch.Tensor],
    first: torch.Tensor,
    repeats: int,
    competitor: CompetingCopies | None = None,
) -> StressPass:
    """Run ``launch`` ``repeats`` times; count the repeats whose output's bits differ from
    ``first``'s."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    want = _bits(first)
    counts = torch.zeros(repeats, dtype=torch.int64, device=first.device)
    if first.is_cuda:
        torch.cuda.synchronize(first.device)
    start = time.perf_counter()
    for r in range(repeats):
        if competitor is not None:
            competitor.keep_busy()
        counts[r] = (_bits(launch()) != want).sum()
    counts = counts.cpu()  # the pass's one read-back, after its last launch
    if competitor is not None:
        competitor.drain()
    seconds = time.perf_counter() - start
    return StressPass(
        repeats,
        int((counts > 0).sum()),
        int(counts.max()),
        seconds,
        competitor.name if competitor else "",
    )
