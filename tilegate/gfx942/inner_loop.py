"""A static cycle estimate of a gfx942 kernel's inner loop, from its disassembly and llvm-mca.

The inner loop is the loop (a cycle of the control-flow graph, tilegate/gfx942/loop_forest.py)
that holds the most MFMA instructions of its own (not inside a loop nested in it), the smallest
on a tie: the key-block loop of every attention kernel, also where a persistent kernel wraps it
in a loop over query blocks (that loop holds the same MFMAs, and more instructions). A kernel
without MFMA, the decode combine, takes its longest loop. llvm-mca runs its straight-line body
with LLVM's gfx942 scheduling model (MFMA latencies included; DESIGN.md) and gives cycles per
iteration. It models no memory latency and no other waves: a proxy that moves when the loop's
instruction mix does, not a prediction of time."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tilegate.gfx942.loop_forest import (
    BRANCHES,
    Loop,
    all_loops,
    basic_blocks,
    execution_order,
    loop_forest,
)

# "\ts_cbranch_scc1 -42   // 000000001B10: BF85FFD6 <kernel+0x158>": text, address, branch target
# (a branch to the kernel's first instruction reads <kernel>)
_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):[^<]*(<[^+>]+(?:\+0x([0-9a-fA-F]+))?>)?\s*$")
MCA_ITERATIONS = 100
# Part of the code-object cache key (tilegate/gfx942/code_object.py): a cached entry holds the
# report on the loop this rule chose. 4: loops as the control-flow graph's
# (tilegate/gfx942/loop_forest.py), so that a part of the loop laid out past its closing branch
# belongs to it, walked in the order an iteration runs its blocks (2: address spans of backward
# branches; a loop's own MFMAs, the tightest on a tie).
LOOP_RULE = "4"


NO_LOOP = "no inner loop: the kernel has no backward branch\n"
# llvm-mca 19 does not terminate on some gfx942 loops: a few of the paged decode kernels' (it
# runs at full CPU with no output, even at -iterations=1 and with --disable-cb; one loop's body
# minus any of several of its instructions finishes in 0.1 s). Such a loop gets no cycle
# estimate, said in the report, instead of a hung build; every other ISA figure still holds it.
MCA_TIMEOUT_S = 30
MCA_HUNG = f"no estimate: llvm-mca did not finish within {MCA_TIMEOUT_S} s on this loop\n"


@dataclass(frozen=True)
class Instruction:
    address: int
    text: str
    target: int | None  # a branch's destination address


def parse_listing(listing: str) -> list[Instruction]:
    out, base = [], None
    for line in listing.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        address = int(m.group(2), 16)
        base = address if base is None else base  # the kernel's first instruction is its offset 0
        # <kernel>: its first instruction
        target = None if m.group(3) is None else base + int(m.group(4) or "0", 16)
        out.append(Instruction(address, m.group(1), target))
    return out


def inner_loop(listing: str) -> list[str] | None:
    """The body (branches left out: llvm-mca models straight-line code) of the kernel's inner
    loop, its blocks in the order an iteration runs them (loop_forest.execution_order); None for a
    kernel without a loop."""
    code = parse_listing(listing)
    blocks = basic_blocks(code)
    candidates = all_loops(loop_forest(blocks))
    if not candidates:
        return None

    def instructions(indices) -> list[Instruction]:
        return [code[i] for b in indices for i in range(blocks[b].first, blocks[b].last + 1)]

    def weight(loop: Loop):
        own = sum(1 for i in instructions(loop.own_blocks()) if i.text.startswith("v_mfma"))
        size = len(instructions(loop.blocks))
        return own, (size if own == 0 else -size)  # MFMA work: its tightest loop; none: the longest

    chosen = max(candidates, key=weight)
    return [
        i.text
        for i in instructions(execution_order(blocks, chosen))
        if not i.text.startswith(BRANCHES)
    ]


# A mixed-precision FMA whose addend is the constant 0 (``v_fma_mixlo_f16 v1, v2, v3, 0``) is a
# product rounded to fp16, no sum: P's exp2 scaled for denormals and converted, say. loop_mnemonics
# names it so.
NO_ADDEND = "+addend0"


def _operation(text: str) -> str:
    name = text.split()[0]
    if name.startswith("v_fma_mix") and text.replace(" ", "").endswith(",0"):
        return name + NO_ADDEND
    return name


def loop_mnemonics(listing: str) -> list[str]:
    """The mnemonics of the instructions inside any loop (all of them for a kernel without one):
    where an accumulation across key blocks happens, not a prologue or an epilogue. A zero-addend
    v_fma_mix carries the NO_ADDEND suffix."""
    code = parse_listing(listing)
    blocks = basic_blocks(code)
    inside = {b for loop in loop_forest(blocks) for b in loop.blocks}
    if not inside:
        return [_operation(i.text) for i in code]
    return [
        _operation(code[i].text)
        for b in sorted(inside)
        for i in range(blocks[b].first, blocks[b].last + 1)
    ]


def mca_report(mca: Path, loop: list[str], timeout_s: float = MCA_TIMEOUT_S) -> str:
    if not Path(mca).is_file():
        raise FileNotFoundError(
            f"llvm-mca not found at {mca}: it comes with the toolchain's LLVM "
            "(Debian's llvm-19, ROCm's llvm/bin)"
        )
    try:
        proc = subprocess.run(
            [str(mca), "-mtriple=amdgcn", "-mcpu=gfx942", f"-iterations={MCA_ITERATIONS}"],
            input="\n".join(loop) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return MCA_HUNG
    if proc.returncode:
        raise RuntimeError(f"llvm-mca failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def inner_loop_report(mca: Path, listing: str) -> str:
    """What the code object cache keeps: llvm-mca's report on the inner loop, or NO_LOOP."""
    loop = inner_loop(listing)
    return NO_LOOP if loop is None else mca_report(mca, loop)


def cycles_per_iteration(report: str) -> float | None:
    """Cycles per loop iteration from an inner_loop_report; None for a kernel without a loop or a
    loop llvm-mca did not finish."""
    if report in (NO_LOOP, MCA_HUNG):
        return None
    fields = dict(re.findall(r"^(Iterations|Total Cycles):\s+(\d+)", report, re.M))
    if len(fields) != 2:
        raise ValueError("no 'Iterations' / 'Total Cycles' in the llvm-mca report")
    return round(int(fields["Total Cycles"]) / int(fields["Iterations"]), 1)
