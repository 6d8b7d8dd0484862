"""The figures that order gfx942's decode table (kernels/configs.py), side by side in docs/isa.md.

For each decode config, and for one-wave configs at larger key blocks that are not in the table
(CANDIDATES), the split kernel's build (fp16, causal, GQA 32:8) gives: registers, LDS, waves per
SIMD against the gate's floor, barriers per iteration of the key loop, and llvm-mca's cycles per
iteration (tilegate/gfx942/inner_loop.py: where llvm-mca 19 does not finish, the loop with its
counter rewritten). Every wave of a decode workgroup takes block_n / waves keys of a key block
(16 query rows do not split), so one iteration costs each wave's SIMD ``cycles`` for that many
keys: **cycles per key** = cycles per iteration / (block_n / waves), the SIMD issue time a key
costs, summed over the workgroup's waves.

ORDER_RULE: the configs that meet the waves-per-SIMD floor, fewest cycles per key first, fewer
barriers on a tie; the others are not shipped. ``scripts/decode_choice.py`` writes the table;
suite/library/test_decode_choice.py holds the table order to the rule and the docs' figures;
suite/isa/test_decode_choice.py holds the docs' figures to the builds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.inner_loop import (
    counter_rewrite,
    counter_rewritten,
    cycles_per_iteration,
    inner_loop,
    mca_report,
)
from tilegate.gfx942.isa_checks import MIN_WAVES_PER_SIMD
from tilegate.kernels.configs import DECODE_TABLES, DecodeConfig
from tilegate.kernels.problem import AttentionShape

if TYPE_CHECKING:
    from tilegate.gate.registry import KernelCase

DOC = REPO_ROOT / "docs" / "isa.md"
BLOCK = "decode-choice"  # <!-- decode-choice:begin --> ... <!-- decode-choice:end -->
# the TileLang version and toolchain the docs' figures come from
TILELANG, TOOLCHAIN = "0.1.15", "debian-cross"
KERNEL, DTYPE = "paged_decode_split", "float16"
ORDER_RULE = (
    "meets the waves-per-SIMD floor; then fewest llvm-mca cycles per key; then fewest barriers"
)


def _one_wave(name: str, block_n: int, num_splits: int) -> DecodeConfig:
    return DecodeConfig(
        name,
        block_n=block_n,
        threads=64,
        num_splits=num_splits,
        v_transposed=True,
        prefetch_kv=True,
    )


# One wave per workgroup at 32 and 64 keys a block: no reduction crosses waves (no barriers), and
# fewer loop trips per key than n16w1s32, but K and V tiles 2x and 4x as large in LDS.
CANDIDATES = (_one_wave("n32w1s32", 32, 32), _one_wave("n64w1s16", 64, 16))

COLUMNS = (
    "d",
    "config",
    "in table",
    "VGPR",
    "AGPR",
    "SGPR",
    "LDS B",
    "waves/SIMD (floor)",
    "limited by",
    "barriers/iter",
    "MFMA/iter",
    "llvm-mca cycles/iter",
    "counter rewritten",
    "keys/wave/iter",
    "cycles/key",
)


@dataclass(frozen=True)
class DecodeFigures:
    head_dim: int
    config: str
    shipped: bool  # in kernels/configs.py's gfx942 decode table
    vgpr: int
    agpr: int
    sgpr: int
    lds_bytes: int
    waves_per_simd: float
    limited_by: str
    barriers: int
    mfma: int  # MFMAs in one iteration of one wave: 2 x keys_per_wave x head_dim / 256
    cycles: float | None  # llvm-mca, per iteration of the key loop
    rewritten: bool  # llvm-mca 19 did not finish as built: cycles of the counter-rewritten loop
    # llvm-mca's cycles on the loop with its counter rewritten (inner_loop.counter_rewrite), also
    # where it finishes as built: the rewrite's check
    rewrite_cycles: float | None
    keys_per_wave: int  # keys each wave takes per iteration: block_n / waves

    @property
    def floor(self) -> float:
        return MIN_WAVES_PER_SIMD[self.head_dim]

    @property
    def meets_floor(self) -> bool:
        return self.waves_per_simd >= self.floor

    @property
    def cycles_per_key(self) -> float | None:
        return None if self.cycles is None else round(self.cycles / self.keys_per_wave, 1)

    def row(self) -> list[str]:
        mark = "" if self.meets_floor else " below"
        cycles = (
            "none" if self.cycles is None else f"{self.cycles:g}" + (" †" if self.rewritten else "")
        )
        return [
            str(self.head_dim),
            self.config,
            "yes" if self.shipped else "no",
            str(self.vgpr),
            str(self.agpr),
            str(self.sgpr),
            str(self.lds_bytes),
            f"{self.waves_per_simd:g} ({self.floor:g}){mark}",
            self.limited_by,
            str(self.barriers),
            str(self.mfma),
            cycles,
            "none" if self.rewrite_cycles is None else f"{self.rewrite_cycles:g}",
            str(self.keys_per_wave),
            "none" if self.cycles_per_key is None else f"{self.cycles_per_key:g}",
        ]


def cases(head_dim: int) -> list[tuple[KernelCase, bool]]:
    """(case, in the shipped table) for every decode config of ``head_dim`` and each candidate."""
    from tilegate.gate.registry import KernelCase  # imports TileLang: only where a test builds

    shape = AttentionShape(32, 8, head_dim, True, DTYPE)
    shipped = DECODE_TABLES["gfx942"][head_dim]
    return [
        (KernelCase(KERNEL, shape, cfg, "gfx942"), cfg in shipped)
        for cfg in (*shipped, *CANDIDATES)
    ]


def figures_of(builder, case: KernelCase, shipped: bool) -> DecodeFigures:
    """The figures of one build (``builder``: tilegate.gate.builder.KernelBuilder)."""
    reading = builder.isa_reading(case)
    report = builder.code_object(case).inner_loop_mca.read_text()
    occ = reading.occupancy
    cfg = case.cfg
    cycles, rewritten = cycles_per_iteration(report), counter_rewritten(report)
    obj = builder.code_object(case)
    loop = inner_loop(obj.disassembly().split("Disassembly of section", 1)[-1])
    rewrite = None if loop is None else counter_rewrite(loop)
    if rewritten or rewrite is None:
        rewrite_cycles = cycles if rewritten else None
    else:
        rewrite_cycles = cycles_per_iteration(mca_report(obj.toolchain.mca, rewrite))
    return DecodeFigures(
        head_dim=case.shape.head_dim,
        config=cfg.name,
        shipped=shipped,
        vgpr=reading.vgpr_count,
        agpr=reading.agpr_count,
        sgpr=reading.sgpr_count,
        lds_bytes=reading.lds_bytes,
        waves_per_simd=occ.waves_per_simd,
        limited_by=occ.limited_by,
        barriers=reading.latency.barriers,
        mfma=0 if loop is None else sum(text.startswith("v_mfma") for text in loop),
        cycles=cycles,
        rewritten=rewritten,
        rewrite_cycles=rewrite_cycles,
        keys_per_wave=cfg.block_n // (cfg.threads // 64),
    )


def all_figures(builder) -> list[DecodeFigures]:
    return [figures_of(builder, case, shipped) for d in (64, 128) for case, shipped in cases(d)]


def ranked(figures: list[DecodeFigures]) -> list[str]:
    """The config names of one head_dim's ``figures`` in ORDER_RULE's order."""

    def key(f: DecodeFigures):
        cpk = f.cycles_per_key
        return (not f.meets_floor, cpk is None, cpk or 0.0, f.barriers)

    return [f.config for f in sorted(figures, key=key)]


def table(figures: list[DecodeFigures]) -> list[str]:
    rows = [list(COLUMNS), ["---"] * len(COLUMNS), *(f.row() for f in figures)]
    return ["| " + " | ".join(row) + " |" for row in rows]


_ROW = re.compile(r"^\| (64|128) \| (\S+) \| (yes|no) \|")


def documented() -> list[str]:
    """The table between docs/isa.md's decode-choice markers, as its lines."""
    text = DOC.read_text()
    begin, end = f"<!-- {BLOCK}:begin -->", f"<!-- {BLOCK}:end -->"
    return text.split(begin, 1)[1].split(end, 1)[0].strip().splitlines()


