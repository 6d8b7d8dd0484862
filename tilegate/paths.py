"""Where the gate's checkout-relative files live (caches, venvs, golden snapshots, artifacts).

These paths are only meaningful when tilegate runs from a checkout (an editable install or
``PYTHONPATH``), as the suite and its harnesses do; the serving layer never uses them.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
