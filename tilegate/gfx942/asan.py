"""Device AddressSanitizer builds of gfx942 code objects, and the instrumentation read back.

clang's HIP device ASan (``-fsanitize=address``; ``-fgpu-sanitize`` is its default) needs xnack+
code, and MI300X runs it with HSA_XNACK=1. It links the device runtime (asanrtl.bc, from the
device libraries the toolchain names) into the code object and, before each global load and store
of a kernel, reads the shadow byte of the address, ``(address >> 3) + 0x7fff8000``, and calls
``__asan_report_{load,store}N`` when it is poisoned. A plain build has neither.

The calls are ``s_getpc_b64`` + ``s_add_u32``/``s_addc_u32`` + ``s_swappc_b64``: llvm-objdump
names no callee, so the reader resolves each call's address to the function listed there.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass

from tilegate.gfx942.toolchain import Toolchain

# MI300X's target id under HSA_XNACK=1: device ASan needs xnack on (sramecc stays on)
ASAN_TARGET_ID = "gfx942:sramecc+:xnack+"
# -gline-tables-only: TileLang's own HIP compile passes it (tilelang/contrib/hipcc.py): ASan's
# report can then name the kernel's source line
ASAN_FLAGS = ("-fsanitize=address", "-fgpu-sanitize", "-gline-tables-only")
SHADOW_OFFSET = 0x7FFF8000  # AMDGPU's ASan mapping: shadow = (address >> 3) + this
REPORT_PREFIX = "__asan_report_"

_FUNCTION = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
# "\ts_add_u32 s0, s0, 0x10330   // 000000003988: 8000FF00 00010330": mnemonic, operands, address
_INSTR = re.compile(r"^\s+([a-z][a-z0-9_]*)\s*(.*?)\s*//\s*([0-9A-Fa-f]+):")
_PAIR = re.compile(r"^s\[(\d+):(\d+)\]$")
# a kernel entry of the AMDGPU metadata begins "  - .agpr_count: 0" (its first key); its other
# keys are indented four spaces (tilegate/gfx942/isa.py reads the same notes)
_ENTRY_KEY = re.compile(r"^(?:  - |    )\.([a-z_]+):\s+(\S+)\s*$")


def asan_toolchain(toolchain: Toolchain) -> Toolchain:
    """``toolchain`` building device ASan code: xnack on, the sanitizer on. Its flags differ, so
    its identity does: its code objects have their own cache entries."""
    kept = [f for f in toolchain.compile_flags if not f.startswith("--offload-arch=")]
    flags = (*kept, f"--offload-arch={ASAN_TARGET_ID}", *ASAN_FLAGS)
    return dataclasses.replace(toolchain, compile_flags=flags)


@dataclass(frozen=True)
class AsanReading:
    """The instrumentation in a code object's kernels (its ASan runtime's own functions apart)."""

    kernels: tuple[str, ...]
    report_calls: Counter  # __asan_report_* callee -> calls to it from the kernels
    shadow_checks: int  # shadow addresses formed in the kernels (SHADOW_OFFSET added)
    unresolved_calls: int  # calls whose callee the listing does not show

    @property
    def instrumented(self) -> bool:
        return sum(self.report_calls.values()) > 0 and self.shadow_checks > 0

    def summary(self) -> str:
        calls = sum(self.report_calls.values())
        return (
            f"{', '.join(self.kernels)}: {calls} __asan_report calls, "
            f"{self.shadow_checks} shadow checks"
        )


def kernel_names(notes: str) -> tuple[str, ...]:
    """The kernels the AMDGPU metadata lists, less the ones the runtime runs itself (``.kind``
    init and fini: the ASan runtime's constructors)."""
    entries: list[dict[str, str]] = []
    for line in notes.splitlines():
        if line.startswith("  - "):
            entries.append({})
        if entries and (m := _ENTRY_KEY.match(line)):
            entries[-1][m.group(1)] = m.group(2)
    return tuple(e["name"] for e in entries if "name" in e and "kind" not in e)


def _functions(listing: str) -> dict[str, list[str]]:
    """Each function of the listing (name -> its lines), with its address as the first line."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        if m := _FUNCTION.match(line):
            current = out.setdefault(m.group(2), [m.group(1)])
        elif current is not None:
            current.append(line)
    return out


def _calls(lines: list[str], starts: dict[int, str]) -> tuple[Counter, int, int]:
    """(callee -> calls, unresolved calls, shadow checks) of one function's lines."""
    calls: Counter = Counter()
    unresolved = shadow = 0
    pc: dict[str, int] = {}  # "s[0:1]" -> the address its s_getpc_b64 and the adds gave it
    halves: dict[str, tuple[str, int]] = {}  # "s0" -> ("s[0:1]", 0), "s1" -> ("s[0:1]", 32)
    for line in lines:
        m = _INSTR.match(line)
        if m is None:
            continue
        mnemonic, address = m.group(1), int(m.group(3), 16)
        operands = [o.strip() for o in m.group(2).split(",")]
        shadow += hex(SHADOW_OFFSET) in operands
        dest = operands[0]
        if mnemonic == "s_getpc_b64" and (pair := _PAIR.match(dest)):
            pc[dest] = address + 4  # the address of the next instruction
            halves[f"s{pair[1]}"], halves[f"s{pair[2]}"] = (dest, 0), (dest, 32)
        elif mnemonic in ("s_add_u32", "s_addc_u32") and dest in halves and operands[1] == dest:
            pair_name, shift = halves[dest]
            if pair_name in pc:
                pc[pair_name] += int(operands[2], 0) << shift
        elif mnemonic == "s_swappc_b64":
            callee = starts.get(pc.get(operands[1], -1) % (1 << 64))
            calls[callee or "?"] += 1
            unresolved += callee is None
        elif dest in halves or dest in pc:  # written otherwise: no longer a computed address
            pc.pop(halves.pop(dest, (dest, 0))[0], None)
    calls.pop("?", None)
    return calls, unresolved, shadow


def read_asan(listing: str, notes: str) -> AsanReading:
    """The instrumentation of a code object, from its llvm-objdump listing and its AMDGPU metadata
    (llvm-readelf --notes): tilegate.gfx942.code_object.CodeObject keeps both."""
    functions = _functions(listing)
    starts = {int(lines[0], 16): name for name, lines in functions.items()}
    kernels = kernel_names(notes)
    report_calls: Counter = Counter()
    unresolved = shadow = 0
    for kernel in kernels:
        calls, missed, checks = _calls(functions.get(kernel, [])[1:], starts)
        report_calls += Counter({k: n for k, n in calls.items() if k.startswith(REPORT_PREFIX)})
        unresolved += missed
        shadow += checks
    return AsanReading(kernels, report_calls, shadow, unresolved)
