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
import resource
import signal
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
# branches; a loop's own MFMAs, the tightest on a tie). 5: a loop llvm-mca does not finish is run
# again with its loop counter's add rewritten (counter_rewrite).
LOOP_RULE = "5"


NO_LOOP = "no inner loop: the kernel has no backward branch\n"
# llvm-mca 19 does not terminate on some gfx942 loops: a few of the paged decode kernels' (it
# runs at full CPU with no output, even at -iterations=1 and with --disable-cb). Six lines of one
# such loop (suite/library/llvm_mca_19_hang.s) hang it: LDS reads, MFMAs and the loop's one
# instruction of two micro-ops, its counter's ``v_add_co_u32_e32 vN, vcc, 1, vN`` (VALU + SALU;
# gfx942's model dispatches one micro-op a cycle). Without that instruction, or with it as a
# one-micro-op ``v_add_u32``, they finish. So a loop llvm-mca does not finish is run again with
# the counter written as the pair counter_rewrite gives: the same sum, the same carry in vcc
# (a + 1 carries exactly when the sum is 0), two micro-ops of one each. On every decode loop
# llvm-mca 19 finishes as built (13, docs/isa.md), the pair gives the same cycles to the tenth.
# The report's first line says so. A loop that hangs even so gets no estimate (MCA_HUNG) instead
# of a hung build; every other ISA figure still holds it.
# "Does not finish" is judged on llvm-mca's CPU time, not the wall clock: a busy machine stretches
# the wall time of a loop that finishes, and a hung llvm-mca spins at full CPU. Every loop llvm-mca
# finishes took at most 0.92 CPU s here (297 cached gfx942 builds, the longest loop 8755
# instructions), so 10 CPU s decides the same way on a loaded or slower machine, and a hang costs
# 10 s of a core, not 30. The wall-clock limit only catches a stalled process, and is an error.
MCA_CPU_LIMIT_S = 10
MCA_WALL_LIMIT_S = 600
MCA_HUNG = f"no estimate: llvm-mca did not finish within {MCA_CPU_LIMIT_S} CPU s on this loop\n"
_COUNTER = re.compile(r"^v_add_co_u32_e32 (v\d+), vcc, 1, \1$")
REWRITTEN = (
    "llvm-mca did not finish on the loop as built; this report is on the loop with its counter's "
    "v_add_co_u32_e32 vN, vcc, 1, vN written as v_add_u32_e32 vN, 1, vN + "
    "v_cmp_eq_u32_e32 vcc, 0, vN\n"
)


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


def counter_rewrite(loop: list[str]) -> list[str] | None:
    """``loop`` with each ``v_add_co_u32_e32 vN, vcc, 1, vN`` (two micro-ops) written as
    ``v_add_u32_e32 vN, 1, vN`` and ``v_cmp_eq_u32_e32 vcc, 0, vN`` (one each: the same vN, the
    same carry in vcc); None when the loop has no such instruction."""
    out: list[str] = []
    for text in loop:
        m = _COUNTER.match(text)
        out += (
            [text]
            if m is None
            else [f"v_add_u32_e32 {m[1]}, 1, {m[1]}", f"v_cmp_eq_u32_e32 vcc, 0, {m[1]}"]
        )
    return None if len(out) == len(loop) else out


def _run_mca(mca: Path, loop: list[str], cpu_limit_s: int) -> str | None:
    """llvm-mca's report, or None when it did not finish within ``cpu_limit_s`` of CPU time."""
    proc = subprocess.Popen(
        [str(mca), "-mtriple=amdgcn", "-mcpu=gfx942", f"-iterations={MCA_ITERATIONS}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # set from here, not in the child (preexec_fn is unsafe in a threaded parent): the CPU time the
    # child has spent before this call counts towards the limit all the same. SIGXCPU at the soft
    # limit ends llvm-mca; SIGKILL one second later, should it not end. SIGXCPU dumps core by
    # default: no core file of it lands in the working directory (the checkout).
    try:
        resource.prlimit(proc.pid, resource.RLIMIT_CORE, (0, 0))
        resource.prlimit(proc.pid, resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 1))
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    try:
        out, err = proc.communicate("\n".join(loop) + "\n", timeout=MCA_WALL_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(
            f"llvm-mca neither finished nor spent {cpu_limit_s} CPU s in {MCA_WALL_LIMIT_S} s "
            "of wall time: the machine stalled it"
        ) from None
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return None
    if proc.returncode:
        raise RuntimeError(f"llvm-mca failed ({proc.returncode}): {err[-2000:]}")
    return out


def mca_report(mca: Path, loop: list[str], cpu_limit_s: int = MCA_CPU_LIMIT_S) -> str:
    """llvm-mca's report on ``loop``; where it does not finish, its report on the loop's
    counter_rewrite headed by REWRITTEN; MCA_HUNG where neither finishes."""
    if not Path(mca).is_file():
        raise FileNotFoundError(
            f"llvm-mca not found at {mca}: it comes with the toolchain's LLVM "
            "(Debian's llvm-19, ROCm's llvm/bin)"
        )
    report = _run_mca(mca, loop, cpu_limit_s)
    if report is not None:
        return report
    rewritten = counter_rewrite(loop)
    report = None if rewritten is None else _run_mca(mca, rewritten, cpu_limit_s)
    return MCA_HUNG if report is None else REWRITTEN + report


def counter_rewritten(report: str) -> bool:
    """Whether an inner_loop_report is on the loop with its counter rewritten (counter_rewrite)."""
    return report.startswith(REWRITTEN)


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
