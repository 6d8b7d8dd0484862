"""SGLang 0.5.23's DSA sparse-MLA decode (sglang/kernels/ops/attention/dsa/tilelang_kernel.py):
the bf16 and fp8-KV partials and their combine, with the tile sizes tilelang_sparse_fwd picks on
MI300X (gfx942, not gfx950: bf16 block_I 32 / 128 threads, fp8 64 / 256, 304 CUs), chained as it
chains them. Problems: DeepSeek-V3.2's 128 query heads per rank (DP attention) and 16 (TP 8);
top-k 2048."""

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)
from tilegate.families.sglang_findings import DSA_FINDINGS
from tilegate.gfx942.isa_checks import OWN_MAX_BARRIERS, OWN_MIN_LOAD_OVERLAP

SOURCE = Provenance(
    "sglang.kernels.ops.attention.dsa.tilelang_kernel", package="sglang", version="0.5.23"
)
D, TAIL, TOPK, CUS = 512, 64, 2048, 304
HEADS = (16, 128)
CAPS = Capabilities(
    dtypes=("bfloat16",),
    head_dims=(D + TAIL,),
    masks=("sparse-topk",),
    compile_time=("heads", "topk"),
)
FP8_CAPS = Capabilities(
    dtypes=("float8_e4m3",),
    head_dims=(D + TAIL,),
    masks=("sparse-topk",),
    compile_time=("heads", "topk"),
)
HIP = {"gfx942": {"_is_fp8_fnuz": True}}  # MI300X's fp8 is e4m3fnuz: what its import would have set
FLAVOURS = {
    "bfloat16": (32, 128, "sparse_mla_fwd_decode_partial"),
    "float8_e4m3": (64, 256, "sparse_mla_fwd_decode_partial_fp8"),
}


def _problems(dtype: str) -> tuple[Problem, ...]:
    short = {"bfloat16": "bf16", "float8_e4m3": "fp8"}[dtype]
    return tuple(
        Problem(
            f"h{h}-d576-top{TOPK}-{short}",
            dtype=dtype,
            head_dim=D + TAIL,
            mask="sparse-topk",
            args=(h, D, TAIL, TOPK),
            shape=params(heads=h, topk=TOPK),
        )
        for h in HEADS
    )


def _split(block_i: int, threads: int, inner: int) -> Config:
    return Config(
        f"bi{block_i}-it{inner}",
        kwargs=params(block_I=block_i, inner_iter=inner, threads=threads),
        threads=threads,
    )


def partial_lds(p: Problem, c: Config) -> int:
    """The partial's shared buffers (tilelang_kernel.py): Q in shared only when inner_iter is 1."""
    k, heads = dict(c.kwargs), p.args[0]
    h = 64 if heads > 64 else max(16, 1 << (heads - 1).bit_length())
    if p.dtype == "bfloat16":
        q = (h * (D + TAIL) * 2) if k["inner_iter"] == 1 else 0
        return q + k["block_I"] * (D + TAIL) * 2 + h * k["block_I"] * 2
    return 16 * (D + TAIL) + k["block_I"] * (D + TAIL) + 16 * k["block_I"] + 4 * k["block_I"]


