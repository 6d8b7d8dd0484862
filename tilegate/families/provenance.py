"""Where an adapted kernel's source comes from: an installed package at a version, or a file.

The sha256 of the source joins the lowering cache key, so a changed kernel is rebuilt whatever its
version says. The file hashed is the one this process runs: the module's ``__file__`` once it is
imported, before that the file the import system finds for it. A working copy that shadows the
installed package (the kernel's repository first on sys.path, or an editable install) is what is
hashed, and an edit there relowers without a reinstall. The package's presence and version are
read from its metadata without importing it, so that a missing package or a wrong version is one
line, not an import traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import weakref
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
        """The file this process runs for ``module`` (the kernel's, or one of ``also``): a loaded
        module's ``__file__``; else, for a path kernel, its path; else the file the import system
        finds (importing its parent packages, as an import would). A module the process cannot
        import has no source to key a build on: ModuleNotFoundError, naming it."""
        module = module or self.module
        loaded = getattr(sys.modules.get(module), "__file__", None)
        if loaded:
            return Path(loaded)
        if self.path is not None and module == self.module:
            return Path(self.path)
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # a parent package is missing, or has no __path__
            spec = None
        if spec is None or not spec.origin or not Path(spec.origin).is_file():
            raise ModuleNotFoundError(
                f"{module}: not found by this process's imports ({sys.executable}), so there is "
                "no source to build it from",
                name=module,
            )
        return Path(spec.origin)

    def sha256(self) -> str:
        """Of the kernel's source and of the ``also`` modules', as this process runs them
        (source_file). A loaded module's file must still hold what was imported: an edit since
        would build the old module's code with TileLang parsing the new text, so it is
        SourceChanged, and a new process builds the edit."""
        digests = [self._digest(m) for m in (self.module, *self.also)]
        return (
            digests[0]
            if len(digests) == 1
            else hashlib.sha256("".join(digests).encode()).hexdigest()
        )

    def _digest(self, module: str) -> str:
        path = self.source_file(module)
        now = source_digest(path)
        loaded = sys.modules.get(module)
        if loaded is None:
            return now  # what an import would read
        imported = _IMPORTED.setdefault(loaded, now)  # first seen here: as it is now
        if imported != now:
            raise SourceChanged(
                f"{path} changed after this process imported {module}: its builds would mix the "
                "two versions; run again to build the edit"
            )
        return imported

    def load(self) -> ModuleType:
        """The kernel's module, imported once; the digest of each source it imports (its own,
        ``also``'s) is read just before, so that an edit after the import is seen."""
        before = {
            m: source_digest(self.source_file(m))
            for m in (self.module, *self.also)
            if m not in sys.modules
        }
        try:
            return self._import()
        finally:
            for m, digest in before.items():
                if (loaded := sys.modules.get(m)) is not None:
                    _IMPORTED.setdefault(loaded, digest)

    def _import(self) -> ModuleType:
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


class SourceChanged(RuntimeError):
    """A kernel's source file no longer holds the code this process imported from it."""


# each module imported here -> the sha256 of its source as it was imported
_IMPORTED: weakref.WeakKeyDictionary[ModuleType, str] = weakref.WeakKeyDictionary()


def source_digest(path: Path) -> str:
    """Read at every key (a source of tens of KB, once a build): an edit in a session is seen."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
