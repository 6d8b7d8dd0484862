"""The dense worked example (suite/dense_kernel: a TileLang flash-attention forward, its launcher
and adapter, a ``tilegate.kernels`` entry point) gated by plain ``pytest`` in a fresh venv, as its
author would: provenance, capabilities, gfx942 compile and ISA pass, and the GPU tiers skip naming
the GPU. The planted tail-mask variant builds as well: its bug is in the numbers, which only a GPU
run sees (suite/families/test_dense_catches_planted.py). Every build also lowers for sm90, the
H200's target, with the tile sizes the example's own launcher uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_package import install_in_fresh_venv, plain_pytest

from tilegate.artifacts.records import FAILED, PASSED, SKIPPED
from tilegate.families.case import KernelBuild
from tilegate.gate.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "suite" / "dense_kernel"
NO_GPU = "no GPU: this check runs kernels or compiles for the local GPU"

pytestmark = [
    pytest.mark.nested,  # a fresh venv and wheel builds: minutes of CPU
    pytest.mark.xdist_group("dense-example-package"),  # one worker: the module's venv is built once
]


@pytest.fixture(scope="module")
def kernel_repo(tmp_path_factory) -> tuple[Path, Path]:
    """(python of a fresh venv with the gate and the package installed, a copy of its folder)."""
    return install_in_fresh_venv(PACKAGE, tmp_path_factory.mktemp("dense-repo"))


def _by_kind(outcomes, kind) -> dict[str, str]:
    return {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == kind}


def test_plain_pytest_gates_the_dense_example(kernel_repo, tmp_path):
    python, repo = kernel_repo
    code, outcomes, log = plain_pytest(python, repo, tmp_path)
    assert code == 0, log
    passed = _by_kind(outcomes, PASSED)
    for test in (
        "test_kernel_provenance[dense-example-fp16]",
        "test_kernel_capabilities[dense-example-bf16-mask-full]",
        *(
            f"test_kernel_{tier}[dense-example-{build}-m128n32t256]"
            for tier in ("compile", "isa")
            for build in ("fp16-d128-fp16-causal", "fp16-d64-fp16-full", "bf16-d128-bf16-full")
        ),
    ):
        assert test in passed, f"{test} did not pass:\n{log}"
    skipped = _by_kind(outcomes, SKIPPED)
    numerics = "test_kernel_numerics[dense-example-fp16-full-gqa32x8-d128-fp16-s3782-random]"
    assert skipped.get(numerics) == NO_GPU, log
    assert not _by_kind(outcomes, FAILED), log


def test_the_planted_tail_mask_variant_builds_and_waits_for_a_gpu(kernel_repo, tmp_path):
    python, repo = kernel_repo
    code, outcomes, log = plain_pytest(
        python,
        repo,
        tmp_path,
        "--tilegate-kernels=dense_example.adapter:TAIL_MASK_BUG",
        "-k",
        "tail-mask-bug and (compile or s3782)",
    )
    assert code == 0, log
    assert "test_kernel_compile[dense-example-tail-mask-bug-d128-fp16-full-m128n32t256]" in (
        _by_kind(outcomes, PASSED)
    ), log
    skipped = _by_kind(outcomes, SKIPPED)
    planted = (
        "test_kernel_numerics[dense-example-tail-mask-bug-full-gqa32x8-d128-fp16-s3782-random]"
    )
    assert skipped.get(planted) == NO_GPU, log


@pytest.fixture(scope="module")
def adapter():
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(PACKAGE))
        import dense_example.adapter
        import dense_example.ops

        yield dense_example.adapter, dense_example.ops


def test_every_build_lowers_for_sm90_with_the_launchers_tiles(adapter, builder):
    module, ops = adapter
    sources = {}
    for kernel in [*module.KERNELS, module.TAIL_MASK_BUG]:
        for target, configs in kernel.configs.items():
            tiles = {k: v for k, v in configs[0].kwargs if k != "mask_tail"}
            assert tiles == ops.CONFIGS[target], f"{kernel.name}: the launcher builds other tiles"
        for problem, cfg in kernel.builds("sm90"):
            lowered = builder.lowered(KernelBuild.of(kernel, problem, cfg, "sm90"))
            assert "__global__" in lowered.source and 0 < lowered.lds_bytes <= 227 * 1024
            sources[kernel.name, problem.name] = lowered.source
    # the planted build against the healthy kernel's build of the same problem: only mask_tail
    # differs between them, so a mask_tail that changed nothing would show here
    twin = module.kernel(
        "dense-example-fp16-full", "float16", (module.problem("float16", 128, "full"),), (128,)
    )
    ((problem, cfg),) = twin.builds("sm90")
    healthy = builder.lowered(KernelBuild.of(twin, problem, cfg, "sm90")).source
    assert sources["dense-example-tail-mask-bug", "d128-fp16-full"] != healthy
