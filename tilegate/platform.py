"""What this machine can run, decided once. Architecture matches are exact.

``local_target()`` is the one place that decides which tile-config table (kernels/configs.py)
the local GPU uses; launchers, the transformers attention and the GPU tiers all ask it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# GPU architecture as the device reports it -> the config table built for it.
CONFIG_TARGETS = {"gfx942": "gfx942", "sm_90": "sm90"}
# The table whose programs ship on MI300X. Every GPU also runs them: the same TileLang program,
# lowered for the local backend (on the H200, for sm90), so that the programs that ship are
# checked for numbers wherever the gate has a GPU (cross-target execution).
SHIPPING_TARGET = "gfx942"


class NoLocalTarget(RuntimeError):
    """No GPU, or a GPU without a tile-config table: nothing to launch kernels on."""


@dataclass(frozen=True)
class Platform:
    kind: str  # "rocm" | "cuda" | "cpu"
    arch: str | None  # "gfx942", "sm_90", ... exactly as the device reports it (no feature suffix)
    device_name: str | None

    @property
    def config_target(self) -> str | None:
        """The tile-config table for the local GPU, or None when there is none for it."""
        return CONFIG_TARGETS.get(self.arch or "")

    @property
    def has_gpu(self) -> bool:
        return self.kind != "cpu"

    @property
    def executed_targets(self) -> tuple[str, ...]:
        """The config tables whose programs run here: the local GPU's own, then SHIPPING_TARGET's
        (native on MI300X, cross-target elsewhere); none without a GPU that has a table."""
        if self.config_target is None:  # no GPU, or one with no table: nothing is launched here
            return ()
        return tuple(dict.fromkeys(t for t in (self.config_target, SHIPPING_TARGET) if t))

    def describe(self) -> str:
        return f"{self.kind} {self.arch or ''} {self.device_name or ''}".strip()


@functools.cache
def detect() -> Platform:
    import torch

    if not torch.cuda.is_available():
        return Platform("cpu", None, None)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if torch.version.hip:
        # gcnArchName is "gfx942:sramecc+:xnack-"; the architecture is the part before ':'
        return Platform("rocm", props.gcnArchName.split(":")[0], props.name)
    return Platform("cuda", f"sm_{props.major}{props.minor}", props.name)


def local_target() -> str:
    """The config table of the local GPU; NoLocalTarget names what is missing."""
    plat = detect()
    if not plat.has_gpu:
        raise NoLocalTarget("no GPU: TileLang kernels run on a ROCm or CUDA device only")
    if plat.config_target is None:
        raise NoLocalTarget(
            f"no tile-config table for {plat.describe()}: add one to kernels/configs.py "
            f"(tables exist for {', '.join(sorted(CONFIG_TARGETS))})"
        )
    return plat.config_target
