"""The gate's view of dense_example.flash.flash_fwd: its gfx942 builds, what its ISA should show,
and its launcher for the gate's dense cases (tilegate.families.dense)."""

from pathlib import Path

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)

# The flash.py beside this file: the installed copy in a venv, the checkout's on a PYTHONPATH.
SOURCE = Provenance("dense_example.flash", path=str(Path(__file__).with_name("flash.py")))
# dense_example.ops.CONFIGS: gfx942's are gated on the CPU, sm90's lowered beside them (the H200)
TILES = {"gfx942": (128, 32, 256), "sm90": (128, 64, 256)}
SHORT = {"float16": "fp16", "bfloat16": "bf16"}
WAVES_FLOOR = {64: 2.0, 128: 1.0}  # the gate's own: a wider head holds more registers a wave


def problem(dtype: str, head_dim: int, mask: str) -> Problem:
    name = f"d{head_dim}-{SHORT[dtype]}-{mask}"
    args = (head_dim, dtype, mask == "causal")
    return Problem(name, dtype=dtype, head_dim=head_dim, mask=mask, args=args)


def lds(p: Problem, c: Config) -> int:
    k = dict(c.kwargs)
    return 2 * k["block_n"] * p.head_dim * 2 + 2048  # K and V^T tiles, TileLang's reduce scratch


def launch(module, x, mask_tail: bool = True):
    from dense_example.ops import attention

    return attention(x.q, x.k, x.v, x.out, causal=x.causal, mask_tail=mask_tail)


def config(block_m: int, block_n: int, threads: int, mask_tail: bool) -> Config:
    tiles = params(block_m=block_m, block_n=block_n, threads=threads, mask_tail=mask_tail)
    return Config(f"m{block_m}n{block_n}t{threads}", kwargs=tiles, threads=threads)


def kernel(name, dtype, problems, head_dims, *, mask_tail=True, launcher=launch, **fixed_sizes):
    """``fixed_sizes``: compile_time and case_args, for a build whose lengths are fixed."""
    compile_time = fixed_sizes.pop("compile_time", ())
    return Kernel(
        name=name,
        provenance=SOURCE,
        factory="flash_fwd",
        configs={t: (config(*tiles, mask_tail),) for t, tiles in TILES.items()},
        problems=problems,
        capabilities=Capabilities(
            dtypes=(dtype,),
            head_dims=head_dims,
            masks=("causal", "full"),
            compile_time=compile_time,
        ),
        isa=IsaExpectations(
            mfma_input=dtype,
            wide_global_loads=True,
            min_waves_per_simd={p.head_dim: WAVES_FLOOR[p.head_dim] for p in problems},
        ),
        lds_estimate=lds,
        family="dense",
        launcher=launcher,
        **fixed_sizes,
    )


KERNELS = [
    kernel(
        "dense-example-fp16",
        "float16",
        (problem("float16", 128, "causal"), problem("float16", 64, "full")),
        (64, 128),
    ),
    kernel(
        "dense-example-bf16",
        "bfloat16",
        (problem("bfloat16", 128, "causal"), problem("bfloat16", 128, "full")),
        (128,),
    ),
]
# Planted: keys at or past seq_k in a partial last key block are not masked (flash.py's
# mask_tail). A full mask then fails at 3782 tokens, and passes at 3840 (no partial block).
TAIL_MASK_BUG = kernel(
    "dense-example-tail-mask-bug",
    "float16",
    (problem("float16", 128, "full"), problem("float16", 64, "causal")),
    (64, 128),
    mask_tail=False,
    launcher=lambda module, x: launch(module, x, mask_tail=False),
)


def launch_built(module, x):
    """The family built the kernel for this case (x.compiled): the launcher only calls it."""
    x.compiled(x.q, x.k, x.v, x.out)
    return x.out


def fixed_sizes(name: str, *, mask_tail: bool = True) -> Kernel:
    """The example with one length for Q and K and the batch fixed at compile time, as TileLang's
    AMD flash-attention example builds: the family compiles it per case (case_args)."""
    problems = tuple(
        Problem(
            f"d128-fp16-{mask}-s3782-b1",
            dtype="float16",
            head_dim=128,
            mask=mask,
            args=(128, "float16", mask == "causal", 3782, 1),
            shape=params(seq=3782, batch=1),
        )
        for mask in ("causal", "full")
    )
    return kernel(
        name,
        "float16",
        problems,
        (128,),
        mask_tail=mask_tail,
        launcher=launch_built,
        compile_time=("seq", "batch"),
        case_args=lambda s: (s.head_dim, s.dtype, s.causal, s.seq_k, s.batch),
    )


FIXED_SIZES = fixed_sizes("dense-example-fixed-sizes")
# the same, with the planted tail-mask bug: the per-case builds must be judged, not only run
FIXED_SIZES_TAIL_MASK_BUG = fixed_sizes("dense-example-fixed-sizes-tail-bug", mask_tail=False)
