"""Kernels as people write them (issue 37, item 4): an autotuned @tilelang.jit factory is lowered
with the adapter's config and no autotune run (tilegate/families/case.py unwrap_factory), under
TileLang 0.1.15 and 0.1.12. On the CPU; the kernel modules in suite/families/usual/, loaded by
path."""

import os
import subprocess
from types import SimpleNamespace

import pytest

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    KernelDeclarationError,
    Problem,
    Provenance,
    params,
)
from tilegate.families.case import KernelBuild, load_module
from tilegate.gate import lowering
from tilegate.gate import tilelang_versions as tv
from tilegate.gate.paths import REPO_ROOT
from tilegate.testing import skips

pytestmark = pytest.mark.compile

USUAL = REPO_ROOT / "suite" / "families" / "usual"
PROBLEM = Problem("d128", dtype="bfloat16", head_dim=128, mask="full", args=(128,))
CAPS = Capabilities(dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=())
ISA = IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0)


def _config(block_m: int, block_n: int) -> Config:
    kwargs = params(block_m=block_m, block_n=block_n, threads=128)
    return Config(f"m{block_m}n{block_n}", kwargs=kwargs, threads=128)


def usual_kernel(
    source: str, *configs: Config, module: str = "", factory: str = "scores", **fields
) -> Kernel:
    """An adapter for a module of suite/families/usual/ (imported as ``module``), its factory
    named as written."""
    module = module or f"tilegate_usual_{source}"
    return Kernel(
        name=f"usual-{source}",
        provenance=Provenance(module, path=str(USUAL / f"{source}.py")),
        factory=factory,
        configs={"gfx942": configs},
        problems=(PROBLEM,),
        capabilities=CAPS,
        isa=ISA,
        lds_estimate=lambda p, c: 0,
        **fields,
    )


def lowered_lds(kernel: Kernel, cfg: Config) -> tuple[int, dict | None]:
    prim, passes = KernelBuild.of(kernel, PROBLEM, cfg, "gfx942").lowering_input()
    return lowering.lower(prim, "gfx942", passes)[1], passes


def test_an_autotuned_jit_factory_lowers_with_the_adapter_config_untuned(monkeypatch):
    # Symptom: calling it ran the autotuner: "No registered target detector found an available
    # target". Fix: the gate calls the function under both decorators with the adapter's config.
    from tilelang.autotuner.tuner import AutoTuneImpl, AutoTuner

    def no_tuning(*args, **kwargs):
        raise AssertionError("the autotuner ran")

    monkeypatch.setattr(AutoTuner, "run", no_tuning)
    monkeypatch.setattr(AutoTuneImpl, "__call__", no_tuning)
    m64n64, m128n64 = _config(64, 64), _config(128, 64)
    kernel = usual_kernel("autotuned", m64n64, m128n64)
    # the Q and K tiles, bf16: (block_m + block_n) x 128 x 2 B
    assert lowered_lds(kernel, m64n64) == (32768, {"tl.disable_warp_specialized": True})
    assert lowered_lds(kernel, m128n64)[0] == 49152


# the child runs this module's helpers in the other venv
LOWER_UNDER_012 = """
from suite.families.test_usual import _config, lowered_lds, usual_kernel
import tilelang
from tilelang.autotuner.tuner import AutoTuner
AutoTuner.run = None  # calling it would fail
cfg = _config(128, 64)
print(tilelang.__version__, *lowered_lds(usual_kernel("autotuned", cfg), cfg))
"""


@pytest.mark.nested  # a run in TileLang 0.1.12's venv, as the compat tier's
@pytest.mark.slow
def test_an_autotuned_jit_factory_lowers_untuned_under_tilelang_0_1_12():
    if reason := tv.missing_reason("0.1.12"):
        skips.missing(reason)
    done = subprocess.run(
        [str(tv.venv_python("0.1.12")), "-c", LOWER_UNDER_012],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    want = "0.1.12 49152 {'tl.disable_warp_specialized': True}"
    assert done.stdout.splitlines()[-1] == want, done.stdout


GPU_MODULE = USUAL / "gpu_at_import.py"
M64 = Config("m64", kwargs=params(block_m=64, threads=128), threads=128)
MI300X = {
    "torch.cuda.is_available": True,
    "torch.cuda.get_device_name": "AMD Instinct MI300X",
    "torch.cuda.get_device_properties": SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-"),
}


def test_a_module_that_asks_for_the_gpu_at_import_lowers_with_at_import_answers():
    # Symptom: it needed a wrapper module: sys.exit() without a GPU, and target globals apply only
    # after the import. Fix: Kernel.at_import answers its questions during the import.
    import torch

    kernel = usual_kernel(
        "gpu_at_import", M64, module="tilegate_usual_gpu_answered", at_import=MI300X
    )
    # the module picked gfx942's key block (64): (64 + 64) x 128 x 2 B of LDS
    assert lowered_lds(kernel, M64) == (32768, None)
    module = load_module(kernel)
    assert (module.DEVICE, module.ARCH) == ("AMD Instinct MI300X", "gfx942")
    assert not torch.cuda.is_available(), "the answers outlived the import"


COPY, T128 = "staged_copy", Config("t128", kwargs=params(threads=128), threads=128)


def test_a_factory_that_asks_for_the_gpu_while_it_traces_lowers_with_the_same_answers():
    # Symptom: at_import answered the import only; a factory reading the device in its body raised
    # on a CPU. Fix: the answers stand while the factory traces each build too, and only then.
    import torch

    answers = {"torch.cuda.get_device_properties": MI300X["torch.cuda.get_device_properties"]}
    kernel = usual_kernel(
        "gpu_at_trace", T128, module="tilegate_usual_trace", factory=COPY, at_import=answers
    )
    torchs_own = torch.cuda.get_device_properties
    # the factory picked gfx942's row block (64) while it traced: 64 x 128 x 2 B of LDS
    assert lowered_lds(kernel, T128) == (16384, None)
    # the answer did not outlive the trace: torch's own function is back
    assert torch.cuda.get_device_properties is torchs_own
    unanswered = usual_kernel(
        "gpu_at_trace", T128, module="tilegate_usual_trace_unanswered", factory=COPY
    )
    with pytest.raises(KernelDeclarationError, match=r"staged_copy\(\*\(128,\), \*\*\{'threads'"):
        lowered_lds(unanswered, T128)


def test_a_module_that_still_exits_at_import_is_one_error_naming_the_line():
    kernel = usual_kernel("gpu_at_import", M64, module="tilegate_usual_gpu_unanswered")
    for _ in range(2):  # a second load is refused the same way, not handed a half-run module
        with pytest.raises(KernelDeclarationError) as info:
            load_module(kernel)
        assert (
            f"usual-gpu_at_import: importing its kernel module tilegate_usual_gpu_unanswered "
            f"({GPU_MODULE}) raised SystemExit: gpu_at_import: no GPU, nothing to run on (raised "
            f"at {GPU_MODULE}:11); the adapter at {kernel.declared_at} names it: make it import "
            "here (what it needs installed, or at_import for what it asks the GPU at import)"
        ) in str(info.value)
    misspelled = {**MI300X, "torch.cuda.get_device_nam": "AMD Instinct MI300X"}
    kernel = usual_kernel(
        "gpu_at_import", M64, module="tilegate_usual_gpu_typo", at_import=misspelled
    )
    with pytest.raises(
        KernelDeclarationError,
        match="at_import names 'torch.cuda.get_device_nam', which is not there",
    ):
        load_module(kernel)
