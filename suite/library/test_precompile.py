"""Compiling a GPU run's kernels ahead of its tests (tilegate/testing/precompile.py), checked on
the CPU: what a test declares, how a declaration resolves against a target's table, and the process
pool itself (a build that fails there is counted, not raised)."""

import pytest
from suite_helpers import with_configs

from tilegate.fixtures.paged_cases import DECODE_CASES, EXTEND_CASES
from tilegate.fixtures.shapes import numerics_cases
from tilegate.gate.builds import DEFAULT, EVERY, Build, phase_builds
from tilegate.gate.planted import CombineDefect, PrefillDefect, knobs_for
from tilegate.kernels.configs import (
    CONFIG_TABLES,
    DECODE_TABLES,
    EXTEND_TABLES,
    TileConfig,
    default_config,
)
from tilegate.kernels.problem import AttentionShape
from tilegate.testing.precompile import PrecompileResult, precompile

SHAPE = AttentionShape(32, 8, 128, True, "float16")


def test_a_decode_call_launches_the_split_and_the_combine_step():
    names = [b.kernel for b in phase_builds("decode", SHAPE)]
    assert names == ["paged_decode_split", "paged_decode_combine"]


def test_a_defect_is_its_knobs_and_no_defect_is_the_plain_build():
    assert phase_builds("prefill", SHAPE, defect=None) == phase_builds("prefill", SHAPE)
    options = phase_builds("prefill", SHAPE, defect=PrefillDefect.WRONG_SCALE)[0].options
    assert options == (("knobs", knobs_for(PrefillDefect.WRONG_SCALE)),)
    # a decode call plants a combine defect in its combine step only
    split, combine = phase_builds("decode", SHAPE, defect=CombineDefect.DROP_SMALLEST_SPLIT)
    assert split.options == () and combine.options == (
        ("knobs", knobs_for(CombineDefect.DROP_SMALLEST_SPLIT)),
    )
    with pytest.raises(TypeError, match="no kernel of decode plants"):
        phase_builds("decode", SHAPE, defect=PrefillDefect.RACE)


@pytest.mark.parametrize("target", ["gfx942", "sm90"])
def test_a_declaration_resolves_against_the_local_table(target):
    assert [b.cfg for b in Build("flash_fwd", SHAPE, DEFAULT).resolved(target)] == [
        default_config(target, 128)
    ]
    assert [b.cfg for b in Build("paged_extend", SHAPE, EVERY).resolved(target)] == list(
        EXTEND_TABLES[target][128]
    )
    one = CONFIG_TABLES[target][128][-1]
    assert Build("flash_fwd", SHAPE, one).resolved(target) == [Build("flash_fwd", SHAPE, one)]


@pytest.mark.parametrize(
    "cases, tables, phase",
    [
        (numerics_cases(), CONFIG_TABLES, "prefill"),
        (EXTEND_CASES, EXTEND_TABLES, "extend"),
        (DECODE_CASES, DECODE_TABLES, "decode"),
    ],
)
def test_every_config_param_declares_the_kernel_it_launches(cases, tables, phase):
    for param in with_configs(cases, tables=tables, phase=phase):
        case, cfg = param.values
        declared = [b for mark in param.marks if mark.name == "builds" for b in mark.args]
        assert declared == phase_builds(phase, case.shape, cfg), param.id


def test_nothing_to_compile_starts_no_process():
    assert not precompile([], "sm90", processes=4).compiled_ahead
    assert not precompile(phase_builds("prefill", SHAPE), "sm90", processes=0).compiled_ahead


def test_a_build_that_fails_ahead_is_counted_not_raised():
    # 33 threads is no whole number of warps or wavefronts: the spawned process's compile fails
    # (ConfigError; NoLocalTarget first on a machine without a GPU), as a broken kernel fails in
    # TileLang. The run goes on: the test that launches it reports the error.
    bad = TileConfig("m64n64-33threads", 64, 64, 1, threads=33)
    result = precompile([Build("flash_fwd", SHAPE, bad)], "sm90", processes=2)
    assert (result.kernels, result.target, result.processes) == (1, "sm90", 1), result
    assert (
        len(result.failed) == 1
        and result.failed[0].startswith("flash_fwd ")
        and "m64n64-33threads" in result.failed[0]
    ), result
    assert PrecompileResult.from_json(result.to_json()) == result
