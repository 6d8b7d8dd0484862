"""Spreading xdist workers over every GPU of a node: worker i runs on GPU i mod N.

The controller counts the GPUs (before any worker starts) and passes their ids on in
``TILEGATE_GPU_IDS``; each worker then narrows ``CUDA_VISIBLE_DEVICES`` (CUDA) or
``HIP_VISIBLE_DEVICES`` (ROCm) to its own GPU before anything in it initialises the device, so
that every test sees one device, ``cuda:0``. ``-n auto`` asks for ``TILEGATE_WORKERS_PER_GPU``
(default 8) workers per GPU.
"""

from __future__ import annotations

import os

IDS_ENV = "TILEGATE_GPU_IDS"
PER_GPU_ENV = "TILEGATE_WORKERS_PER_GPU"
DEFAULT_PER_GPU = 8


def _visibility_env(hip: bool) -> str:
    return "HIP_VISIBLE_DEVICES" if hip else "CUDA_VISIBLE_DEVICES"


def gpu_ids() -> list[str]:
    """The ids this process may use, as the visibility variable names them (or 0..N-1)."""
    import torch

    if not torch.cuda.is_available():
        return []
    hip = bool(torch.version.hip)
    listed = os.environ.get(_visibility_env(hip), "")
    ids = [i.strip() for i in listed.split(",") if i.strip()] if listed else []
    return ids or [str(i) for i in range(torch.cuda.device_count())]


def controller_setup() -> list[str]:
    """Count the GPUs once, in the controller, and hand the ids to the workers it will start."""
    ids = gpu_ids()
    os.environ[IDS_ENV] = ",".join(ids)
    return ids


def workers_for(ids: list[str]) -> int | None:
    """``-n auto`` on a GPU machine: workers per GPU times GPUs (None: xdist's own default)."""
    return len(ids) * int(os.environ.get(PER_GPU_ENV, DEFAULT_PER_GPU)) if ids else None


def pin_worker(worker_id: str) -> str | None:
    """Narrow this worker (``gw3``) to its GPU; returns the id, or None where there is none."""
    ids = [i for i in os.environ.get(IDS_ENV, "").split(",") if i]
    if not ids:
        return None
    mine = ids[int(worker_id.removeprefix("gw")) % len(ids)]
    import torch

    os.environ[_visibility_env(bool(torch.version.hip))] = mine
    return mine
