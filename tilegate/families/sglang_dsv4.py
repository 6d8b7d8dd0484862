"""SGLang 0.5.23's DeepSeek-V4 fp8 sparse attention (sglang/kernels/ops/attention/dsv4/
tilelang_fp8_attention.py): srt/layers/attention/hip_flash_mla.py picks it on every AMD GPU but
gfx950, so on MI300X it is the decode kernel. dpsk_v4_fp8_attention_fwd's MI300X sizes (block_I 32,
128 threads, 1 stage, 304 CUs) are its non-gfx950 branch, the one a CUDA machine takes too.
Problems: 64 and 128 query heads per rank (the kernel pads to 64), the one-cache call, top-k 512,
64-token pages. The dual-cache call (extra_k_cache) is not declared: left out, so named skips."""

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)
from tilegate.families.sglang_findings import DSV4_FINDINGS
from tilegate.gfx942.isa_checks import OWN_MAX_BARRIERS, OWN_MIN_LOAD_OVERLAP

SOURCE = Provenance(
    "sglang.kernels.ops.attention.dsv4.tilelang_fp8_attention",
    package="sglang",
    version="0.5.23",
    # its dtypes and _pick_inner_iter
    also=("sglang.kernels.ops.attention.dsa.tilelang_kernel",),
)
NOPE, ROPE, TOPK, PAGE, BLOCK_I = 448, 64, 512, 64, 32
HEADS = (64, 128)
CAPS = Capabilities(
    dtypes=("v4-fp8",),
    head_dims=(NOPE + ROPE,),
    masks=("sparse-topk",),
    compile_time=("heads", "topk", "page"),
    features=("sink", "topk-length"),
)
COMBINE_CAPS = Capabilities(
    dtypes=("v4-fp8",), head_dims=(NOPE + ROPE,), masks=("sparse-topk",), compile_time=("heads",)
)
PROBLEMS = tuple(
    Problem(
        f"h{h}-d512-top{TOPK}-page{PAGE}",
        dtype="v4-fp8",
        head_dim=NOPE + ROPE,
        mask="sparse-topk",
        args=(h, TOPK, PAGE),
        shape=params(heads=h, topk=TOPK, page=PAGE),
    )
    for h in HEADS
)
COMBINE_PROBLEMS = tuple(
    Problem(
        f"h{h}-d512-sink",
        dtype="v4-fp8",
        head_dim=NOPE + ROPE,
        mask="sparse-topk",
        args=(h,),
        shape=params(heads=h),
    )
    for h in HEADS
)
GROUPS = TOPK // BLOCK_I


def partial_lds(p: Problem, c: Config) -> int:
    """Packed fp8 + scale words, the dequantised bf16 tile, its rope part, S, and the page ids."""
    h = 64  # H_per_block: the kernel pads to 64 heads a block
    return BLOCK_I * (144 * 4 + 8 + NOPE * 2 + ROPE * 2 + 4) + h * BLOCK_I * 2


def combine_lds(p: Problem, c: Config) -> int:
    return dict(c.kwargs)["n_groups_1"] * 4 * 4


def launch(module, x, stored):
    out, _lse = module.dpsk_v4_fp8_attention_fwd(
        q=stored.q[None],
        k_cache=stored.kv,
        block_table=None,
        cache_seqlens=None,
        head_dim_v=NOPE + ROPE,
        tile_scheduler_metadata=None,
        softmax_scale=x.sm_scale,
        indices=x.indices[None],
        attn_sink=x.sink,
        topk_length=x.topk_length,
    )
    return out[0]


def triton_peer(x, stored):
    from sglang.kernels.ops.attention.dsv4.triton_sparse_decode import triton_fp8_attention_fwd

    out, _lse = triton_fp8_attention_fwd(
        stored.q[None],
        stored.kv,
        NOPE + ROPE,
        x.sm_scale,
        x.indices[None],
        attn_sink=x.sink,
        topk_length=x.topk_length,
    )
    return out[0]


PARTIAL_CONFIGS = tuple(
    Config(
        f"bi{BLOCK_I}-it{i}",
        kwargs=params(block_I=BLOCK_I, inner_iter_1=i, num_stages=1, threads=128),
        threads=128,
    )
    for i in (1, GROUPS)
)
COMBINE_CONFIGS = tuple(
    Config(
        f"groups{g}",
        kwargs=params(
            n_groups_1=g,
            block_I=BLOCK_I,
            inner_iter_1=GROUPS // g,
            head_per_block=4,
            threads=256,
            use_attn_sink=True,
        ),
        threads=256,
    )
    for g in (GROUPS, 1)
)
KERNELS = [
    Kernel(
        name="sglang-dsv4-fp8-partial",
        provenance=SOURCE,
        factory="dpsk_v4_fp8_partial_kernel",
        configs={"gfx942": PARTIAL_CONFIGS},
        problems=PROBLEMS,
        capabilities=CAPS,
        isa=IsaExpectations(
            mfma_input="bfloat16",
            wide_global_loads=True,
            min_waves_per_simd=1.0,
            min_load_overlap=OWN_MIN_LOAD_OVERLAP,
            max_barriers_per_iteration=OWN_MAX_BARRIERS,
            # inner_iter 1: the key loop, T.Pipelined(inner_iter_1) (tilelang_fp8_attention.py
            # :571), has one trip, and the code object no loop (TileLang 0.1.12 and 0.1.15)
            without_loop=frozenset((p.name, f"bi{BLOCK_I}-it1") for p in PROBLEMS),
        ),
        lds_estimate=partial_lds,
        findings=DSV4_FINDINGS.get("sglang-dsv4-fp8-partial", ()),
        family="sparse-mla",
        launcher=launch,
        kv_format="v4-fp8",
        gpu_shape=(64, TOPK, NOPE + ROPE, NOPE + ROPE),
        peer=triton_peer,
    ),
    Kernel(
        name="sglang-dsv4-combine",
        provenance=SOURCE,
        factory="dpsk_v4_combine_kernel",
        configs={"gfx942": COMBINE_CONFIGS},
        problems=COMBINE_PROBLEMS,
        capabilities=COMBINE_CAPS,
        isa=IsaExpectations(mfma_input=None, wide_global_loads=False, min_waves_per_simd=1.0),
        lds_estimate=combine_lds,
        findings=DSV4_FINDINGS.get("sglang-dsv4-combine", ()),
    ),
]
