"""One GPU case of a foreign kernel: its inputs, as its storage holds them, the kernel's output, the
FP32 reference on the values stored, and the plain-torch baseline in the kernel's precision."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tilegate.foreign import sparse_mla as family
from tilegate.foreign.case import load_module
from tilegate.foreign.kv_formats import Stored, fp8_dtype, store
from tilegate.foreign.spec import ForeignKernel
from tilegate.references.sparse_mla import fp8_rounded_probabilities, sparse_mla

DEVICE = "cuda"


def family_cases(kernel: ForeignKernel) -> list[family.Case]:
    if kernel.family != "sparse-mla" or kernel.gpu_shape is None:
        return []
    return family.cases(family.Shape(*kernel.gpu_shape))


def feature_missing(kernel: ForeignKernel, case: family.Case) -> str | None:
    feature = family.FEATURE_OF.get(case.kind)
    if feature and feature not in kernel.capabilities.features:
        return (
            f"{kernel.name}: its capabilities leave out {feature!r} (features: "
            f"{', '.join(kernel.capabilities.features) or 'none'})"
        )
    return None


@dataclass
class Prepared:
    inputs: family.Inputs
    stored: Stored


def prepare(kernel: ForeignKernel, case: family.Case) -> Prepared:
    x = family.make_inputs(case, DEVICE)
    return Prepared(x, store(kernel.kv_format, x.q, x.kv))


def run(kernel: ForeignKernel, p: Prepared) -> torch.Tensor:
    if kernel.launcher is None:
        raise ValueError(f"{kernel.name} declares no launcher: it has no GPU tiers")
    out = kernel.launcher(load_module(kernel), p.inputs, p.stored)
    torch.cuda.synchronize()
    return out


def reference(p: Prepared) -> torch.Tensor:
    x, s = p.inputs, p.stored
    return sparse_mla(
        s.q_seen, s.kv_seen, x.indices, x.sm_scale, x.d_v, topk_length=x.topk_length, sink=x.sink
    )


def baseline(kernel: ForeignKernel, p: Prepared) -> torch.Tensor:
    """Plain torch on the stored values, both products in bf16 (fp8 values are exact there), P
    rounded as the kernel's P operand must be: fp8 for an fp8 P@V (float8_e4m3 storage)."""
    x, s = p.inputs, p.stored
    p_round = (
        fp8_rounded_probabilities(fp8_dtype())
        if kernel.kv_format == "float8_e4m3"
        else (lambda v: v)
    )
    return sparse_mla(
        s.q_seen,
        s.kv_seen,
        x.indices,
        x.sm_scale,
        x.d_v,
        topk_length=x.topk_length,
        sink=x.sink,
        operand=torch.bfloat16,
        p_round=p_round,
    ).to(torch.bfloat16)
