"""A static cycle estimate of a gfx942 kernel's inner loop, from its disassembly and llvm-mca.

The inner loop is the one closed by a backward branch that holds the most MFMA instructions:
the key-block loop of every attention kernel here (a kernel without MFMA, the decode combine,
takes its longest loop). llvm-mca runs its straight-line body with LLVM's gfx942 scheduling
model (MFMA latencies included; DESIGN.md) and gives cycles per iteration. It models no
memory latency and no other waves: a proxy that moves when the loop's instruction mix does,
not a prediction of time.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# "\ts_cbranch_scc1 -42   // 000000001B10: BF85FFD6 <kernel+0x158>": text, address, branch target
_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):[^<]*(?:<[^+>]+\+0x([0-9a-fA-F]+)>)?\s*$")
MCA_ITERATIONS = 100


NO_LOOP = "no inner loop: the kernel has no backward branch\n"


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
        target = base + int(m.group(3), 16) if m.group(3) else None
        out.append(Instruction(address, m.group(1), target))
    return out


def inner_loop(listing: str) -> list[str] | None:
    """The body (branches left out: llvm-mca models straight-line code) of the kernel's inner
    loop; None for a kernel without a loop."""
    code = parse_listing(listing)
    loops = [(i.target, i.address) for i in code
             if i.target is not None and i.target <= i.address and i.text.startswith(("s_branch", "s_cbranch"))]
    if not loops:
        return None

    def body(loop):
        return [i.text for i in code if loop[0] <= i.address <= loop[1]]

    def weight(loop):
        text = body(loop)
        return sum(t.startswith("v_mfma") for t in text), len(text)

    return [t for t in body(max(loops, key=weight)) if not t.startswith(("s_branch", "s_cbranch"))]


def mca_report(mca: Path, loop: list[str]) -> str:
    if not Path(mca).is_file():
        raise FileNotFoundError(f"llvm-mca not found at {mca}: it comes with the toolchain's LLVM "
                                "(Debian's llvm-19, ROCm's llvm/bin)")
    proc = subprocess.run([str(mca), "-mtriple=amdgcn", "-mcpu=gfx942", f"-iterations={MCA_ITERATIONS}"],
                          input="\n".join(loop) + "\n", capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"llvm-mca failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def inner_loop_report(mca: Path, listing: str) -> str:
    """What the code object cache keeps: llvm-mca's report on the inner loop, or NO_LOOP."""
    loop = inner_loop(listing)
    return NO_LOOP if loop is None else mca_report(mca, loop)


def cycles_per_iteration(report: str) -> float | None:
    """Cycles per loop iteration from an inner_loop_report; None for a kernel without a loop."""
    if report == NO_LOOP:
        return None
    fields = dict(re.findall(r"^(Iterations|Total Cycles):\s+(\d+)", report, re.M))
    if len(fields) != 2:
        raise ValueError("no 'Iterations' / 'Total Cycles' in the llvm-mca report")
    return round(int(fields["Total Cycles"]) / int(fields["Iterations"]), 1)
