"""Tile configurations as data, one table per target, validated before compiling.

A config never depends on the device the gate runs on: tables are keyed by target
name and the runner picks the table for the target it builds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegate.kernels.problem import AttentionShape, dtype_bytes

ACCUM_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class TargetLimits:
    name: str
    wavefront: int
    lds_bytes_per_workgroup: int
    max_threads: int


# gfx942: wave64; 64 KiB LDS per workgroup (AMD CDNA3 ISA guide, "Local Data Share";
# LLVM AMDGPUUsage). The "256 KB LDS" figure that circulates for MI300X is its
# Infinity Cache confusion, see DESIGN.md.
GFX942 = TargetLimits("gfx942", wavefront=64, lds_bytes_per_workgroup=64 * 1024, max_threads=1024)
# sm_90: warp 32; up to 227 KiB of shared memory per block (CUDA C Programming Guide,
# compute capability 9.0 table).
SM90 = TargetLimits("sm90", wavefront=32, lds_bytes_per_workgroup=227 * 1024, max_threads=1024)
TARGETS = {t.name: t for t in (GFX942, SM90)}


class ConfigError(ValueError):
    """A tile config breaks a hardware limit of its target (raised before compiling)."""


@dataclass(frozen=True)
class TileConfig:
    name: str
    block_m: int  # query rows per workgroup
    block_n: int  # keys per inner-loop step
    num_stages: int
    threads: int
    accum_dtype: str = "float32"  # dtype of the running output accumulator across key blocks

    def __post_init__(self) -> None:
        if self.accum_dtype not in ACCUM_DTYPES:
            raise ConfigError(f"{self.name}: accum_dtype {self.accum_dtype!r} not in {ACCUM_DTYPES}")

    def lds_estimate(self, shape: AttentionShape) -> int:
        """Upper bound on shared memory: Q, K and V tiles (K, V once per pipeline stage).

        TileLang reuses buffers whose lifetimes do not overlap (O shares Q's slot), so
        the real figure, read from the lowered module by the ISA tier, can be lower.
        """
        elem = dtype_bytes(shape.dtype)
        stages = max(1, self.num_stages)
        q_tile = self.block_m * shape.head_dim * elem
        kv_tiles = 2 * stages * self.block_n * shape.head_dim * elem
        return q_tile + kv_tiles

    def validate(self, target: TargetLimits, shape: AttentionShape) -> None:
        """Raise ConfigError naming the first limit this config breaks on ``target``."""
        where = f"tile config {self.name!r} on {target.name} (head_dim {shape.head_dim})"
        if self.threads % target.wavefront:
            raise ConfigError(f"{where}: threads {self.threads} is not a multiple of the {target.wavefront}-wide wavefront")
        if not 0 < self.threads <= target.max_threads:
            raise ConfigError(f"{where}: threads {self.threads} outside 1..{target.max_threads}")
        for label, block in (("block_m", self.block_m), ("block_n", self.block_n)):
            if block < 16 or block % 16:
                raise ConfigError(f"{where}: {label} {block} is not a multiple of the 16-wide MFMA/MMA tile")
        lds = self.lds_estimate(shape)
        if lds > target.lds_bytes_per_workgroup:
            raise ConfigError(
                f"{where}: needs {lds} bytes ({lds / 1024:.0f} KiB) of LDS for the Q, K and V tiles, "
                f"over the {target.lds_bytes_per_workgroup // 1024} KiB per workgroup"
            )


# gfx942 configs. TileLang on ROCm ignores num_stages >= 1 below gfx950 (double
# buffering overflowed LDS), so every gfx942 config is single-stage. 128 threads =
# 2 waves of 64; 256 threads = 4 waves.
_GFX942_COMMON = (
    TileConfig("m64n64w2", block_m=64, block_n=64, num_stages=1, threads=128),   # the textbook tile: 2 waves x 32 rows
    TileConfig("m64n32w2", block_m=64, block_n=32, num_stages=1, threads=128),   # half the K/V tile: least LDS, more steps
    TileConfig("m128n32w4", block_m=128, block_n=32, num_stages=1, threads=256), # 4 waves share one K/V tile: fewer K/V reloads
)
GFX942_CONFIGS = {
    64: _GFX942_COMMON + (
        TileConfig("m128n64w4", block_m=128, block_n=64, num_stages=1, threads=256),  # fits at d64: 16+16+16 KiB
    ),
    128: _GFX942_COMMON,
}

# sm90 configs: the H200 has room for a second pipeline stage.
_SM90_COMMON = (
    TileConfig("m64n64w4", block_m=64, block_n=64, num_stages=2, threads=128),
    TileConfig("m128n64w8", block_m=128, block_n=64, num_stages=2, threads=256),
)
SM90_CONFIGS = {64: _SM90_COMMON, 128: _SM90_COMMON}

# target -> head_dim -> configs, best first
ConfigTables = dict[str, dict[int, tuple]]
CONFIG_TABLES: ConfigTables = {"gfx942": GFX942_CONFIGS, "sm90": SM90_CONFIGS}

# The paged extend kernel tiles like prefill but keeps more per-request scalars live
# (request row, context and extend lengths, start): m64n64w2 at head_dim 128 spilled SGPRs.
EXTEND_TABLES: ConfigTables = {
    "gfx942": {64: GFX942_CONFIGS[64], 128: tuple(c for c in GFX942_CONFIGS[128] if c.name != "m64n64w2")},
    "sm90": SM90_CONFIGS,
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
    return TileConfig(f"{cfg.name}-acc16", cfg.block_m, cfg.block_n, cfg.num_stages, cfg.threads, "float16")


# ---- decode (one query token per request, split-KV) --------------------------------------

@dataclass(frozen=True)
class DecodeConfig:
    name: str
    block_n: int  # context tokens per inner-loop step
    threads: int
    num_splits: int  # context chunks per request, combined afterwards in fp32 (flash-decoding)
    num_stages: int = 1

    def block_h(self, shape: AttentionShape) -> int:
        """Query heads per workgroup: one KV head's group, padded to the 16-row MMA tile."""
        return max(16, -(-shape.groups // 16) * 16)

    def lds_estimate(self, shape: AttentionShape) -> int:
        elem = dtype_bytes(shape.dtype)
        return (self.block_h(shape) + 2 * max(1, self.num_stages) * self.block_n) * shape.head_dim * elem

    def validate(self, target: TargetLimits, shape: AttentionShape) -> None:
        where = f"decode config {self.name!r} on {target.name} (head_dim {shape.head_dim})"
        if self.threads % target.wavefront or not 0 < self.threads <= target.max_threads:
            raise ConfigError(f"{where}: threads {self.threads} is not a positive multiple of the {target.wavefront}-wide wavefront")
        if self.block_n < 16 or self.block_n % 16:
            raise ConfigError(f"{where}: block_n {self.block_n} is not a multiple of the 16-wide MFMA/MMA tile")
        if self.num_splits < 1:
            raise ConfigError(f"{where}: num_splits must be >= 1")
        lds = self.lds_estimate(shape)
        if lds > target.lds_bytes_per_workgroup:
            raise ConfigError(f"{where}: needs {lds} bytes of LDS, over the {target.lds_bytes_per_workgroup // 1024} KiB per workgroup")


# gfx942: one or two waves per KV head; 16 query rows fill the 16x16x16 MFMA tile.
_GFX942_DECODE_D64 = (
    DecodeConfig("n64w1s16", block_n=64, threads=64, num_splits=16),
    DecodeConfig("n32w1s32", block_n=32, threads=64, num_splits=32),  # more splits: long contexts, few requests
    DecodeConfig("n64w2s8", block_n=64, threads=128, num_splits=8),
)
_GFX942_DECODE_D128 = (
    # n64w1s16 is not here: at head_dim 128 one wave holding a 64-key tile spilled SGPRs (ISA tier).
    DecodeConfig("n32w1s32", block_n=32, threads=64, num_splits=32),
    DecodeConfig("n32w2s16", block_n=32, threads=128, num_splits=16),
    DecodeConfig("n64w2s8", block_n=64, threads=128, num_splits=8),
)
_SM90_DECODE = (
    DecodeConfig("n64w4s16", block_n=64, threads=128, num_splits=16, num_stages=2),
    DecodeConfig("n128w4s8", block_n=128, threads=128, num_splits=8, num_stages=2),
)
DECODE_TABLES: ConfigTables = {
    "gfx942": {64: _GFX942_DECODE_D64, 128: _GFX942_DECODE_D128},
    "sm90": {64: _SM90_DECODE, 128: _SM90_DECODE},
}
