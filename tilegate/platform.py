"""What this machine can run, decided once. Architecture matches are exact."""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    kind: str  # "rocm" | "cuda" | "cpu"
    arch: str | None  # "gfx942", "sm_90", ... exactly as the device reports it (no feature suffix)
    device_name: str | None

    @property
    def config_target(self) -> str | None:
        """The tile-config table for the local GPU, or None when there is none for it."""
        return {"gfx942": "gfx942", "sm_90": "sm90"}.get(self.arch or "")

    @property
    def has_gpu(self) -> bool:
        return self.kind != "cpu"

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
