"""A dense kernel that fixes some of a case's sizes at compile time (``Capabilities.compile_time``:
one length for Q and K, both lengths, the batch), as TileLang's own examples do: the family builds
it for each case itself, from the adapter's ``case_args`` (the factory's arguments for one case),
so that its launcher neither pads nor compiles; and a case its fixed sizes cannot hold (two lengths,
for a kernel of one) is a skip that names them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilegate.families.case import KernelBuild
from tilegate.families.spec import Problem

if TYPE_CHECKING:
    from tilegate.families.spec import Kernel

# the sizes of a dense case a kernel may fix; "seq": one length for Q and K
FIXED_SIZES = ("batch", "seq_q", "seq_k", "seq")


@dataclass(frozen=True, kw_only=True)
class CaseShape:
    """One case's sizes and mask: what an adapter's ``case_args`` is given."""

    batch: int
    seq_q: int
    seq_k: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool
    window: int | None
    mask: str  # the capability the case needs: "causal", "full" or "sliding-window"


def fixed(kernel: Kernel) -> tuple[str, ...]:
    return tuple(s for s in FIXED_SIZES if s in kernel.capabilities.compile_time)


def refusal(kernel: Kernel) -> str | None:
    """Why the adapter's sizes and ``case_args`` disagree, or None."""
    sizes = fixed(kernel)
    if sizes and kernel.case_args is None:
        return (
            f"capabilities.compile_time fixes {list(sizes)}: give case_args (CaseShape -> the "
            "factory's args for one case), and the family builds the kernel for each case"
        )
    if kernel.case_args is not None and not sizes:
        return (
            f"case_args builds per case, and capabilities.compile_time fixes none of "
            f"{list(FIXED_SIZES)}: leave case_args out, or name the sizes it fixes"
        )
    return None


def missing(kernel: Kernel, shape: CaseShape) -> str | None:
    """A named skip: the case has two lengths and the kernel one."""
    if "seq" in fixed(kernel) and shape.seq_q != shape.seq_k:
        return (
            f"{kernel.name}: its compile-time sizes hold one length for Q and K (compile_time "
            f"'seq'); the case has seq_q {shape.seq_q}, seq_k {shape.seq_k}"
        )
    return None


def case_build(kernel: Kernel, shape: CaseShape, target: str) -> KernelBuild:
    """One case's build for ``target``: the adapter's args for it, the target's first config."""
    assert kernel.case_args is not None  # refusal() saw to it
    configs = kernel.configs.get(target, ())
    if not configs:
        raise ValueError(f"{kernel.name} has no {target} config to build its cases with")
    problem = Problem(
        f"b{shape.batch}-q{shape.seq_q}-k{shape.seq_k}",
        dtype=shape.dtype,
        head_dim=shape.head_dim,
        mask=shape.mask,
        args=tuple(kernel.case_args(shape)),
    )
    return KernelBuild.of(kernel, problem, configs[0], target)


_COMPILED: dict[str, Any] = {}


def compiled(kernel: Kernel, shape: CaseShape) -> Any:
    """The kernel built for this case on the local GPU, once per build in a process."""
    import tilelang

    from tilegate.platform import detect, local_target

    build = case_build(kernel, shape, local_target())
    key = build.cache_key()
    if key not in _COMPILED:
        prim, passes = build.lowering_input()
        target = "hip" if detect().kind == "rocm" else "cuda"
        _COMPILED[key] = tilelang.compile(prim, out_idx=None, target=target, pass_configs=passes)
    return _COMPILED[key]
