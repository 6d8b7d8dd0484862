"""The real container runtime the boundary tests run the MI300X job's container script under
(suite/library/test_runner_boundary.py): a docker daemon, and a small Debian image standing in
for the pinned ROCm one (scripts/test-container-image.sh; scripts/install-container-runtime.sh
sets both up)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT

TEST_IMAGE = "tilegate-test-image:1"


def wheels_folder() -> Path:
    """scripts/mi300x-wheels.txt's wheels, downloaded by hash (the job's wheels step, made on the
    host)."""
    return REPO_ROOT / ".cache" / "mi300x-wheels"


@functools.cache
def missing_reason() -> str | None:
    """Why no container can run here, in one line; None when one can."""
    if shutil.which("docker") is None:
        return (
            "no docker CLI: scripts/install-container-runtime.sh installs docker.io and starts "
            "its daemon"
        )
    try:
        info = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", TEST_IMAGE],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "the docker daemon did not answer in 30 s"
    if info.returncode != 0:
        why = info.stderr.strip().splitlines()[-1] if info.stderr.strip() else "no answer"
        return (
            f"no {TEST_IMAGE} from a running docker daemon ({why}): run "
            "scripts/install-container-runtime.sh"
        )
    if not any(wheels_folder().glob("*.whl")):
        return (
            f"no wheels of scripts/mi300x-wheels.txt in {wheels_folder()}: run "
            "scripts/install-container-runtime.sh"
        )
    return None