def launch(module, x, stored):
    """tilelang_sparse_fwd's HIP chain on [tokens, heads, 576] q and [rows, 576] kv."""
    tokens, heads = x.q.shape[:2]
    block_i, threads, factory = FLAVOURS[
        "bfloat16" if stored.kv.dtype.itemsize == 2 else "float8_e4m3"
    ]
    ni = TOPK // block_i
    inner = module._pick_inner_iter(tokens, ni, CUS, 1)
    partial = getattr(module, factory)(
        heads,
        D,
        TAIL,
        TOPK,
        sm_scale=x.sm_scale,
        block_I=block_i,
        inner_iter=inner,
        threads=threads,
    )
    out, lse = partial(stored.q[None], stored.kv[None, :, None], x.indices[None, :, None])
    combine = module.sparse_mla_fwd_decode_combine(
        heads, D, (ni // inner) * block_i, head_per_block=4, block_I=block_i, threads=threads
    )
    return combine(out, lse)[0]


def triton_peer(x, stored):
    from sglang.kernels.ops.attention.dsa.triton_sparse_mla import triton_sparse_mla_fwd

    q = stored.q
    return triton_sparse_mla_fwd(
        q[..., :D], q[..., D:], stored.kv[:, None], x.indices[:, None], x.sm_scale, D
    )[0]


# The builds with no inner loop (TileLang 0.1.12 and 0.1.15): the key loop,
# T.Pipelined(inner_iter) (tilelang_kernel.py:743, the fp8 partial's T.serial :1040), runs
# inner_iter trips, a constant: one at inner_iter 1, and at 16 heads the bf16 partial's two are
# unrolled too. The latency expectations have nothing to measure there.
WITHOUT_LOOP = {
    "bfloat16": frozenset({("h16-d576-top2048-bf16", "bi32-it2")}),
    "float8_e4m3": frozenset((f"h{h}-d576-top{TOPK}-fp8", "bi64-it1") for h in HEADS),
}


def _partial(
    name: str, dtype: str, caps: Capabilities, its: tuple[int, ...], block_i: int, threads: int
):
    mfma = dtype if dtype == "bfloat16" else "float8_e4m3fnuz"
    return Kernel(
        name=name,
        provenance=SOURCE,
        factory=FLAVOURS[dtype][2],
        configs={"gfx942": tuple(_split(block_i, threads, i) for i in its)},
        problems=_problems(dtype),
        capabilities=caps,
        isa=IsaExpectations(
            mfma_input=mfma,
            wide_global_loads=True,
            min_waves_per_simd=1.0,
            min_load_overlap=OWN_MIN_LOAD_OVERLAP,
            max_barriers_per_iteration=OWN_MAX_BARRIERS,
            without_loop=WITHOUT_LOOP[dtype],
        ),
        lds_estimate=partial_lds,
        target_globals=HIP,
        findings=DSA_FINDINGS.get(name, ()),
        family="sparse-mla",
        launcher=launch,
        peer=triton_peer,
        kv_format=dtype,
        gpu_shape=(16, TOPK, D + TAIL, D),
    )


def combine_lds(p: Problem, c: Config) -> int:
    return dict(c.kwargs)["topk"] // dict(c.kwargs)["block_I"] * 4 * 4  # the fp32 LSEs of 4 heads


# the combine after each partial: its top-k is the partial's groups times block_I (NI = groups)
COMBINE_CONFIGS = tuple(
    Config(
        f"bi{b}-ni{ni}",
        kwargs=params(topk=ni * b, head_per_block=4, block_I=b, threads=t),
        threads=t,
    )
    for b, t, groups in ((32, 128, (64, 32, 1)), (64, 256, (32, 1)))
    for ni in groups
)
COMBINE_PROBLEMS = tuple(
    Problem(
        f"h{h}-dv512-bf16",
        dtype="bfloat16",
        head_dim=D + TAIL,
        mask="sparse-topk",
        args=(h, D),
        shape=params(heads=h),
    )
    for h in HEADS
)
KERNELS = [
    _partial("sglang-dsa-partial", "bfloat16", CAPS, (1, 2, 64), 32, 128),
    _partial("sglang-dsa-partial-fp8", "float8_e4m3", FP8_CAPS, (1, 32), 64, 256),
    Kernel(
        name="sglang-dsa-combine",
        provenance=SOURCE,
        factory="sparse_mla_fwd_decode_combine",
        configs={"gfx942": COMBINE_CONFIGS},
        problems=COMBINE_PROBLEMS,
        capabilities=CAPS,
        isa=IsaExpectations(mfma_input=None, wide_global_loads=False, min_waves_per_simd=1.0),
        lds_estimate=combine_lds,
        target_globals=HIP,
        findings=DSA_FINDINGS.get("sglang-dsa-combine", ()),
    ),
]
