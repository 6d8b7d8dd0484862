"""The gate's view of example_kernel.kernels.scores: what it is built for, and what its ISA
should show."""

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)

SOURCE = Provenance("example_kernel.kernels", package="tilegate-example-kernel", version="0.1.0")
CAPS = Capabilities(
    dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=("head_dim",)
)
PROBLEM = Problem(
    "d128-bf16", dtype="bfloat16", head_dim=128, mask="full", shape=params(head_dim=128)
)
ISA = IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0)


def lds(problem: Problem, cfg: Config) -> int:
    k = dict(cfg.kwargs)
    return (k["block_m"] + k["block_n"]) * k["head_dim"] * 2


def kernel(name: str, *configs: Config) -> Kernel:
    return Kernel(
        name=name,
        provenance=SOURCE,
        factory="scores",
        configs={"gfx942": configs},
        problems=(PROBLEM,),
        capabilities=CAPS,
        isa=ISA,
        lds_estimate=lds,
    )


M64N64 = Config(
    "m64n64", kwargs=params(block_m=64, block_n=64, head_dim=128, threads=128), threads=128
)
# A config over the LDS budget (2 x 256 x 128 bf16: lowered 131072 B): the gate's failure, seen
# from outside.
M256N256 = Config(
    "m256n256", kwargs=params(block_m=256, block_n=256, head_dim=128, threads=256), threads=256
)
KERNELS = [kernel("example-scores", M64N64)]
OVER_BUDGET = [kernel("example-scores-too-big", M256N256)]
