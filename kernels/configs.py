"""Tile configurations as data, one table per target, validated before compiling.

A config never depends on the device the gate runs on: tables are keyed by target
name and the runner picks the table for the target it builds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilegate.kernels.problem import AttentionShape, dtype_bytes

ACCUM_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class TargetLimits:
    name: str
    wavefront: int
    lds_bytes_per_workgroup: int
    max_threads: int
    # cp.async completing on an mbarrier, and setmaxnreg: what a gathering producer warpgroup
    # (TileConfig.gather_warpgroup) needs
    async_gather: bool = False
    # bulk tensor copies (TMA): TileLang pipelines a plain tile copy (T.Pipelined) through them,
    # with a producer warpgroup of its own
    tma: bool = False


# gfx942: wave64; 64 KiB LDS per workgroup (AMD CDNA3 ISA guide, "Local Data Share";
# LLVM AMDGPUUsage). The "256 KB LDS" figure that circulates for MI300X is its
# Infinity Cache confusion, see DESIGN.md.
GFX942 = TargetLimits("gfx942", wavefront=64, lds_bytes_per_workgroup=64 * 1024, max_threads=1024)
# sm_90: warp 32; up to 227 KiB of shared memory per block (CUDA C Programming Guide,
# compute capability 9.0 table).
SM90 = TargetLimits(
    "sm90",
    wavefront=32,
    lds_bytes_per_workgroup=227 * 1024,
    max_threads=1024,
    async_gather=True,
    tma=True,
)
TARGETS = {t.name: t for t in (GFX942, SM90)}


class ConfigError(ValueError):
    """A tile config breaks a hardware limit of its target (raised before compiling)."""


# A gathering producer warpgroup (TileConfig.gather_warpgroup): 128 threads beside the config's own.
PRODUCER_THREADS = 128


@dataclass(frozen=True)
class TileConfig:
    name: str
    block_m: int  # query rows per workgroup
    block_n: int  # keys per inner-loop step
    num_stages: int
    threads: int
    accum_dtype: str = "float32"  # dtype of the running output accumulator across key blocks
    # gfx942 layout (see _GFX942_COMMON): Q held in registers and Out stored from them, so no Q or
    # O tile takes LDS; V kept transposed in LDS, so P@V reads it along its reduction dimension
    q_in_registers: bool = False
    v_transposed: bool = False
    # the next key block's K and V are loaded (paged kernels: gathered) into registers while this
    # block computes: TileLang pipelines no gather, and no copy at all on gfx942 below gfx950
    prefetch_kv: bool = False
    # paged extend: a producer warpgroup (PRODUCER_THREADS more than ``threads``) gathers K and V by
    # cp.async into ``num_stages`` shared stages while ``threads`` (whole warpgroups) compute
    gather_warpgroup: bool = False

    def __post_init__(self) -> None:
        if self.accum_dtype not in ACCUM_DTYPES:
            raise ConfigError(
                f"{self.name}: accum_dtype {self.accum_dtype!r} not in {ACCUM_DTYPES}"
            )
        if self.gather_warpgroup and (self.prefetch_kv or self.v_transposed or self.q_in_registers):
            raise ConfigError(
                f"{self.name}: gather_warpgroup gathers into shared stages with Q in shared "
                "memory; "
                "it does not combine with prefetch_kv, v_transposed or q_in_registers"
            )
        if self.gather_warpgroup and (self.threads % PRODUCER_THREADS or self.num_stages < 1):
            raise ConfigError(
                f"{self.name}: gather_warpgroup needs whole warpgroups of {PRODUCER_THREADS} "
                "threads "
                "and at least one stage"
            )

    def lds_estimate(self, shape: AttentionShape) -> int:
        """Upper bound on shared memory: Q (unless in registers), K and V tiles (K, V once per
        pipeline stage).

        TileLang reuses buffers whose lifetimes do not overlap (O shares Q's slot), so
        the real figure, read from the lowered module by the ISA tier, can be lower.
        """
        elem = dtype_bytes(shape.dtype)
        stages = max(1, self.num_stages)
        q_tile = 0 if self.q_in_registers else self.block_m * shape.head_dim * elem
        kv_tiles = 2 * stages * self.block_n * shape.head_dim * elem
        return q_tile + kv_tiles

    def validate(self, target: TargetLimits, shape: AttentionShape) -> None:
        """Raise ConfigError naming the first limit this config breaks on ``target``."""
        where = f"tile config {self.name!r} on {target.name} (head_dim {shape.head_dim})"
        if self.threads % target.wavefront:
            raise ConfigError(
                f"{where}: threads {self.threads} is not a multiple of the {target.wavefront}-wide "
                "wavefront"
            )
        if not 0 < self.threads <= target.max_threads:
            raise ConfigError(f"{where}: threads {self.threads} outside 1..{target.max_threads}")
        if self.gather_warpgroup:
            self._check_gather_warpgroup(target, where)
        for label, block in (("block_m", self.block_m), ("block_n", self.block_n)):
            if block < 16 or block % 16:
                raise ConfigError(
                    f"{where}: {label} {block} is not a multiple of the 16-wide MFMA/MMA tile"
                )
        lds = self.lds_estimate(shape)
        if lds > target.lds_bytes_per_workgroup:
            raise ConfigError(
                f"{where}: needs {lds} bytes ({lds / 1024:.0f} KiB) of LDS for the Q, K and V "
                "tiles, "
                f"over the {target.lds_bytes_per_workgroup // 1024} KiB per workgroup"
            )

    def _check_gather_warpgroup(self, target: TargetLimits, where: str) -> None:
        if not target.async_gather:
            raise ConfigError(
                f"{where}: gather_warpgroup needs cp.async with mbarriers and setmaxnreg (sm90)"
            )
        if self.threads + PRODUCER_THREADS > target.max_threads:
            raise ConfigError(
                f"{where}: {self.threads} threads and the {PRODUCER_THREADS}-thread producer "
                f"exceed {target.max_threads}"
            )


# gfx942 configs. TileLang on ROCm ignores num_stages >= 1 below gfx950 (double
# buffering overflowed LDS), so every gfx942 config is single-stage. 128 threads =
# 2 waves of 64; 256 threads = 4 waves.
#
# Occupancy is bound by LDS (64 KiB per CU): keeping Q in registers frees block_m x head_dim
# x 2 bytes per workgroup, and leaves K and V as the only tiles (plus TileLang's 1 KiB
# reduction workspace). Transposing V on its way into LDS (16-bit LDS writes, once per key
# block) replaces 16-bit LDS reads in the inner product. m64n64w2 is not here: its K and V
# tiles plus that workspace overflow the 32 KiB (d128) / 16 KiB (d64) that two (four)
# resident workgroups would need, so it ran at 0.5 (1.5) waves per SIMD.
#
# With no pipelining, each key block's K and V loads were waited for in line with the matrix
# products (the ISA tier's load-overlap proxy: every load of the inner loop). So every gfx942 config
# prefetches (prefetch_kv): block kb + 1 is loaded into registers while block kb's MFMAs run, and
# written to LDS (V transposed) at the top of its own turn. That costs 16-64 VGPRs a lane and takes
# most d64 tiles from 3 to 2 waves per SIMD and three d128 tiles from 1.5-2 to 1, at or above the
# floors (the README's table has every config before and after).


def _gfx942(name: str, block_m: int, block_n: int, threads: int) -> TileConfig:
    return TileConfig(
        name,
        block_m,
        block_n,
        num_stages=1,
        threads=threads,
        q_in_registers=True,
        v_transposed=True,
        prefetch_kv=True,
    )


_GFX942_COMMON = (
    _gfx942("m128n32w4", block_m=128, block_n=32, threads=256),  # 4 waves share one K/V tile
    _gfx942("m64n32w2", block_m=64, block_n=32, threads=128),  # 2 waves: more workgroups per CU
    # half the key-block steps; 1 workgroup per CU at d128
    _gfx942("m128n64w4", block_m=128, block_n=64, threads=256),
)
GFX942_CONFIGS = {64: _GFX942_COMMON, 128: _GFX942_COMMON}

# sm90 configs, chosen from the perf tier on the H200 (docs/perf.md): TileLang warp-specialises
# these (a TMA producer warpgroup beside 3 or 2 consumer warpgroups of 64 rows). 192 query rows per
# workgroup were 4-9% faster than 128 at 8192-32768 tokens and within the noise at 3782 (the runs
# disagree there); 2 stages of 128 keys.
_SM90_COMMON = (
    TileConfig("m192n128w12", block_m=192, block_n=128, num_stages=2, threads=384),
    TileConfig("m128n128w8", block_m=128, block_n=128, num_stages=2, threads=256),
)
SM90_CONFIGS = {64: _SM90_COMMON, 128: _SM90_COMMON}

# target -> head_dim -> configs, best first
ConfigTables = dict[str, dict[int, tuple]]
CONFIG_TABLES: ConfigTables = {"gfx942": GFX942_CONFIGS, "sm90": SM90_CONFIGS}

# The paged extend kernel tiles like prefill (it keeps more per-request scalars live: with Q
# in LDS, m64n64w2 at head_dim 128 spilled SGPRs; that config is gone from gfx942's table).
# sm90, measured against the prefill kernel at the same shape (3782 new tokens over 8192) on the
# H200:
# - m192n128w12-ws: a producer warpgroup gathers K and V by cp.async into 2 shared stages beside
#   three consumer warpgroups, as the prefill kernel's TMA producer does: 0.90x-0.94x of prefill.
# - m128n128w8-pf: K and V gathered a block ahead into the consumers' own registers (prefetch_kv):
#   0.57x. Kept as the second config: no producer warpgroup, no mbarrier pipeline.
_SM90_EXTEND = (
    TileConfig(
        "m192n128w12-ws", block_m=192, block_n=128, num_stages=2, threads=384, gather_warpgroup=True
    ),
    TileConfig(
        "m128n128w8-pf", block_m=128, block_n=128, num_stages=1, threads=256, prefetch_kv=True
    ),
)
EXTEND_TABLES: ConfigTables = {
    "gfx942": GFX942_CONFIGS,
    "sm90": {64: _SM90_EXTEND, 128: _SM90_EXTEND},
}


def configs_for(target: str, head_dim: int, tables: ConfigTables | None = None) -> tuple:
    """The configs of ``target`` for ``head_dim`` from ``tables`` (default: prefill's)."""
    table = (tables or CONFIG_TABLES)[target]
    if head_dim not in table:
        raise ConfigError(f"no {target} tile config for head_dim {head_dim} (have {sorted(table)})")
    return table[head_dim]


def default_config(target: str, head_dim: int, tables: ConfigTables | None = None):
    """The config a launcher uses when none is given: each table lists its configs best first."""
    return configs_for(target, head_dim, tables)[0]


def fp16_accum_variant(cfg: TileConfig) -> TileConfig:
    """The same tile accumulating its output in fp16: the gate must catch this one."""
    return replace(cfg, name=f"{cfg.name}-acc16", accum_dtype="float16")


# ---- decode (one query token per request, split-KV) --------------------------------------


@dataclass(frozen=True)
class DecodeConfig:
    name: str
    block_n: int  # context tokens per inner-loop step
    threads: int
    # at most this many context chunks per request, combined afterwards in fp32 (flash-decoding)
    num_splits: int
    # a launch takes as many splits (up to num_splits) as give this many workgroups per compute
    # unit (tilegate/serving/decode_schedule.py)
    workgroups_per_unit: int = 4
    num_stages: int = 1
    v_transposed: bool = False  # as TileConfig.v_transposed (gfx942)
    prefetch_kv: bool = False  # as TileConfig.prefetch_kv

    def block_h(self, shape: AttentionShape) -> int:
        """Query heads per workgroup: one KV head's group, padded to the 16-row MMA tile."""
        return max(16, -(-shape.groups // 16) * 16)

    def lds_estimate(self, shape: AttentionShape) -> int:
        elem = dtype_bytes(shape.dtype)
        return (
            (self.block_h(shape) + 2 * max(1, self.num_stages) * self.block_n)
            * shape.head_dim
            * elem
        )

    def validate(self, target: TargetLimits, shape: AttentionShape) -> None:
        where = f"decode config {self.name!r} on {target.name} (head_dim {shape.head_dim})"
        if self.threads % target.wavefront or not 0 < self.threads <= target.max_threads:
            raise ConfigError(
                f"{where}: threads {self.threads} is not a positive multiple of the "
                f"{target.wavefront}-wide wavefront"
            )
        if self.block_n < 16 or self.block_n % 16:
            raise ConfigError(
                f"{where}: block_n {self.block_n} is not a multiple of the 16-wide MFMA/MMA tile"
            )
        if self.num_splits < 1 or self.num_splits & (self.num_splits - 1):
            # the combine is built for each split count a launch uses (tilegate/serving/paged.py)
            raise ConfigError(f"{where}: num_splits {self.num_splits} is not a power of two")
        if self.workgroups_per_unit < 1:
            raise ConfigError(f"{where}: workgroups_per_unit must be >= 1")
        lds = self.lds_estimate(shape)
        if lds > target.lds_bytes_per_workgroup:
            raise ConfigError(
                f"{where}: needs {lds} bytes of LDS, over the "
                f"{target.lds_bytes_per_workgroup // 1024} KiB per workgroup"
            )


# gfx942: 16 query rows fill the 16x16x16 MFMA tile; V transposed in LDS and the next block
# prefetched into registers, as in prefill. Two and four waves split a block's keys between them
# (16 rows do not split), so their row reductions cross waves through LDS (9 and 13 barriers an
# iteration); n16w1s32 has none. LDS bounds occupancy, so each key tile is sized for at least 1
# wave per SIMD at head_dim 128 and 2 at head_dim 64: n16w1 (four one-wave workgroups per CU at
# d128; 32 splits for long contexts and few requests), n32w2 (K+V 16 KiB at d128: two workgroups
# per CU), n64w4 (one workgroup of 4 waves).
# The earlier n32w1s32 / n64w2s8 held 64 KiB / 2 waves per CU: 0.5 waves per SIMD at d128.
#
# Order (docs/isa.md, "Decode on gfx942"; tilegate/gate/decode_choice.py ORDER_RULE): every
# config here meets the waves-per-SIMD floor, so fewest llvm-mca cycles per key comes first. Each
# wave takes 16 keys an iteration in all three, and the one-wave loop is the cheapest at both
# head_dims (fp16: 24.6 / 26 / 27.5 cycles a key at d64, 42.3 / 44.1 / 46.7 at d128) and has no
# barriers (0 / 9 / 13). One wave at 32 or 64 keys a block costs 8-18% fewer cycles a key still,
# but its K and V tiles leave 1.25 / 0.75 waves per SIMD at d64 and 0.5 / 0.25 at d128: below the
# floors, so not here. No MI300X has timed these; n32w2s16 has 2.5 waves per SIMD at d64 (n16w1s32
# 2), more loads in flight, which only a runtime figure could weigh against its barriers.
_GFX942_DECODE = (
    DecodeConfig(
        "n16w1s32", block_n=16, threads=64, num_splits=32, v_transposed=True, prefetch_kv=True
    ),
    DecodeConfig(
        "n32w2s16", block_n=32, threads=128, num_splits=16, v_transposed=True, prefetch_kv=True
    ),
    DecodeConfig(
        "n64w4s8", block_n=64, threads=256, num_splits=8, v_transposed=True, prefetch_kv=True
    ),
)
# sm90: gathering a block ahead into registers (prefetch_kv) took decode from 1.6-1.8 to 3.2-3.7
# TB/s (across runs). Up to 16 splits: a batch of one request still fills 128 of the 132 SMs (8 KV
# heads x 16). Split counts swept on the H200 with the corrected kernel (issue 36; docs/perf.md,
# "Split counts"; graph-replayed against SDPA in one process): at batch 32, 1 or 2 splits were the
# fastest at every context from 128 to 8192 tokens (2 at 2048 and over); 8 splits cost 3% more
# at 8192, 18% at 1024 (48.0 us against 40.8) and 36% at 512. So n64w2 takes the fewest splits
# that give 2 workgroups per SM: 2 at batch 32, 1 from 64. (An earlier sweep chose 8 a SM with a
# miscompiled build that read half the keys.) n128w4 keeps the default 4: not swept since.
_SM90_DECODE = (
    DecodeConfig(
        "n64w2s16-pf",
        block_n=64,
        threads=64,
        num_splits=16,
        workgroups_per_unit=2,
        prefetch_kv=True,
    ),
    DecodeConfig("n128w4s8-pf", block_n=128, threads=128, num_splits=8, prefetch_kv=True),
)
DECODE_TABLES: ConfigTables = {
    "gfx942": {64: _GFX942_DECODE, 128: _GFX942_DECODE},
    "sm90": {64: _SM90_DECODE, 128: _SM90_DECODE},
}


# ---- asynchronous paths (the stress tier repeats every config that has one) ---------------

TMA_PIPELINE = "TMA loads into shared stages on mbarriers (TileLang's producer warpgroup)"
PRODUCER_WARPGROUP = "cp.async gathers into shared stages by a producer warpgroup, on mbarriers"
REGISTER_PREFETCH = (
    "the next key block loaded into registers while this one computes, then staged to shared"
)


def asynchronous_paths(phase: str, cfg, built_for: str) -> tuple[str, ...]:
    """The asynchronous paths of ``phase`` ("prefill", "extend", "decode") tiled by ``cfg`` in a
    build for target ``built_for`` (on the H200, gfx942's configs are built for sm90)."""
    paths = []
    if cfg.prefetch_kv:
        paths.append(REGISTER_PREFETCH)
    if getattr(cfg, "gather_warpgroup", False):
        paths.append(PRODUCER_WARPGROUP)
    # paged kernels gather
    pipelined_copy = phase == "prefill" and not cfg.prefetch_kv and cfg.num_stages >= 2
    if pipelined_copy and TARGETS[built_for].tma:
        paths.append(TMA_PIPELINE)
    return tuple(paths)
