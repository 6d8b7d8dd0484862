"""Latency proxies of a gfx942 kernel's inner loop, read from its disassembly
(tilegate/gfx942/inner_loop.py finds the loop): what hides, or fails to hide, the latency of memory.

- **Loads not overlapped.** A global load whose ``s_waitcnt vmcnt`` is reached with no MFMA issued
  since the load: the wave sits idle for the whole trip to memory. The loop body is walked twice in
  a
  row, so that a load issued for the next key block (a register prefetch) is judged by the wait it
  meets in the next iteration. vmcnt counts loads and stores, in issue order (AMD CDNA3 ISA guide,
  "Data dependency resolution"), so ``vmcnt(N)`` waits for all but the N newest. The body is in
  the order an iteration runs its blocks (tilegate/gfx942/loop_forest.py ``execution_order``).
- **Barriers** (``s_barrier``) per iteration: every one stalls each wave until the slowest arrives.
- **LDS round trips of the row reductions**: the cross-lane exchanges of TileLang's reductions go
  through the LDS unit (``ds_bpermute``, or ``ds_permute`` / ``ds_swizzle``; gfx942's DPP does not
  cross 16-lane rows freely), each a trip the wave waits for (lgkmcnt). A reduction that crosses
  waves writes its partials to an LDS workspace between two barriers: that shows in the barriers.

Like llvm-mca's cycles these model no other waves and no cache: they move when the loop's order of
loads, waits and matrix instructions does, and are no prediction of time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# each issue counts on vmcnt (flat_ on lgkmcnt too; scratch_ is a spill's trip to memory)
VMEM_PREFIXES = ("global_", "buffer_", "flat_", "scratch_")
CROSS_LANE = ("ds_bpermute_b32", "ds_permute_b32", "ds_swizzle_b32")
_VMCNT = re.compile(r"\bvmcnt\((\d+)\)")


@dataclass(frozen=True)
class LatencyProxies:
    loads: int  # global (and scratch) loads in the loop body
    loads_not_overlapped: int  # of those, waited for with no MFMA issued since
    barriers: int  # s_barrier per iteration
    reduction_lds_round_trips: int  # ds_bpermute / ds_permute / ds_swizzle per iteration
    # False: no inner loop was found, and the zeros above measure nothing (a loop can have no
    # load and no barrier: K hoisted out of it)
    has_loop: bool = True
    # MFMAs in the loop body: none, where the kernel does matrix products, means the loop found is
    # not its key loop (that one was unrolled) but an index or copy loop beside it
    mfmas: int = 0


NO_PROXIES = LatencyProxies(0, 0, 0, 0, has_loop=False)  # a kernel without a loop


def _mnemonic(text: str) -> str:
    return text.split()[0]


def _is_vmem(mnemonic: str) -> bool:
    return mnemonic.startswith(VMEM_PREFIXES) and any(
        kind in mnemonic for kind in ("_load", "_store", "_atomic")
    )


def _is_load(mnemonic: str) -> bool:
    return _is_vmem(mnemonic) and "_load" in mnemonic


def unoverlapped_loads(body: list[str]) -> tuple[int, int]:
    """(loads, loads not overlapped) of a loop ``body`` (its instructions' text, in order, without
    the branches): each load of the first pass judged by the wait that retires it, in this pass or
    the next. A load no wait retires within two passes is overlapped (the rest of the loop runs)."""
    n = len(body)
    outstanding: list[list] = []  # [body index, is a load, an MFMA issued since]
    verdicts: dict[int, bool] = {}  # body index of a first-pass load -> overlapped
    for pos, text in enumerate(body + body):
        name = _mnemonic(text)
        if name.startswith("v_mfma"):
            for op in outstanding:
                op[2] = True
        elif _is_vmem(name):
            outstanding.append([pos, _is_load(name), False])
        elif name == "s_waitcnt" and (m := _VMCNT.search(text)):
            keep = int(m.group(1))
            while len(outstanding) > keep:
                at, is_load, overlapped = outstanding.pop(0)
                if is_load and at < n:
                    verdicts[at] = overlapped
    loads = sum(1 for text in body if _is_load(_mnemonic(text)))
    return loads, sum(1 for overlapped in verdicts.values() if not overlapped)


def latency_proxies(body: list[str] | None) -> LatencyProxies:
    """The proxies of an inner loop (tilegate.gfx942.inner_loop.inner_loop); NO_PROXIES without
    one."""
    if body is None:
        return NO_PROXIES
    names = [_mnemonic(text) for text in body]
    loads, not_overlapped = unoverlapped_loads(body)
    return LatencyProxies(
        loads=loads,
        loads_not_overlapped=not_overlapped,
        barriers=names.count("s_barrier"),
        reduction_lds_round_trips=sum(names.count(op) for op in CROSS_LANE),
        mfmas=sum(1 for name in names if name.startswith("v_mfma")),
    )
