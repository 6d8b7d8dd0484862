"""Reading a gfx942 code object: resource metadata, instruction histogram, occupancy.

Occupancy rules for gfx942 (CDNA3), from LLVM AMDGPUUsage and AMD's CDNA3 ISA guide:
  - 512 unified VGPRs per lane per SIMD; `.vgpr_count` is the unified total (ArchVGPRs
    aligned to 4 plus AGPRs); allocation granule 8 -> waves/SIMD = 512 // align8(vgpr).
  - 800 SGPRs per SIMD, granule 16.
  - at most 8 waves per SIMD, 4 SIMDs per CU.
  - 64 KiB LDS per CU shared by its workgroups, 512-byte granule.
  - at most 16 workgroups per CU, and at most 32 waves per CU.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from tilegate.gfx942.code_object import CodeObject
from tilegate.gfx942.inner_loop import cycles_per_iteration, inner_loop, loop_mnemonics
from tilegate.gfx942.latency import NO_PROXIES, LatencyProxies, latency_proxies

WAVE = 64
SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD_LANE = 512
SGPRS_PER_SIMD = 800
LDS_PER_CU = 64 * 1024
LDS_GRANULE = 512
MAX_WORKGROUPS_PER_CU = 16
MAX_WAVES_PER_CU = 32

# ELF ABI version -> code object version (AMDGPUUsage, "ELF Header"): 2 = V4, 3 = V5, 4 = V6.
CODE_OBJECT_VERSIONS = {2: 4, 3: 5, 4: 6}

_INSTR = re.compile(r"^\s+([a-z][a-z0-9_]+)\b", re.MULTILINE)
_KERNEL_KEY = re.compile(r"^(?:  - |    )\.([a-z_]+):\s+(\S+)\s*$", re.MULTILINE)
_TARGET = re.compile(r"^amdhsa\.target:\s+'?([^'\s]+)'?", re.MULTILINE)
_FLAGS = re.compile(r"^\s*Flags:\s+(.*)$", re.MULTILINE)
_ABI = re.compile(r"^\s*ABI Version:\s+(\d+)", re.MULTILINE)


def _align(value: int, granule: int) -> int:
    return -(-value // granule) * granule


@dataclass(frozen=True)
class Occupancy:
    """Resident work per CU. ``waves_per_simd`` is an average: a CU holding one 2-wave
    workgroup keeps 2 of its 4 SIMDs busy, 0.5 waves per SIMD."""

    workgroups_per_cu: int
    waves_per_cu: int
    waves_per_simd: float
    limited_by: str
    limits: dict  # workgroups per CU each resource allows


def occupancy(vgpr: int, sgpr: int, lds_bytes: int, threads: int) -> Occupancy:
    waves_per_wg = -(-threads // WAVE)
    waves_by_vgpr = (
        min(MAX_WAVES_PER_SIMD, VGPRS_PER_SIMD_LANE // _align(max(vgpr, 1), 8)) * SIMDS_PER_CU
    )
    waves_by_sgpr = (
        min(MAX_WAVES_PER_SIMD, SGPRS_PER_SIMD // _align(max(sgpr, 1), 16)) * SIMDS_PER_CU
    )
    lds = _align(lds_bytes, LDS_GRANULE)
    slots = min(MAX_WORKGROUPS_PER_CU, MAX_WAVES_PER_CU // waves_per_wg)
    limits = {  # on a tie, the first named is reported as the limit
        "workgroup slots": slots,
        "vgpr": waves_by_vgpr // waves_per_wg,
        "sgpr": waves_by_sgpr // waves_per_wg,
        "lds": LDS_PER_CU // lds if lds else slots,
    }
    workgroups = min(limits.values())
    waves = workgroups * waves_per_wg
    return Occupancy(
        workgroups, waves, waves / SIMDS_PER_CU, min(limits, key=lambda k: limits[k]), limits
    )


@dataclass
class IsaReading:
    """What the gate knows about one code object. ``lds_bytes`` is static + TileLang's dynamic
    LDS."""

    target_id: str
    elf_flags: str
    code_object_version: int
    wavefront_size: int
    vgpr_count: int
    agpr_count: int
    sgpr_count: int
    vgpr_spill_count: int
    sgpr_spill_count: int
    private_segment_bytes: int
    uses_dynamic_stack: bool
    static_lds_bytes: int
    dynamic_lds_bytes: int
    threads: int
    compiler: str
    inner_loop_cycles: float | None  # llvm-mca, per iteration (tilegate/gfx942/inner_loop.py)
    instructions: Counter = field(repr=False)
    # inside any loop (all of them without one): tilegate.gfx942.inner_loop.loop_mnemonics
    loop_instructions: Counter = field(default_factory=Counter, repr=False)
    latency: LatencyProxies = NO_PROXIES  # the inner loop's (tilegate/gfx942/latency.py)

    @property
    def lds_bytes(self) -> int:
        return self.static_lds_bytes + self.dynamic_lds_bytes

    @property
    def occupancy(self) -> Occupancy:
        return occupancy(self.vgpr_count, self.sgpr_count, self.lds_bytes, self.threads)

    def count(self, prefix: str) -> int:
        return sum(n for name, n in self.instructions.items() if name.startswith(prefix))

    def histogram(self, prefix: str) -> dict[str, int]:
        return {name: n for name, n in sorted(self.instructions.items()) if name.startswith(prefix)}

    def metrics(self) -> dict:
        """The per-config snapshot written to artifacts and compared with the golden file."""
        occ = self.occupancy
        return {
            "target_id": self.target_id,
            "code_object_version": self.code_object_version,
            "wavefront_size": self.wavefront_size,
            "vgpr_count": self.vgpr_count,
            "agpr_count": self.agpr_count,
            "sgpr_count": self.sgpr_count,
            "vgpr_spill_count": self.vgpr_spill_count,
            "sgpr_spill_count": self.sgpr_spill_count,
            "private_segment_bytes": self.private_segment_bytes,
            "lds_bytes": self.lds_bytes,
            "threads": self.threads,
            "occupancy": asdict(occ),
            "mfma": self.histogram("v_mfma"),
            "lds_reads": self.histogram("ds_read"),
            "global_loads": self.histogram("global_load") | self.histogram("buffer_load"),
            "scratch": self.count("scratch_"),
            "inner_loop_cycles": self.inner_loop_cycles,
            "inner_loop_loads": self.latency.loads,
            "loads_not_overlapped": self.latency.loads_not_overlapped,
            "barriers_per_iteration": self.latency.barriers,
            "reduction_lds_round_trips": self.latency.reduction_lds_round_trips,
        }


def _kernel_fields(notes: str) -> dict[str, str]:
    fields = dict(_KERNEL_KEY.findall(notes))
    if fields.get("wavefront_size") is None:
        raise ValueError("no AMDGPU kernel metadata in the code object's notes")
    return fields


def launch_threads(obj: CodeObject) -> int:
    """The workgroup size the kernel is compiled for: its .max_flat_workgroup_size, TileLang's
    __launch_bounds__ (T.Kernel's threads). Notes that name none, or several kernels of different
    sizes, are an error: a check on this figure would otherwise pass on nothing."""
    sizes = {
        int(v)
        for k, v in _KERNEL_KEY.findall(obj.notes.read_text())
        if k == "max_flat_workgroup_size"
    }
    if len(sizes) != 1:
        raise ValueError(
            f"{obj.notes}: want one .max_flat_workgroup_size in the code object's kernel metadata, "
            f"found {sorted(sizes) or 'none'}"
        )
    return sizes.pop()


def read_code_object(obj: CodeObject, dynamic_lds_bytes: int, threads: int) -> IsaReading:
    notes, header = obj.notes.read_text(), obj.elf_header.read_text()
    fields = _kernel_fields(notes)
    target = _TARGET.search(notes)
    flags, abi = _FLAGS.search(header), _ABI.search(header)
    body = obj.disassembly().split("Disassembly of section", 1)[-1]
    return IsaReading(
        target_id=target.group(1) if target else "",
        elf_flags=flags.group(1).strip() if flags else "",
        code_object_version=CODE_OBJECT_VERSIONS.get(int(abi.group(1)), -1) if abi else -1,
        wavefront_size=int(fields["wavefront_size"]),
        vgpr_count=int(fields.get("vgpr_count", 0)),
        agpr_count=int(fields.get("agpr_count", 0)),
        sgpr_count=int(fields.get("sgpr_count", 0)),
        vgpr_spill_count=int(fields.get("vgpr_spill_count", 0)),
        sgpr_spill_count=int(fields.get("sgpr_spill_count", 0)),
        private_segment_bytes=int(fields.get("private_segment_fixed_size", 0)),
        uses_dynamic_stack=fields.get("uses_dynamic_stack", "false") == "true",
        static_lds_bytes=int(fields.get("group_segment_fixed_size", 0)),
        dynamic_lds_bytes=dynamic_lds_bytes,
        threads=threads,
        compiler=obj.toolchain.version,
        inner_loop_cycles=cycles_per_iteration(obj.inner_loop_mca.read_text()),
        instructions=Counter(_INSTR.findall(body)),
        loop_instructions=Counter(loop_mnemonics(body)),
        latency=latency_proxies(inner_loop(body)),
    )
