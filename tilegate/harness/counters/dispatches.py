"""What a profiler reports per kernel dispatch, and how the dispatches are paired with the launches
the child announced: in order, and only where each dispatch's kernel is the one announced."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilegate.harness.counters import protocol


class ProfilerError(RuntimeError):
    """The profiler ran but gave no counters for the workload."""


@dataclass(frozen=True)
class Dispatch:
    """One profiled dispatch as the profiler printed it."""

    ident: int  # the profiler's own id (rocprofv3's Dispatch_Id, ncu's ID), for messages
    kernel: str  # the kernel name the profiler printed
    counters: dict  # counter name -> float, or None where the profiler printed no number


@dataclass(frozen=True)
class Launch:
    kernel: str  # the gate's kernel name (flash_fwd, paged_extend, paged_decode_split)
    config: str
    figures: dict  # figure name -> float, or None where the profiler had no value

    @property
    def key(self) -> str:
        return f"{self.kernel}-{self.config}"


def _symbol(kernel: str) -> str:
    if kernel not in protocol.SYMBOLS:
        raise ProfilerError(
            f"the child announced a launch of {kernel!r}: the counters tier profiles "
            f"{sorted(protocol.SYMBOLS)}"
        )
    return protocol.SYMBOLS[kernel]


def name_launches(
    names: list[tuple[str, str]],
    dispatches: list[Dispatch],
    figures: Callable[[dict], dict],
    what: str,
) -> list[Launch]:
    """The N-th announced launch is the N-th dispatch, provided the dispatch ran that launch's
    kernel. A kernel the gate does not launch (one that slipped past the profiler's regex, or
    one TileLang renamed) is an error that names it, never a figure filed under the wrong
    launch."""
    expected = set(protocol.SYMBOLS.values())
    strays = [d for d in dispatches if d.kernel not in expected]
    if strays:
        listed = ", ".join(f"{d.kernel!r} (dispatch {d.ident})" for d in strays)
        raise ProfilerError(
            f"{what} profiled kernels the gate does not launch: {listed}; the gate's kernels "
            f"are {sorted(expected)}"
        )
    if len(names) != len(dispatches):
        raise ProfilerError(
            f"{what} profiled {len(dispatches)} launches, the workload made {len(names)}: {names}"
        )
    launches = []
    for (kernel, config), dispatch in zip(names, dispatches):
        if dispatch.kernel != _symbol(kernel):
            raise ProfilerError(
                f"{what}: dispatch {dispatch.ident} ran {dispatch.kernel!r} where the child "
                f"announced {kernel} {config} ({_symbol(kernel)!r})"
            )
        launches.append(Launch(kernel, config, figures(dispatch.counters)))
    return launches
