"""One GPU case of an adapted kernel, whatever its family: its inputs, the kernel's output, the FP32
reference and the plain-torch baseline in the kernel's precision. Each call goes to the module of
the kernel's family (spec.FAMILIES: tilegate.families.sparse_mla, tilegate.families.dense,
tilegate.families.paged), which holds them; the tiers (tilegate/testing/kernel_tiers.py) and the
sanitizer's child call only this."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import torch

from tilegate.families.case import load_module
from tilegate.families.spec import Kernel

DEVICE = "cuda"  # torch's name for the current device under CUDA and ROCm alike


class Family(Protocol):
    """What a case family's module holds (spec.FAMILIES, one module each: a new family is a module
    with these). A case has a ``name``, unique in its family, and a ``kind``."""

    FEATURE_OF: dict[str, str]  # case kind -> the capability feature it needs
    AXES: tuple[str, ...]  # the output's axes, as a failure names them
    DETERMINISM_CASES: tuple[str, ...]  # launched twice, compared bit for bit
    # sanitizer tool -> the cases its child runs; () picks sanitized_by_default's
    SANITIZED_CASES: dict[str, tuple[str, ...]]

    def refusal(self, kernel: Kernel) -> str | None:
        """Why an adapter cannot be judged by the family (refused at its line), or None."""

    def family_cases(self, kernel: Kernel) -> list: ...

    def missing(self, kernel: Kernel, case: Any) -> str | None:
        """A named skip: what the case needs and the kernel's capabilities leave out."""

    def build_of(self, case: Any) -> str | None:
        """The compile-time part of a case: its tests share an xdist worker (None: no grouping)."""

    def is_slow(self, case: Any) -> bool: ...

    def sanitized_by_default(self, case: Any) -> bool: ...

    def prepare(self, kernel: Kernel, case: Any, device: str) -> Any: ...

    def launch(self, kernel: Kernel, module: Any, prepared: Any) -> torch.Tensor:
        """One launch, and its output (gpu.run copies it: two launches are two tensors)."""

    def reference(self, kernel: Kernel, prepared: Any) -> torch.Tensor:
        """FP32, on the values the kernel is given."""

    def baseline(self, kernel: Kernel, prepared: Any) -> torch.Tensor:
        """Plain torch in the kernel's precision: the judge's yardstick."""

    def record_dtype(self, kernel: Kernel, case: Any) -> str: ...

    def stray_writes(self, prepared: Any) -> str | None: ...

    def case_axes(self, case: Any) -> dict[str, Any]:
        """The capability axes' values (dtype, head_dim, mask) the case runs, those it knows."""

    def seed(self, case: Any) -> int:
        """The seed the case's inputs are drawn with."""

    def site(self, case: Any, index: tuple[int, ...], tiles: tuple[int, int]) -> str:
        """Where an output element lies in a tiling of (block_m, block_n)."""

    def closed_form_failure(
        self, case: Any, prepared: Any, out: torch.Tensor, ref: torch.Tensor
    ) -> str | None:
        """Where the case's answer has a closed form: how the output (or the reference) misses
        it, or None."""


if TYPE_CHECKING:  # mypy checks each family's module against the protocol
    from tilegate.families import dense, paged, sparse_mla

    _SPARSE_MLA: Family = sparse_mla
    _DENSE: Family = dense
    _PAGED: Family = paged


def family_cases(kernel: Kernel) -> list:
    return kernel.family_module().family_cases(kernel) if kernel.family else []


class UnknownCase(ValueError):
    """A case name that no case of the kernel's family carries: a typo, or a case renamed."""


def named_cases(kernel: Kernel, names: Iterable[str], named_by: str) -> list:
    """The family's cases that ``names`` names, in the family's order. A name no case carries is
    an error naming it, ``named_by`` (where the names come from), the kernel and the nearest
    names: a tier that ran the rest, or skipped for want of any, would hide it."""
    cases = family_cases(kernel)
    known = [c.name for c in cases]
    wanted = set(names)
    unknown = sorted(wanted - set(known))
    if unknown:
        near = [n for u in unknown for n in difflib.get_close_matches(u, known, n=3, cutoff=0.0)]
        raise UnknownCase(
            f"no case of family {kernel.family!r} carries {unknown}, named by {named_by}, for "
            f"kernel {kernel.name!r}; the nearest of its {len(known)} cases: "
            f"{', '.join(dict.fromkeys(near)) or 'none'}"
        )
    return [c for c in cases if c.name in wanted]


def features_of(kernel: Kernel) -> dict[str, str]:
    """case kind -> the capability feature it needs, for the kernel's family."""
    return kernel.family_module().FEATURE_OF if kernel.family else {}


def feature_missing(kernel: Kernel, case) -> str | None:
    """A named skip: the case needs what the kernel's capabilities leave out."""
    return kernel.family_module().missing(kernel, case)


def prepare(kernel: Kernel, case, device: str = DEVICE, option=None) -> Any:
    """The case's inputs; ``option`` (one of the kernel's LaunchOptions, or None) is handed to
    the launcher as ``inputs.option``."""
    prepared = kernel.family_module().prepare(kernel, case, device)
    if option is not None:
        prepared.option = option.value
    return prepared


def options(kernel: Kernel, case) -> tuple:
    """The LaunchOptions each case runs with: (None,) where the kernel declares none."""
    return kernel.launch_options(case) if kernel.launch_options else (None,)


def case_axes(kernel: Kernel, case) -> dict[str, Any]:
    return kernel.family_module().case_axes(case)


def seed(kernel: Kernel, case) -> int:
    return kernel.family_module().seed(case)


def site(kernel: Kernel, case, index, tiles) -> str:
    return kernel.family_module().site(case, index, tiles)


def closed_form_failure(kernel: Kernel, case, prepared, out, ref) -> str | None:
    return kernel.family_module().closed_form_failure(case, prepared, out, ref)


def run(kernel: Kernel, prepared) -> torch.Tensor:
    if kernel.launcher is None:
        raise ValueError(f"{kernel.name} declares no launcher: it has no GPU tiers")
    out = kernel.family_module().launch(kernel, load_module(kernel), prepared)
    if out.is_cuda:
        torch.cuda.synchronize()
    # a copy, whatever the family and the launcher: a launcher that hands back one buffer each
    # time must not make two launches one tensor (the determinism and race checks compare them)
    return out.clone()


def reference(kernel: Kernel, prepared) -> torch.Tensor:
    return kernel.family_module().reference(kernel, prepared)


def baseline(kernel: Kernel, prepared) -> torch.Tensor:
    return kernel.family_module().baseline(kernel, prepared)


def record_dtype(kernel: Kernel, case) -> str:
    """The dtype row of the numerics summary its record joins."""
    return kernel.family_module().record_dtype(kernel, case)


def stray_writes(kernel: Kernel, prepared) -> str | None:
    """What the launch wrote outside its output (a padded buffer's NaN rows), or None."""
    return kernel.family_module().stray_writes(prepared)
