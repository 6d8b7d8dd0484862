"""The gate's own paged extend and split decode (kernels/), declared as foreign kernels of family
'paged': this adapter exists to exercise the family (tilegate.foreign.paged) on a GPU, through the
same launch path SGLang's backend takes (tilegate.serving.paged). The reference that judges them
is FP32 torch (references/paged.py), not either kernel.

The problems are the builds the CPU tiers lower (gfx942, and sm90 beside it); the launchers compile
what each case needs for the local GPU, 64 query heads included, with the table's first config,
as serving does. PREFIX_OFF_BY_ONE plants ExtendDefect.PREFIX_OFF_BY_ONE through its knobs (the
factory's and the launcher's), which the numerics tier must fail on the extends over a short
cached prefix.
"""

from tilegate.foreign import (
    Capabilities,
    Config,
    ForeignKernel,
    IsaExpectations,
    Problem,
    Provenance,
    params,
)
from tilegate.foreign.paged import Inputs, Launchers
from tilegate.gate.paths import REPO_ROOT
from tilegate.gate.planted import ExtendDefect, knobs_for
from tilegate.kernels.configs import DECODE_TABLES, EXTEND_TABLES, PRODUCER_THREADS
from tilegate.kernels.problem import AttentionShape

KERNELS_DIR = REPO_ROOT / "tilegate" / "kernels"  # the path an import of tilegate.kernels gives
SHORT = {"float16": "fp16", "bfloat16": "bf16"}
# dtype -> (dtype, head_dim) of each build, Llama-3-8B's 32:8 heads: one kernel a dtype, as the
# ISA expectation names one MFMA input
BUILDS = {"float16": (("float16", 128), ("float16", 64)), "bfloat16": (("bfloat16", 128),)}
WAVES_FLOOR = {64: 2.0, 128: 1.0}  # the gate's own (tilegate.gfx942.isa_checks.MIN_WAVES_PER_SIMD)


def source(module: str) -> Provenance:
    return Provenance(f"tilegate.kernels.{module}", path=str(KERNELS_DIR / f"{module}.py"))


def problem(dtype: str, head_dim: int) -> Problem:
    shape = AttentionShape(32, 8, head_dim, True, dtype)
    return Problem(
        f"d{head_dim}-{SHORT[dtype]}",
        dtype=dtype,
        head_dim=head_dim,
        mask="causal",
        args=(shape,),
        shape=params(heads=32, kv_heads=8),
    )


def configs(tables, **options) -> dict[str, tuple[Config, ...]]:
    """Each target's first config (serving's default at both head dims: one per table)."""
    out = {}
    for target, by_dim in tables.items():
        (cfg,) = {by_dim[d][0] for d in (64, 128)}
        producer = PRODUCER_THREADS if getattr(cfg, "gather_warpgroup", False) else 0
        kwargs = params(cfg=cfg, **options)
        out[target] = (Config(cfg.name, kwargs=kwargs, threads=cfg.threads + producer),)
    return out


def lds(p: Problem, c: Config) -> int:
    """The config's own estimate (kernels/configs.py: K and V tiles, Q where it is in LDS), and on
    gfx942 the block's pool slots and TileLang's 8 bytes a thread of reduction scratch (lowered:
    18560 B for extend m128n32w4 at d128, 13376 B for decode n16w1s32)."""
    cfg = dict(c.kwargs)["cfg"]
    return cfg.lds_estimate(p.args[0]) + 4 * cfg.block_n + 8 * cfg.threads


def extend(module, x: Inputs, defect=None):
    from tilegate.serving.batch_indices import prepare_extend
    from tilegate.serving.paged import extend_batch

    meta = prepare_extend(
        x.req_to_token, x.req_pool_indices, x.seq_lens, x.extend_seq_lens, x.q.device
    )
    return extend_batch(
        meta, x.q, x.k_buffer, x.v_buffer, x.sm_scale, knobs=knobs_for(defect), out=x.out
    )


def decode(module, x: Inputs):
    from tilegate.serving.batch_indices import prepare_decode
    from tilegate.serving.paged import decode_batch

    meta = prepare_decode(x.req_to_token, x.req_pool_indices, x.seq_lens, x.q.device)
    return decode_batch(meta, x.q, x.k_buffer, x.v_buffer, x.sm_scale, out=x.out)


def kernel(name, module, factory, tables, launchers, builds, **options) -> ForeignKernel:
    problems = tuple(problem(dtype, d) for dtype, d in builds)
    return ForeignKernel(
        name=name,
        provenance=source(module),
        factory=factory,
        configs=configs(tables, **options),
        problems=problems,
        capabilities=Capabilities(
            dtypes=tuple(sorted({p.dtype for p in problems})),
            head_dims=tuple(sorted({p.head_dim for p in problems})),
            masks=("causal",),
            compile_time=("heads", "kv_heads"),
        ),
        isa=IsaExpectations(
            mfma_input=problems[0].dtype,
            # as the gate's own ISA tier holds them (tilegate/gate/registry.py)
            wide_global_loads=True,
            min_waves_per_simd={p.head_dim: WAVES_FLOOR[p.head_dim] for p in problems},
        ),
        lds_estimate=lds,
        family="paged",
        launcher=launchers,
    )


KERNELS = [
    kernel(f"paged-self-{phase}-{SHORT[dtype]}", module, factory, tables, launchers, builds=builds)
    for phase, module, factory, tables, launchers in (
        ("extend", "paged_extend", "paged_extend", EXTEND_TABLES, Launchers(extend=extend)),
        ("decode", "paged_decode", "paged_decode_split", DECODE_TABLES, Launchers(decode=decode)),
    )
    for dtype, builds in BUILDS.items()
]
# Planted: after a cached prefix each new token sits one position late and also sees the next key
# (kernels/paged_extend.py cached_prefix). fp16 d128: the cases with a prefix of 12 and 65 tokens.
PREFIX_OFF_BY_ONE = kernel(
    "paged-self-prefix-off-by-one",
    "paged_extend",
    "paged_extend",
    EXTEND_TABLES,
    Launchers(extend=lambda m, x: extend(m, x, defect=ExtendDefect.PREFIX_OFF_BY_ONE)),
    builds=(("float16", 128),),
    knobs=knobs_for(ExtendDefect.PREFIX_OFF_BY_ONE),
)
