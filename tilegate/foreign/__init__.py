"""Kernels the gate did not write, gated through an adapter (tilegate.foreign.spec): the records an
adapter declares, their discovery, the builds and the tiers that judge them."""

from tilegate.foreign.provenance import Provenance
from tilegate.foreign.spec import (
    Capabilities,
    Config,
    Finding,
    ForeignKernel,
    ForeignKernelError,
    IsaExpectations,
    LaunchOption,
    Problem,
    params,
)

__all__ = [
    "Capabilities",
    "Config",
    "Finding",
    "ForeignKernel",
    "ForeignKernelError",
    "IsaExpectations",
    "LaunchOption",
    "Problem",
    "Provenance",
    "params",
]