def from_row(line: str) -> DecodeFigures:
    """The figures one of ``table``'s rows shows (cycles per key and the floor are recomputed)."""
    c = dict(
        zip(COLUMNS, (cell.strip() for cell in line.strip().strip("|").split("|")), strict=True)
    )
    cycles = c["llvm-mca cycles/iter"].removesuffix(" †")
    return DecodeFigures(
        head_dim=int(c["d"]),
        config=c["config"],
        shipped=c["in table"] == "yes",
        vgpr=int(c["VGPR"]),
        agpr=int(c["AGPR"]),
        sgpr=int(c["SGPR"]),
        lds_bytes=int(c["LDS B"]),
        waves_per_simd=float(c["waves/SIMD (floor)"].split()[0]),
        limited_by=c["limited by"],
        barriers=int(c["barriers/iter"]),
        mfma=int(c["MFMA/iter"]),
        cycles=None if cycles == "none" else float(cycles),
        rewritten=c["llvm-mca cycles/iter"].endswith("†"),
        rewrite_cycles=None if c["counter rewritten"] == "none" else float(c["counter rewritten"]),
        keys_per_wave=int(c["keys/wave/iter"]),
    )


def documented_figures() -> list[DecodeFigures]:
    """docs/isa.md's decode rows."""
    return [from_row(line) for line in documented() if _ROW.match(line)]


def order_problems(figures: list[DecodeFigures], tables=DECODE_TABLES) -> list[str]:
    """Where the gfx942 decode table (``tables``) does not follow ORDER_RULE on ``figures``: its
    order is the rule's order of its configs, and no config left out meets the floor and ranks
    ahead of one in the table."""
    problems = []
    for d in sorted({f.head_dim for f in figures}):
        at_d = [f for f in figures if f.head_dim == d]
        shipped = [cfg.name for cfg in tables["gfx942"][d]]
        order = ranked(at_d)
        by_rule = [name for name in order if name in shipped]
        if by_rule != shipped:
            problems.append(f"d{d}: table order {shipped}, the rule's ({ORDER_RULE}) {by_rule}")
        last = max(order.index(name) for name in shipped)
        left_out = {f.config for f in at_d if f.meets_floor and f.config not in shipped}
        ahead = [name for name in order[:last] if name in left_out]
        if ahead:
            problems.append(f"d{d}: {ahead} meet the floor and rank ahead of a config in the table")
    return problems
