"""Kernels as people write them (issue 37, item 4): an autotuned @tilelang.jit factory is lowered
with the adapter's config and no autotune run (tilegate/foreign/case.py unwrap_factory), under
TileLang 0.1.15 and 0.1.12. On the CPU; the kernel modules in suite/foreign/usual/, loaded by
path."""

import os
import subprocess

import pytest

from tilegate import lowering
from tilegate import tilelang_versions as tv
from tilegate.foreign import (
    Capabilities,
    Config,
    ForeignKernel,
    IsaExpectations,
    Problem,
    Provenance,
    params,
)
from tilegate.foreign.case import ForeignCase
from tilegate.paths import REPO_ROOT
from tilegate.testing import skips

pytestmark = pytest.mark.compile

USUAL = REPO_ROOT / "suite" / "foreign" / "usual"
PROBLEM = Problem("d128", dtype="bfloat16", head_dim=128, mask="full", args=(128,))
CAPS = Capabilities(dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=())
ISA = IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0)


def _config(block_m: int, block_n: int) -> Config:
    kwargs = params(block_m=block_m, block_n=block_n, threads=128)
    return Config(f"m{block_m}n{block_n}", kwargs=kwargs, threads=128)


def usual_kernel(source: str, *configs: Config, **fields) -> ForeignKernel:
    """An adapter for a module of suite/foreign/usual/, its ``factory`` named as written."""
    return ForeignKernel(
        name=f"usual-{source}",
        provenance=Provenance(f"tilegate_usual_{source}", path=str(USUAL / f"{source}.py")),
        factory=fields.pop("factory", "scores"),
        configs={"gfx942": configs},
        problems=(PROBLEM,),
        capabilities=CAPS,
        isa=ISA,
        lds_estimate=lambda p, c: 0,
        **fields,
    )


def lowered_lds(kernel: ForeignKernel, cfg: Config) -> tuple[int, dict | None]:
    prim, passes = ForeignCase.of(kernel, PROBLEM, cfg, "gfx942").lowering_input()
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
from suite.foreign.test_foreign_usual import _config, lowered_lds, usual_kernel
import tilelang
from tilelang.autotuner.tuner import AutoTuner
AutoTuner.run = None  # calling it would fail
cfg = _config(128, 64)
print(tilelang.__version__, *lowered_lds(usual_kernel("autotuned", cfg), cfg))
"""


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
