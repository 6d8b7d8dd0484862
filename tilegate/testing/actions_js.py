"""The pinned GitHub actions' own JavaScript libraries the artifact tests run under node
(suite/library/test_artifact_unpacking.py): each folder of scripts/artifact-unpack/ holds one
action release's lock, installed by scripts/install-artifact-unpack.sh (run by scripts/setup.sh)."""

from __future__ import annotations

import shutil

from tilegate.gate.paths import REPO_ROOT

PINNED = REPO_ROOT / "scripts" / "artifact-unpack"
FOLDERS = (PINNED, PINNED / "v4.3.0", PINNED / "upload-v4.6.2")
INSTALL = "bash scripts/install-artifact-unpack.sh"


def missing_reason() -> str | None:
    """Why the actions' libraries cannot run here, in one line; None when they can."""
    if shutil.which("node") is None:
        return f"no node: the actions' libraries run under node ({INSTALL} needs node and npm)"
    absent = [f.relative_to(REPO_ROOT) for f in FOLDERS if not (f / "node_modules").is_dir()]
    if absent:
        return f"{', '.join(map(str, absent))} not installed: run {INSTALL}"
    return None
