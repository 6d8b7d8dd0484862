"""Where a foreign kernel's source comes from: an installed package at a version, or a file.

The source's sha256 joins the lowering cache key, so a changed kernel is rebuilt whatever its
version says. The source is found without importing it (an installed package's RECORD, or the
path), so that a missing package or a wrong version is one line, not an import traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True)
class Provenance:
    module: str  # the import name of the module that defines the factory
    package: str | None = None  # the distribution that must provide it
    version: str | None = None  # its exact version; None takes any
    path: str | None = None  # instead of a package: the kernel's file
    # modules of the same package the kernel's source takes code or constants from
    also: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.package is None) == (self.path is None):
            raise ValueError(
                f"provenance of {self.module}: name a package or a path, not both or neither"
            )

    @property
    def label(self) -> str:
        if self.path is not None:
            return f"{self.path}"
        return f"{self.package} {self.version or '(any version)'}: {self.module}"

    def missing_reason(self) -> str | None:
        """One line naming what is not installed here, or None."""
        if self.package is None:
            return (
                None if Path(str(self.path)).is_file() else f"kernel source {self.path} not found"
            )
        try:
            found = metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return f"{self.package} is not installed in this environment ({sys.executable})"
        if self.version is not None and found != self.version:
            return f"{self.package} {found} is installed, the adapter is for {self.version}"
        return None

    def source_file(self, module: str | None = None) -> Path:
        if self.package is None:
            return Path(str(self.path))
        module = module or self.module
        relative = Path(*module.split(".")).with_suffix(".py")
        located = Path(str(metadata.distribution(self.package).locate_file(relative)))
        # an editable install: ask the import system, which imports the parents
        if not located.is_file():
            spec = importlib.util.find_spec(module)
            located = Path(spec.origin) if spec and spec.origin else located
        return located

    def sha256(self) -> str:
        """Of the kernel's source and of the ``also`` modules'. The file is the one the package
        installed, where its metadata says; one shadowing it on sys.path would not be what is
        hashed."""
        digests = [source_digest(self.source_file(m)) for m in (self.module, *self.also)]
        return (
            digests[0]
            if len(digests) == 1
            else hashlib.sha256("".join(digests).encode()).hexdigest()
        )

    def load(self) -> ModuleType:
        if self.path is None:
            return importlib.import_module(self.module)
        if self.module in sys.modules:
            return sys.modules[self.module]
        spec = importlib.util.spec_from_file_location(self.module, str(self.path))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {self.module} from {self.path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module] = module
        spec.loader.exec_module(module)
        return module


def source_digest(path: Path) -> str:
    """Read every time (a source of tens of KB, once a build): an edit in a session is seen."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
