"""Kernels the gate did not write, gated through an adapter (tilegate.families.spec): the records an
adapter declares, their discovery, the builds and the tiers that judge them."""

from tilegate.families.provenance import Provenance
from tilegate.families.spec import (
    Capabilities,
    Config,
    Finding,
    IsaExpectations,
    Kernel,
    KernelDeclarationError,
    LaunchOption,
    Problem,
    params,
)

__all__ = [
    "Capabilities",
    "Config",
    "Finding",
    "Kernel",
    "KernelDeclarationError",
    "IsaExpectations",
    "LaunchOption",
    "Problem",
    "Provenance",
    "params",
]
