"""The kernel tiers (tilegate.testing.kernel_tiers) in a run: the options that name
kernels, and, in a project other than the gate's checkout, the tiers' module added to what pytest
collected.

The gate's own suite collects that module through suite/families/test_kernels.py. A kernel
repository has no such file: when its run names adapted kernels (entry points of the
``tilegate.kernels`` group, ``--tilegate-kernels`` or the ``tilegate_kernels`` ini list), the plugin
collects the installed module itself, before ``-m`` and ``-k`` select, so plain ``pytest`` runs
the tiers on its kernels and a run that names none collects nothing more.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegate.gate.paths import REPO_ROOT


def add_options(parser: pytest.Parser) -> None:
    parser.getgroup("tilegate").addoption(
        "--tilegate-kernels",
        action="append",
        metavar="MODULE[:ATTR]",
        help="an adapter module whose KERNELS (or ATTR) the kernel tiers gate; repeatable "
        "(also: the tilegate.kernels entry point group, the tilegate_kernels ini list)",
    )
    parser.addini(
        "tilegate_kernels",
        type="linelist",
        default=[],
        help="adapter modules (MODULE[:ATTR]) whose kernels the kernel tiers gate",
    )


def add_tiers(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Collect tilegate.testing.kernel_tiers into a kernel repository's run that names adapted
    kernels."""
    config = session.config
    if (
        config.rootpath == REPO_ROOT
        or any(_from_tiers(item) for item in items)
        or not _names_any(config)
    ):
        return
    from tilegate.testing import (
        kernel_tiers as tiers,
    )  # imports torch: only a run that names kernels pays for it

    if not tiers.selected(config):
        return
    module = pytest.Module.from_parent(session, path=Path(tiers.__file__))
    items.extend(session.genitems(module))


def _names_any(config: pytest.Config) -> bool:
    from importlib.metadata import entry_points

    from tilegate.families.discover import ENTRY_POINT_GROUP

    return bool(
        config.getini("tilegate_kernels")
        or config.getoption("tilegate_kernels")
        or entry_points(group=ENTRY_POINT_GROUP)
    )


def _from_tiers(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    return getattr(function, "__module__", None) == "tilegate.testing.kernel_tiers"
