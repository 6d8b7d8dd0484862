"""Where the gate's checkout-relative files live (caches, venvs, golden snapshots, artifacts).

These paths are only meaningful when tilegate runs from a checkout (an editable install or
``PYTHONPATH``), as the suite and its harnesses do; the serving layer never uses them.
"""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """The disk cache of lowered kernels and code objects: $TILEGATE_CACHE, else .cache/tilegate
    (pytest's --tilegate-cache defaults to it)."""
    return Path(os.environ.get("TILEGATE_CACHE", REPO_ROOT / ".cache" / "tilegate"))
