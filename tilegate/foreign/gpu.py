"""One GPU case of a foreign kernel, whatever its family: its inputs, the kernel's output, the FP32
reference and the plain-torch baseline in the kernel's precision. Each call goes to the module of
the kernel's family (spec.FAMILIES: tilegate.foreign.sparse_mla, tilegate.foreign.dense), which
holds them; the tiers (tilegate/foreign/tiers.py) and the sanitizer's child call only this."""

from __future__ import annotations

from typing import Any

import torch

from tilegate.foreign.case import load_module
from tilegate.foreign.spec import ForeignKernel

DEVICE = "cuda"  # torch's name for the current device under CUDA and ROCm alike


def family_cases(kernel: ForeignKernel) -> list:
    return kernel.family_module().family_cases(kernel) if kernel.family else []


def features_of(kernel: ForeignKernel) -> dict[str, str]:
    """case kind -> the capability feature it needs, for the kernel's family."""
    return kernel.family_module().FEATURE_OF if kernel.family else {}


def feature_missing(kernel: ForeignKernel, case) -> str | None:
    """A named skip: the case needs what the kernel's capabilities leave out."""
    return kernel.family_module().missing(kernel, case)


def prepare(kernel: ForeignKernel, case, device: str = DEVICE) -> Any:
    return kernel.family_module().prepare(kernel, case, device)


def run(kernel: ForeignKernel, prepared) -> torch.Tensor:
    if kernel.launcher is None:
        raise ValueError(f"{kernel.name} declares no launcher: it has no GPU tiers")
    out = kernel.family_module().launch(kernel, load_module(kernel), prepared)
    torch.cuda.synchronize()
    return out


def reference(kernel: ForeignKernel, prepared) -> torch.Tensor:
    return kernel.family_module().reference(kernel, prepared)


def baseline(kernel: ForeignKernel, prepared) -> torch.Tensor:
    return kernel.family_module().baseline(kernel, prepared)


def record_dtype(kernel: ForeignKernel, case) -> str:
    """The dtype row of the numerics summary its record joins."""
    return kernel.family_module().record_dtype(kernel, case)


def stray_writes(kernel: ForeignKernel, prepared) -> str | None:
    """What the launch wrote outside its output (a padded buffer's NaN rows), or None."""
    return kernel.family_module().stray_writes(prepared)
