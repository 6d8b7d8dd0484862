"""Not collected by default (no test_ prefix): suite/library/test_watchdog.py runs this module
under xdist to prove that a hung test fails in time, named with its kernel, and the rest of the
run completes: on a GPU with a kernel that never ends, on any machine with a test blocked in C
code."""

import time

import pytest

from tilegate.kernels.problem import AttentionShape

# torch and the kernels (TileLang) are imported inside the GPU tests: the CPU run of this module
# starts three workers (two, and the one that replaces the crashed), and none of them needs them
SHAPE = AttentionShape(8, 8, 64, True, "float16")
HANG_DEADLINE_S = 10  # a healthy call of this size takes milliseconds


def _config():
    from tilegate.kernels.configs import default_config
    from tilegate.platform import local_target

    return default_config(local_target(), 64)


def _qkv():
    import torch

    return [torch.randn(1, 64, 8, 64, device="cuda", dtype=torch.float16) for _ in range(3)]


@pytest.mark.gpu
@pytest.mark.xdist_group("planted-hang")
def test_compile_the_planted_hang():  # first, on the same worker: compiling is not the hang
    from tilegate.gate.planted import PrefillDefect, knobs_for
    from tilegate.kernels.flash_fwd import flash_fwd
    from tilegate.runtime import compiled

    assert compiled(flash_fwd, SHAPE, _config(), knobs=knobs_for(PrefillDefect.HANG)) is not None


@pytest.mark.gpu
@pytest.mark.xdist_group("planted-hang")
@pytest.mark.deadline(HANG_DEADLINE_S)
def test_planted_hang():
    import torch

    from tilegate.gate.planted import PrefillDefect, knobs_for
    from tilegate.runtime import flash_attention

    flash_attention(SHAPE, _config(), *_qkv(), knobs=knobs_for(PrefillDefect.HANG))
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.xdist_group("healthy")
def test_a_healthy_call_after_the_hang():
    import torch

    from tilegate.runtime import flash_attention

    out = flash_attention(SHAPE, _config(), *_qkv())
    assert torch.isfinite(out).all()


@pytest.mark.xdist_group("stuck")
@pytest.mark.deadline(3)
def test_stuck_in_c_code():  # blocked outside Python, as a thread waiting on the device is
    time.sleep(120)


@pytest.mark.xdist_group("after-stuck")
def test_runs_beside_the_stuck_one():
    assert sum(range(10)) == 45
