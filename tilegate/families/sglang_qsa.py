"""SGLang 0.5.23's QSA indexer scoring (sglang/srt/layers/attention/qsa/mqa.py): packed prefill,
request-relative prefill and paged decode, each relu(K Q^T) summed over the index heads into fp32
logits, with the sizes tilelang_qsa_mqa_* pick on MI300X. Shapes: DeepSeek's indexer, 64 heads of
128 (srt/configs/deepseek_v4.py:58-59), unsplit across ranks (qsa/qsa_indexer.py:68); a prefill
row scores its request's blocks up to its own (qsa/metadata.py:39-45): causal. bf16: fp8 scoring
needs CUDA SM90/SM100 (arg_groups/model_overrides/qwen4_exp.py:80-84). mqa.py asks is_hip() and
the GPU's CU count per call, not at import: no target globals, no at_import; the HIP choices are
passed here. No GPU family: the gate's families judge attention outputs, these write logits."""

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)
from tilegate.families.sglang_findings import QSA_FINDINGS
from tilegate.gfx942.isa_checks import OWN_MAX_BARRIERS, OWN_MIN_LOAD_OVERLAP

SOURCE = Provenance("sglang.srt.layers.attention.qsa.mqa", package="sglang", version="0.5.23")
HEADS, DIM, BF16 = 64, 128, "bfloat16"
# QSA pages are 64 tokens (srt/arg_groups/model_overrides/qwen4_exp.py:92), a compressed page
# 64 // ratio blocks (mem_cache/qsa_kv_pool.py:162). The ratio is the model config's
# indexer_compress_ratio (layers/attention/qsa/config.py:53); here 4, DeepSeek-V4's indexer default
# (layers/attention/deepseek_v4_backend.py:1502, its pages page_size // ratio, :1531): 16
PAGE = 64 // 4
BLOCK_Q = max(1, 128 // HEADS)  # mqa.py:406, :504: 128 GEMM columns of rows x heads


def _problem(mask: str, *page: int) -> Problem:
    return Problem(
        f"h{HEADS}-d{DIM}" + "".join(f"-page{p}" for p in page) + "-bf16",
        dtype=BF16,
        head_dim=DIM,
        mask=mask,
        args=(HEADS, DIM, *page),  # 64 heads: a multiple of HIP's 16 already (mqa.py:599)
        shape=params(heads=HEADS, **({"page": page[0]} if page else {})),
    )


def _prefill(splits: tuple[int | None, ...]) -> tuple[Config, ...]:
    """mqa.py:143-146's block_n 64, 3 stages, 512 threads; key_splits by grid (mqa.py:443-452:
    1 for a long prefill, up to 64 for a few rows; None: the packed kernel, which has none)."""
    return tuple(
        Config(
            f"q{BLOCK_Q}n64s3" + ("" if s is None else f"-split{s}"),
            kwargs=params(
                block_q=BLOCK_Q,
                block_n=64,
                num_stages=3,
                threads=512,
                dtype=BF16,
                **({} if s is None else {"key_splits": s}),
            ),
            threads=512,
        )
        for s in splits
    )


def prefill_lds(p: Problem, c: Config) -> int:
    """Q (block_q rows x heads) and one 64-row K tile, bf16; the head sum's workspace, 4 B a
    thread."""
    return (BLOCK_Q * HEADS + 64) * DIM * 2 + 4 * c.threads


def decode_lds(p: Problem, c: Config) -> int:
    """Q (heads x dim) and one 64-row tile of K sub-pages, bf16; two head-sum workspaces."""
    return (HEADS + 64) * DIM * 2 + 2 * 4 * c.threads


# CTAs per decode row (mqa.py:541-554, 304 CUs): 256 for 1-75 rows, 16 for 76-1215, then 1;
# min_scored_len is the block top-k, 512, where fast_topk takes the row (qsa_indexer.py:551-562)
DECODE = tuple(
    Config(
        f"ctas{ctas}-min512",
        kwargs=params(ctas_per_row=ctas, min_scored_len=512, threads=128, dtype=BF16),
        threads=128,
    )
    for ctas in (256, 1)
)
ISA = IsaExpectations(
    mfma_input=BF16,
    wide_global_loads=True,
    min_waves_per_simd=1.0,
    min_load_overlap=OWN_MIN_LOAD_OVERLAP,
    max_barriers_per_iteration=OWN_MAX_BARRIERS,
)


def _kernel(name: str, factory: str, configs, problem: Problem, lds) -> Kernel:
    return Kernel(
        name=name,
        provenance=SOURCE,
        factory=factory,
        configs={"gfx942": configs},
        problems=(problem,),
        capabilities=Capabilities(
            dtypes=(BF16,),
            head_dims=(DIM,),
            masks=(problem.mask,),
            compile_time=tuple(k for k, _ in problem.shape),
        ),
        isa=ISA,
        lds_estimate=lds,
        findings=QSA_FINDINGS.get(name, ()),
    )


KERNELS = [
    _kernel(
        "sglang-qsa-prefill",
        "_tilelang_qsa_mqa_prefill_kernel",
        _prefill((None,)),
        _problem("causal"),
        prefill_lds,
    ),
    _kernel(
        "sglang-qsa-prefill-relative",
        "_tilelang_qsa_mqa_prefill_relative_kernel",
        _prefill((1, 64)),
        _problem("causal"),
        prefill_lds,
    ),
    _kernel(
        "sglang-qsa-decode",
        "_tilelang_qsa_mqa_decode_kernel",
        DECODE,
        _problem("full", PAGE),
        decode_lds,
    ),
]
