"""The stress tier's parts that need no GPU: each planted race is the healthy kernel less the one
synchronisation it names (both lowered for sm90 here), each asynchronous path shows in the CUDA
source it is looked for in, the bitwise comparison counts what differs, and which configs have
asynchronous paths."""

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pytest
import torch

from tilegate.gate.planted import ExtendDefect, knobs_for
from tilegate.gate.registry import planted_pass_configs
from tilegate.harness.stress import cuda_source_shows, repeat_bitwise
from tilegate.kernels.configs import (
    CONFIG_TABLES,
    DECODE_TABLES,
    EXTEND_TABLES,
    PRODUCER_WARPGROUP,
    REGISTER_PREFETCH,
    TMA_PIPELINE,
    TileConfig,
    asynchronous_paths,
    configs_for,
)
from tilegate.kernels.flash_fwd import flash_fwd
from tilegate.kernels.paged_extend import paged_extend
from tilegate.kernels.problem import AttentionShape
from tilegate.runtime import TARGET_PASS_CONFIGS

SHAPE = AttentionShape(32, 8, 128, True, "float16")


def _config(target: str, name: str):
    return next(c for c in configs_for(target, 128, EXTEND_TABLES) if c.name == name)


@dataclass(frozen=True)
class Sm90Lowering:
    """A kernel lowered for sm90 with the pass configs a launch on the H200 would get (the planted
    ones from the registry): a tilegate.gate.builder.Buildable, so the builder's disk cache keeps it
    across runs (a warm run lowers nothing; a changed kernel file misses)."""

    factory: Callable
    cfg: TileConfig
    defect: Enum | None = None
    target = "sm90"

    @property
    def name(self) -> str:
        return f"{self.factory.__name__}-{SHAPE.name}-{self.cfg.name}-{self.defect or 'healthy'}"

    @property
    def threads(self) -> int:
        return self.cfg.threads

    def pass_configs(self) -> dict:
        return {**TARGET_PASS_CONFIGS["sm90"], **planted_pass_configs(self.factory, self.defect)}

    def cache_key(self) -> str:
        parts = (self.name, repr(SHAPE), repr(self.cfg), repr(sorted(self.pass_configs().items())))
        return "\0".join(parts)

    def lowering_input(self):
        knobs = knobs_for(self.defect)
        return self.factory(SHAPE, self.cfg, knobs=knobs), self.pass_configs()


@pytest.fixture
def cuda_source(builder):
    return lambda factory, cfg, defect=None: (
        builder.lowered(Sm90Lowering(factory, cfg, defect)).source
    )


@pytest.fixture
def cuda_lines(cuda_source):
    def lines(cfg, defect=None) -> list[str]:
        return [line.strip() for line in cuda_source(paged_extend, cfg, defect).splitlines()]

    return lines


def _changes(healthy: list[str], planted: list[str]) -> tuple[list[str], list[str]]:
    diff = list(difflib.ndiff(healthy, planted))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_producer_warpgroup_races_are_the_healthy_kernel_less_one_synchronisation(cuda_lines):
    cfg = _config("sm90", "m192n128w12-ws")
    healthy = cuda_lines(cfg)
    removed, added = _changes(healthy, cuda_lines(cfg, ExtendDefect.V_READ_BEFORE_READY))
    assert (
        (len(removed), added) == (1, []) and "v_ready[" in removed[0] and ".wait(" in removed[0]
    ), (removed, added)
    # the early release: the same lines, the k_free arrive moved above the Q@K^T wgmma
    planted = cuda_lines(cfg, ExtendDefect.K_STAGE_RELEASED_EARLY)
    assert sorted(planted) == sorted(healthy)
    arrive = next(
        line for line in healthy if line.startswith("k_free[") and line.endswith(".arrive();")
    )
    first_wgmma = next(i for i, line in enumerate(healthy) if "wgmma_ss" in line)
    assert healthy.index(arrive) > first_wgmma and planted.index(arrive) < first_wgmma


@pytest.mark.parametrize("target, name", [("sm90", "m128n128w8-pf"), ("gfx942", "m128n64w4")])
def test_prefetch_race_is_the_healthy_kernel_less_the_loop_top_barrier(target, name, cuda_lines):
    cfg = _config(target, name)
    healthy = cuda_lines(cfg)
    planted = cuda_lines(cfg, ExtendDefect.PREFETCH_OVERWRITES_TILE_IN_USE)
    removed, added = _changes(healthy, planted)
    assert (removed, added) == (["__syncthreads();"], []), (removed, added)
    loop = next(i for i, line in enumerate(healthy) if line.startswith("for (int kb = 0;"))
    assert healthy[loop + 1] == "__syncthreads();" and planted[loop + 1] != "__syncthreads();"


def test_each_asynchronous_path_shows_in_its_cuda_source_and_no_other(cuda_source):
    sources = {
        TMA_PIPELINE: cuda_source(flash_fwd, configs_for("sm90", 128, CONFIG_TABLES)[1]),
        PRODUCER_WARPGROUP: cuda_source(paged_extend, _config("sm90", "m192n128w12-ws")),
        REGISTER_PREFETCH: cuda_source(paged_extend, _config("sm90", "m128n128w8-pf")),
    }
    for built, source in sources.items():
        assert [p for p in sources if cuda_source_shows(p, source)] == [built], built


def test_a_planted_race_needs_its_path():
    with pytest.raises(ValueError, match="producer-warpgroup path: config m128n128w8-pf has none"):
        paged_extend(
            SHAPE,
            _config("sm90", "m128n128w8-pf"),
            knobs=knobs_for(ExtendDefect.V_READ_BEFORE_READY),
        )
    with pytest.raises(ValueError, match="register-prefetch path: config m192n128w12-ws has none"):
        paged_extend(
            SHAPE,
            _config("sm90", "m192n128w12-ws"),
            knobs=knobs_for(ExtendDefect.PREFETCH_OVERWRITES_TILE_IN_USE),
        )


def test_asynchronous_paths_by_config_and_build_target():
    sm90_prefill = configs_for("sm90", 128, CONFIG_TABLES)
    assert all(asynchronous_paths("prefill", c, "sm90") == (TMA_PIPELINE,) for c in sm90_prefill)
    assert asynchronous_paths("extend", _config("sm90", "m192n128w12-ws"), "sm90") == (
        PRODUCER_WARPGROUP,
    )
    for kernel, tables in (
        ("prefill", CONFIG_TABLES),
        ("extend", EXTEND_TABLES),
        ("decode", DECODE_TABLES),
    ):
        for built_for in ("gfx942", "sm90"):  # gfx942's programs run lowered for sm90 on the H200
            assert all(
                asynchronous_paths(kernel, c, built_for) == (REGISTER_PREFETCH,)
                for c in configs_for("gfx942", 128, tables)
            )


def test_repeat_bitwise_counts_every_repeat_that_differs_in_any_bit():
    first = torch.tensor([1.0, float("nan"), 0.0], dtype=torch.float16)
    # -0 is another bit pattern
    outputs = {
        3: torch.tensor([1.0, float("nan"), -0.0], dtype=torch.float16),
        # one ulp, and the NaN replaced
        7: torch.tensor([1.0009765625, 2.0, 0.0], dtype=torch.float16),
    }
    calls = iter(range(10))
    result = repeat_bitwise(lambda: outputs.get(next(calls), first.clone()), first, 10)
    assert (result.repeats, result.differing, result.most_elements_differing) == (10, 2, 2)
    # NaN with the same bits equals itself
    assert repeat_bitwise(lambda: first.clone(), first, 5).differing == 0
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        repeat_bitwise(lambda: first, first, 0)
