"""Sanitizer tier (opt-in: -m sanitize): every kernel under compute-sanitizer, and proof that the
tools would see the faults they are here for.

Each run is a subprocess (tilegate/harness/sanitize/child.py) with PyTorch's caching allocator off,
so each tensor is its own allocation and a read past its end is out of bounds.

initcheck: on Hopper the kernels' output tiles leave shared memory through TMA bulk tensor stores
(``tl::tma_store``), which initcheck does not track: the first reader of the output is then
flagged for every element. ``test_initcheck_does_not_see_tma_stores`` proves it (same kernel,
TMA stores vs plain stores; and a sentinel-filled output overwritten in full). initcheck therefore
runs over builds with TMA lowering off: every kernel's own reads, and torch's reads of what the
kernels wrote, are judged; the loads are built as in production.
"""

import pytest
import torch

from tilegate.artifacts.writer import SANITIZE_DIR
from tilegate.gate.registry import PHASES
from tilegate.harness.sanitize import child as sanitize_child
from tilegate.harness.sanitize.driver import TOOLS, run_asan, run_sanitized

pytestmark = pytest.mark.deadline(1800)  # a sanitized run is 10-100x slower than a plain one


def _child_args(tool: str, phase: str, head_dim: int) -> list[str]:
    args = [phase, "--head-dim", str(head_dim)]
    extra = {"initcheck": ["--plain-stores"], "racecheck": ["--lean-grid"]}
    return args + extra.get(tool, [])


@pytest.mark.cuda
@pytest.mark.gpu
# two halves: racecheck over prefill takes minutes
@pytest.mark.parametrize("head_dim", sanitize_child.HEAD_DIMS)
@pytest.mark.parametrize("phase", PHASES)
# racecheck is the slowest tool: marked slow, its runs start first
# (tilegate/testing/pytest_plugin.py)
@pytest.mark.parametrize(
    "tool", [pytest.param(t, marks=pytest.mark.slow) if t == "racecheck" else t for t in TOOLS]
)
def test_kernels_are_clean(tool, phase, head_dim, artifacts_dir):
    result = run_sanitized(
        tool,
        _child_args(tool, phase, head_dim),
        artifacts_dir / SANITIZE_DIR / f"{tool}-{phase}-d{head_dim}.log",
    )
    assert result.completed, (
        f"the {phase} workload did not finish under {tool} (exit {result.returncode}): {result.log}"
    )
    assert (result.errors, result.warnings) == (0, 0), (
        f"{tool} found {result.errors} errors, {result.warnings} warnings in {phase} "
        f"({result.log}):\n{result.excerpt()}"
    )


@pytest.mark.cuda
@pytest.mark.gpu
def test_planted_race_is_reported(artifacts_dir):
    result = run_sanitized(
        "racecheck",
        ["prefill", "--defect", "race", "--one"],
        artifacts_dir / SANITIZE_DIR / "racecheck-planted-race.log",
    )
    assert result.errors + result.warnings > 0, f"racecheck missed the planted race: {result.log}"


@pytest.mark.cuda
@pytest.mark.gpu
def test_planted_read_past_seq_k_is_reported(artifacts_dir):
    # every prefill shape on one config: the single --one launch (causal, seq 129) was not flagged
    # on the H200, the sweep was (the read lands past the tensor only in some shapes). The config
    # with the fewest threads: the defect's element-wise K loads run in TileLang's producer
    # warpgroup, which sm90's 384-thread m192n128w12 leaves 80 registers (ptxas refuses the build)
    result = run_sanitized(
        "memcheck",
        ["prefill", "--defect", "read_past_seq_k", "--fewest-threads"],
        artifacts_dir / SANITIZE_DIR / "memcheck-planted-read.log",
    )
    assert result.errors > 0, f"memcheck missed the planted read past seq_k: {result.log}"
    assert "Invalid __global__ read" in result.log.read_text(errors="replace"), result.excerpt()


@pytest.mark.cuda
@pytest.mark.gpu
def test_initcheck_does_not_see_tma_stores(artifacts_dir):
    """The finding, settled: the same launch and read-back is clean with plain stores and flagged
    with TMA stores, although the TMA build writes every output element (sentinel test below)."""
    tma = run_sanitized(
        "initcheck", ["prefill", "--one"], artifacts_dir / SANITIZE_DIR / "initcheck-tma.log"
    )
    plain = run_sanitized(
        "initcheck",
        ["prefill", "--one", "--plain-stores"],
        artifacts_dir / SANITIZE_DIR / "initcheck-plain.log",
    )
    assert tma.completed and plain.completed
    assert plain.errors == 0, plain.excerpt()
    assert tma.errors > 0, (
        "initcheck now sees TMA stores: run initcheck on production builds instead"
    )
    assert "Uninitialized __global__ memory read" in tma.log.read_text(errors="replace")
    # flagged: the torch read of the output after the launch (1 x 129 x 8 x 128 elements); the
    # kernel's own reads are not (a run without the read-back reported 0 in the probe)


@pytest.mark.cuda
@pytest.mark.gpu
def test_tma_store_writes_every_output_element():
    from tilegate import runtime
    from tilegate.kernels.configs import default_config
    from tilegate.kernels.problem import AttentionShape
    from tilegate.platform import local_target

    shape = AttentionShape(4, 2, 128, True, "float16")
    cfg = default_config(local_target(), 128)
    source = runtime.compiled(runtime.flash_fwd, shape, cfg).get_kernel_source()
    assert "tma_store" in source, (
        "this build has no TMA store: the initcheck finding needs re-checking"
    )
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 129, h, 128, generator=g).half().cuda() for h in (4, 2, 2))
    out = runtime.flash_attention(shape, cfg, q, k, v, out=torch.full_like(q, float("nan")))
    assert int(out.isnan().sum()) == 0, "sentinel left in the output: the kernel skipped elements"


@pytest.mark.rocm
@pytest.mark.gpu
@pytest.mark.parametrize("phase", PHASES)
def test_kernels_are_clean_under_rocm_asan(phase, artifacts_dir):
    result = run_asan([phase], artifacts_dir / SANITIZE_DIR / f"asan-{phase}.log")
    assert result.completed and result.errors == 0, (
        f"AddressSanitizer ({result.log}):\n{result.excerpt()}"
    )


@pytest.mark.rocm
@pytest.mark.gpu
def test_rocm_asan_reports_the_planted_read(artifacts_dir):
    result = run_asan(
        ["prefill", "--defect", "read_past_seq_k", "--one"],
        artifacts_dir / SANITIZE_DIR / "asan-planted-read.log",
    )
    assert result.errors > 0, f"AddressSanitizer missed the planted read past seq_k: {result.log}"


# The parsers, on the CPU: a wrong parse would turn every sanitizer verdict into a pass.
