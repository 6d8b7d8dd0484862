"""The paged family's exercise adapter (suite/paged_self: the gate's own paged extend and split
decode, declared as foreign kernels) on the CPU: every build lowers for gfx942 and sm90 with the
config the launch path picks there, the planted build is another program, and the foreign tiers
pass its gfx942 builds (compile, ISA) and skip its GPU cases naming the GPU. Its numerics, and the
planted prefix bug failing them, are the GPU run's (docs/foreign-kernels.md, "A paged adapter")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tilegate.artifacts.records import FAILED, PASSED, SKIPPED, read_junit
from tilegate.foreign.case import ForeignCase
from tilegate.gate.paths import REPO_ROOT
from tilegate.kernels.configs import DECODE_TABLES, EXTEND_TABLES, TARGETS, default_config

NO_GPU = "no GPU: this check runs kernels or compiles for the local GPU"

pytestmark = [
    pytest.mark.nested,  # 14 lowerings and a pytest run of the foreign tiers: a minute cold
    pytest.mark.xdist_group("paged-self-adapter"),
]


@pytest.fixture(scope="module")
def adapter():
    import paged_self.adapter  # suite/ is on pytest's pythonpath

    return paged_self.adapter


def test_every_build_lowers_for_gfx942_and_sm90_with_the_launch_paths_config(adapter, builder):
    sources = {}
    for kernel in [*adapter.KERNELS, adapter.PREFIX_OFF_BY_ONE]:
        tables = EXTEND_TABLES if kernel.factory == "paged_extend" else DECODE_TABLES
        for target in ("gfx942", "sm90"):
            builds = kernel.builds(target)
            assert builds, f"{kernel.name}: no {target} build"
            for problem, cfg in builds:
                tile = dict(cfg.kwargs)["cfg"]
                # what tilegate.serving.paged launches on that target when given no config
                assert tile == default_config(target, problem.head_dim, tables), kernel.name
                lowered = builder.lowered(ForeignCase.of(kernel, problem, cfg, target))
                assert 0 < lowered.lds_bytes <= TARGETS[target].lds_bytes_per_workgroup
                sources[kernel.name, problem.name, target] = lowered.source
    for target in ("gfx942", "sm90"):
        healthy = sources["paged-self-extend-fp16", "d128-fp16", target]
        assert sources["paged-self-prefix-off-by-one", "d128-fp16", target] != healthy


def test_the_foreign_tiers_pass_its_gfx942_builds_and_wait_for_a_gpu(request, tmp_path):
    junit = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"),
            "suite/foreign/test_foreign_kernels.py",
            f"--junitxml={junit}",
            f"--tilegate-cache={request.config.getoption('--tilegate-cache')}",
            "--tilegate-kernels=paged_self.adapter",
            "--tilegate-kernels=paged_self.adapter:PREFIX_OFF_BY_ONE",
            "-k",
            "paged-self and (compile or isa or ctx129_8192_57-new64_129_1)",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, log
    outcomes = read_junit(junit)
    by_kind = {
        kind: {o.test.rsplit("::", 1)[-1]: o.reason for o in outcomes if o.kind == kind}
        for kind in (PASSED, SKIPPED, FAILED)
    }
    for tier in ("compile", "isa"):
        for build in (
            "extend-fp16-d128-fp16-m128n32w4",
            "extend-fp16-d64-fp16-m128n32w4",
            "extend-bf16-d128-bf16-m128n32w4",
            "decode-fp16-d128-fp16-n16w1s32",
            "decode-fp16-d64-fp16-n16w1s32",
            "decode-bf16-d128-bf16-n16w1s32",
            "prefix-off-by-one-d128-fp16-m128n32w4",
        ):
            assert f"test_foreign_{tier}[paged-self-{build}]" in by_kind[PASSED], log
    planted = (
        "test_foreign_numerics[paged-self-prefix-off-by-one-"
        "causal-gqa32x8-d128-fp16-ctx129_8192_57-new64_129_1-random]"
    )
    assert by_kind[SKIPPED].get(planted) == NO_GPU, log
    assert not by_kind[FAILED], log
