"""Finding the adapted kernels a run gates: the ``tilegate.kernels`` entry point group, and the
modules named by ``--tilegate-kernels`` or the ``tilegate_kernels`` ini option.

An entry point or a name is ``module`` (its ``KERNELS``) or ``module:attribute``; either holds one
Kernel or a sequence of them. Loading an adapter imports the adapter only, not the kernel's
package: a kernel whose package is missing is still listed, and its tests skip naming the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import entry_points

from tilegate.families.spec import Kernel, KernelDeclarationError, raised_at

ENTRY_POINT_GROUP = "tilegate.kernels"
# kernel name -> the MODULE[:ATTR] that declared it (a child process loads it again)
_ORIGINS: dict[str, str] = {}


def load(name: str, origin: str) -> list[Kernel]:
    """The kernels ``name`` (``module`` or ``module:attribute``) declares; ``origin`` says where
    it was named."""
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except KernelDeclarationError as exc:  # a declaration it holds is refused: the message names it
        raise KernelDeclarationError(f"{origin} {name!r}: {exc}") from exc
    except Exception as exc:
        raise KernelDeclarationError(
            f"{origin} {name!r}: {type(exc).__name__}: {exc}{raised_at(exc)}; the adapter "
            "does not import: fix it there, or stop naming it"
        ) from exc
    try:
        found = getattr(module, attribute or "KERNELS")
    except AttributeError as exc:
        raise KernelDeclarationError(
            f"{origin} {name!r}: {type(exc).__name__}: {exc}; name the attribute that holds its "
            "Kernels (MODULE:ATTR, KERNELS by default)"
        ) from exc
    kernels = (
        [found]
        if isinstance(found, Kernel)
        else list(found)
        if isinstance(found, Iterable)
        else [found]
    )
    wrong = [k for k in kernels if not isinstance(k, Kernel)]
    if wrong:
        raise KernelDeclarationError(
            f"{origin} {name!r} holds {type(wrong[0]).__name__}, not tilegate.families.Kernel"
        )
    return kernels


def discover(names: Iterable[str] = ()) -> list[Kernel]:
    """Every kernel of the entry point group, then of ``names``; a kernel name may appear once."""
    kernels: dict[str, tuple[Kernel, str]] = {}
    sources = [
        (ep.value, f"entry point {ENTRY_POINT_GROUP}:{ep.name}")
        for ep in entry_points(group=ENTRY_POINT_GROUP)
    ]
    for name, origin in [*sources, *((n, "--tilegate-kernels") for n in names)]:
        for kernel in load(name, origin):
            if kernel.name in kernels and kernels[kernel.name][0] is not kernel:
                raise KernelDeclarationError(
                    f"kernel {kernel.name!r} is declared twice: by {kernels[kernel.name][1]} "
                    f"and by {origin} {name!r}"
                )
            kernels[kernel.name] = (kernel, f"{origin} {name!r}")
            _ORIGINS[kernel.name] = name
    return [k for k, _ in kernels.values()]


def origin_of(kernel: Kernel) -> str:
    """The MODULE[:ATTR] discovery loaded ``kernel`` from."""
    if kernel.name not in _ORIGINS:
        raise KernelDeclarationError(
            f"{kernel.name} was not found by discover(): no module to load it again from"
        )
    return _ORIGINS[kernel.name]
