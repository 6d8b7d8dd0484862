"""Workers spread over a node's GPUs: the mapping, checked without a GPU (torch's view faked)."""

import os

import pytest

from tilegate.testing import gpu_workers


@pytest.fixture
def two_cuda_gpus(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.version, "hip", None)
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        gpu_workers.IDS_ENV,
        gpu_workers.PER_GPU_ENV,
    ):
        monkeypatch.delenv(name, raising=False)


def test_workers_take_the_gpus_in_turn(two_cuda_gpus, monkeypatch):
    assert gpu_workers.controller_setup() == ["0", "1"]
    assert gpu_workers.workers_for(["0", "1"]) == 2 * gpu_workers.DEFAULT_PER_GPU
    pinned = []
    for worker in ("gw0", "gw1", "gw2", "gw3"):
        pinned.append(gpu_workers.pin_worker(worker))
        assert pinned[-1] == os.environ["CUDA_VISIBLE_DEVICES"]
    assert pinned == ["0", "1", "0", "1"]


def test_an_existing_visibility_list_is_respected(two_cuda_gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert gpu_workers.controller_setup() == ["5", "7"]
    assert gpu_workers.pin_worker("gw1") == "7"


def test_workers_per_gpu_is_configurable(two_cuda_gpus, monkeypatch):
    monkeypatch.setenv(gpu_workers.PER_GPU_ENV, "3")
    assert gpu_workers.workers_for(gpu_workers.controller_setup()) == 6


def test_no_gpu_leaves_workers_alone(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(gpu_workers.IDS_ENV, raising=False)
    assert gpu_workers.controller_setup() == []
    assert gpu_workers.workers_for([]) is None
    assert gpu_workers.pin_worker("gw0") is None


@pytest.mark.gpu
def test_a_pinned_worker_sees_one_gpu():
    import torch

    ids = [i for i in os.environ.get(gpu_workers.IDS_ENV, "").split(",") if i]
    if os.environ.get("PYTEST_XDIST_WORKER") and ids:  # under xdist: pinned at the plugin's import
        var = "HIP_VISIBLE_DEVICES" if torch.version.hip else "CUDA_VISIBLE_DEVICES"
        assert os.environ[var] in ids and torch.cuda.device_count() == 1, (os.environ[var], ids)
    else:
        assert torch.cuda.device_count() >= 1
