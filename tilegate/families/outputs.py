"""What a dense or paged launch is judged on: the output buffer the family hands the launcher
(NaN-filled, inside a padded buffer whose rows past it must stay NaN), never a tensor the launcher
returns of its own, which the fill and the stray-write check would never see."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from tilegate.families.spec import Kernel


def written_output(kernel: Kernel, family: str, out: torch.Tensor, got) -> torch.Tensor:
    """``out``, once the launcher's return ``got`` is None or ``out`` itself; anything else is an
    error naming the adapter's line."""
    from tilegate.families.spec import KernelDeclarationError

    if got is None or (
        isinstance(got, torch.Tensor)
        and got.data_ptr() == out.data_ptr()
        and got.shape == out.shape
    ):
        return out
    raise KernelDeclarationError(
        f"{kernel.declared_at}: Kernel {kernel.name!r}: its launcher returned "
        f"{type(got).__name__} {tuple(getattr(got, 'shape', ()))}, not inputs.out: family "
        f"{family!r} judges inputs.out, which the kernel must write; return it, or None"
    )
