"""Planted defects are typed (tilegate/gate/planted.py): each member plants something in its own
kernel through that kernel's knobs (kernels/hooks.py), a misspelling fails where it is written, no
kernel takes another family's knobs, and the gate turns no bare name into knobs. Building the
prim_func is enough here (a fraction of a second); lowering is the compile tier's."""

import functools
import json

import pytest

from tilegate.gate.planted import (
    PREFETCH_DEFECTS,
    WARPGROUP_DEFECTS,
    WINDOW_DEFECTS,
    CombineDefect,
    ExtendDefect,
    PrefillDefect,
    knobs_for,
)
from tilegate.gate.registry import KERNELS, planted_pass_configs
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES
from tilegate.kernels.flash_fwd import flash_fwd
from tilegate.kernels.paged_decode import paged_decode_combine
from tilegate.kernels.paged_extend import paged_extend
from tilegate.kernels.problem import AttentionShape

SHAPE = AttentionShape(32, 8, 128, True, "float16")
WINDOWED = AttentionShape(32, 8, 128, True, "float16", window=127)  # WINDOW_DEFECTS' code
FAMILIES = {
    flash_fwd: PrefillDefect,
    paged_extend: ExtendDefect,
    paged_decode_combine: CombineDefect,
}
TABLES = {
    flash_fwd: CONFIG_TABLES,
    paged_extend: EXTEND_TABLES,
    paged_decode_combine: DECODE_TABLES,
}
EACH_DEFECT = [pytest.param(f, d, id=d.value) for f, family in FAMILIES.items() for d in family]


def _config(factory, defect=None):
    """gfx942's first config (its register store is where register_store_skips_last_row lives), or
    the first sm90 config with the asynchronous path an extend race is planted in."""
    if defect in WARPGROUP_DEFECTS:
        return next(c for c in EXTEND_TABLES["sm90"][128] if c.gather_warpgroup)
    if defect in PREFETCH_DEFECTS:
        return next(c for c in EXTEND_TABLES["sm90"][128] if c.prefetch_kv)
    return TABLES[factory]["gfx942"][128][0]


@functools.cache
def _healthy(factory, cfg, shape=SHAPE) -> str:
    return factory(shape, cfg).script()


@pytest.mark.parametrize("factory, defect", EACH_DEFECT)
def test_every_defect_plants_something_in_its_own_kernel(factory, defect):
    cfg = _config(factory, defect)
    shape = WINDOWED if defect in WINDOW_DEFECTS else SHAPE
    knobs = knobs_for(defect, FAMILIES[factory], factory.__name__)
    assert not knobs.healthy
    assert factory(shape, cfg, knobs=knobs).script() != _healthy(factory, cfg, shape)


@pytest.mark.parametrize("defect", WINDOW_DEFECTS)
def test_a_window_defect_plants_nothing_in_a_shape_without_a_window(defect):
    cfg = _config(flash_fwd, defect)
    knobs = knobs_for(defect, PrefillDefect, "flash_fwd")
    assert flash_fwd(SHAPE, cfg, knobs=knobs).script() == _healthy(flash_fwd, cfg)


@pytest.mark.parametrize("factory", FAMILIES)
def test_a_healthy_call_is_the_plain_build(factory):
    cfg = _config(factory)
    healthy = type(knobs_for(next(iter(FAMILIES[factory]))))()
    assert factory(SHAPE, cfg, knobs=healthy).script() == _healthy(factory, cfg)
    assert factory(SHAPE, cfg, knobs=None).script() == _healthy(factory, cfg)
    assert planted_pass_configs(factory, None) == {} and healthy.pass_configs() == {}


def test_a_misspelling_fails_where_it_is_written():
    with pytest.raises(AttributeError):
        PrefillDefect.RAEC  # noqa: B018  # in a module: at import
    with pytest.raises(ValueError, match="'raec' is not a valid PrefillDefect"):
        PrefillDefect("raec")  # a name from a command line or a file


def test_a_kernel_refuses_another_family_and_bare_names():
    extend_knobs = knobs_for(ExtendDefect.PREFIX_OFF_BY_ONE)
    with pytest.raises(TypeError, match="flash_fwd takes PrefillKnobs, not ExtendKnobs"):
        flash_fwd(SHAPE, _config(flash_fwd), knobs=extend_knobs)
    with pytest.raises(TypeError, match="paged_decode_combine takes CombineKnobs"):
        paged_decode_combine(SHAPE, _config(paged_decode_combine), knobs=PrefillDefect.RACE)
    with pytest.raises(TypeError, match="paged_extend takes ExtendKnobs"):
        paged_extend(SHAPE, _config(paged_extend), knobs="prefix_off_by_one")
    # the gate's conversion names the member to pass, and refuses another family's
    other = "flash_fwd plants PrefillDefects, not the ExtendDefect 'prefix_off_by_one'"
    with pytest.raises(TypeError, match=other):
        knobs_for(ExtendDefect.PREFIX_OFF_BY_ONE, PrefillDefect, "flash_fwd")
    with pytest.raises(TypeError, match="pass ExtendDefect.PREFIX_OFF_BY_ONE"):
        knobs_for("prefix_off_by_one", ExtendDefect, "paged_extend")
    # nor is a build given another kernel's pass configs
    with pytest.raises(TypeError, match="not the CombineDefect"):
        planted_pass_configs(flash_fwd, CombineDefect.DROP_SMALLEST_SPLIT)


def test_a_defect_reads_as_the_name_builds_and_caches_are_keyed_on():
    race = PrefillDefect.RACE
    assert [race.value, str(race), f"{race}", json.loads(json.dumps(race))] == ["race"] * 4
    assert race == "race" and hash(race) == hash("race")
    assert planted_pass_configs(flash_fwd, race) == {
        "tl.disable_thread_storage_sync": True,
        "tl.disable_tma_lower": True,
    }
    assert {name: spec.defects for name, spec in KERNELS.items()} == {
        "flash_fwd": PrefillDefect,
        "paged_extend": ExtendDefect,
        "paged_decode_split": None,
        "paged_decode_combine": CombineDefect,
    }
