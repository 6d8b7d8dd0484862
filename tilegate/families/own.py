"""The gate's own kernels (kernels/), declared through the record every other kernel is: the GPU
tiers judge them by their family's cases (tilegate.families.dense: the prefill;
tilegate.families.paged: the extend and split decode that SGLang's backend launches), as they judge
an adapted kernel. Each case runs once per launch option: every config of every target's table
whose programs the local GPU runs (the gfx942 ones run on the H200 too), and for a decode each
split count the launch path takes (the schedule's, one: no combine, two, the config's most).

Their builds are the registry's (tilegate/gate/registry.py): the compile and ISA tiers
(suite/compile, suite/isa) lower every config of every table, with golden snapshots, so the
records declare no problems. The launchers go through the runtime and serving launch paths, as
SGLang's backend does; the reference that judges them is FP32 torch, not either kernel.
"""

from __future__ import annotations

from tilegate.families.dense import Case as DenseCase
from tilegate.families.dense import Inputs as DenseInputs
from tilegate.families.paged import Case as PagedCase
from tilegate.families.paged import Inputs as PagedInputs
from tilegate.families.paged import Launchers
from tilegate.families.provenance import Provenance
from tilegate.families.spec import Capabilities, Kernel, LaunchOption
from tilegate.gate.builds import phase_builds
from tilegate.gate.paths import REPO_ROOT
from tilegate.gate.planted import ExtendDefect, knobs_for
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES, configs_for
from tilegate.kernels.dtypes import dtype_name
from tilegate.kernels.problem import AttentionShape

KERNELS_DIR = REPO_ROOT / "tilegate" / "kernels"  # the path an import of tilegate.kernels gives
DTYPES, HEAD_DIMS = ("bfloat16", "float16"), (64, 128)
# a decode's split counts: the schedule's for the batch (None), one (the output written directly,
# no combine), two (the combine serving uses at large batches), the config's most (-1)
SPLITS = {"scheduled": None, "one": 1, "two": 2, "most": -1}


def _source(module: str) -> Provenance:
    return Provenance(f"tilegate.kernels.{module}", path=str(KERNELS_DIR / f"{module}.py"))


def _table_options(shape: AttentionShape, tables, phase: str, tiles_m=None) -> list[LaunchOption]:
    return [
        LaunchOption(
            f"{target}-{cfg.name}",
            cfg,
            target=target,
            tiles=(tiles_m or cfg.block_m, cfg.block_n),
            builds=tuple(phase_builds(phase, shape, cfg)),
        )
        for target in tables
        for cfg in configs_for(target, shape.head_dim, tables)
    ]


def _prefill_options(case: DenseCase) -> tuple[LaunchOption, ...]:
    return tuple(_table_options(case.run.shape, CONFIG_TABLES, "prefill"))


def _paged_options(case: PagedCase) -> tuple[LaunchOption, ...]:
    shape = case.paged.shape
    if case.phase == "extend":
        return tuple(_table_options(shape, EXTEND_TABLES, "extend"))
    # large logits: the combine must take the global max, so every split there
    splits = {"most": -1} if case.kind == "large-logits" else SPLITS
    return tuple(
        LaunchOption(
            f"{option.label}-splits-{name}",
            (option.value, n),
            target=option.target,
            tiles=option.tiles,
            builds=option.builds,
            build_group=option.label,  # the split counts launch one build
        )
        for option in _table_options(shape, DECODE_TABLES, "decode", tiles_m=1)
        for name, n in splits.items()
    )


def _shape(x: DenseInputs) -> AttentionShape:
    heads, kv_heads, dim = x.q.shape[2], x.k.shape[2], x.q.shape[3]
    dtype = dtype_name(x.q.dtype) or str(x.q.dtype)  # an unsupported one is named by ShapeError
    return AttentionShape(heads, kv_heads, dim, x.causal, dtype, x.window)


def prefill(module, x: DenseInputs):
    from tilegate.kernels.configs import default_config
    from tilegate.platform import local_target
    from tilegate.runtime import flash_attention

    shape = _shape(x)
    cfg = x.option or default_config(local_target(), shape.head_dim, CONFIG_TABLES)
    return flash_attention(shape, cfg, x.q, x.k, x.v, out=x.out)


def extend(module, x: PagedInputs, defect=None):
    from tilegate.serving.batch_indices import prepare_extend
    from tilegate.serving.paged import extend_batch

    meta = prepare_extend(
        x.req_to_token, x.req_pool_indices, x.seq_lens, x.extend_seq_lens, x.q.device
    )
    return extend_batch(
        meta, x.q, x.k_buffer, x.v_buffer, x.sm_scale, cfg=x.option, knobs=knobs_for(defect),
        out=x.out,
    )  # fmt: skip


def decode(module, x: PagedInputs):
    from tilegate.serving.batch_indices import prepare_decode
    from tilegate.serving.paged import decode_batch

    cfg, splits = x.option or (None, None)
    if cfg is not None and splits == -1:
        splits = cfg.num_splits
    meta = prepare_decode(x.req_to_token, x.req_pool_indices, x.seq_lens, x.q.device)
    return decode_batch(
        meta, x.q, x.k_buffer, x.v_buffer, x.sm_scale, cfg, splits=splits, out=x.out
    )


def _kernel(
    name, module, factory, family, launcher, options, masks, dtypes=DTYPES, head_dims=HEAD_DIMS
):
    return Kernel(
        name=name,
        provenance=_source(module),
        factory=factory,
        configs={},
        problems=(),
        capabilities=Capabilities(
            dtypes=dtypes, head_dims=head_dims, masks=masks, compile_time=("heads", "kv_heads")
        ),
        isa=None,
        lds_estimate=None,
        family=family,
        launcher=launcher,
        launch_options=options,
    )


PREFILL = _kernel(
    "gate-prefill",
    "flash_fwd",
    "flash_fwd",
    "dense",
    prefill,
    _prefill_options,
    ("causal", "full", "sliding-window"),
)
EXTEND = _kernel(
    "gate-extend", "paged_extend", "paged_extend", "paged", Launchers(extend=extend),
    _paged_options, ("causal",),
)  # fmt: skip
DECODE = _kernel(
    "gate-decode", "paged_decode", "paged_decode_split", "paged", Launchers(decode=decode),
    _paged_options, ("causal",),
)  # fmt: skip
KERNELS = [PREFILL, EXTEND, DECODE]

# Planted: after a cached prefix each new token sits one position late and also sees the next key
# (kernels/paged_extend.py cached_prefix). fp16 d128, the local default config: the numerics tier
# must fail the extends over a short cached prefix (12 and 65 tokens).
PREFIX_OFF_BY_ONE = _kernel(
    "gate-extend-prefix-off-by-one",
    "paged_extend",
    "paged_extend",
    "paged",
    Launchers(extend=lambda m, x: extend(m, x, defect=ExtendDefect.PREFIX_OFF_BY_ONE)),
    None,
    ("causal",),
    dtypes=("float16",),
    head_dims=(128,),
)
