"""gfx942's decode table follows the figures docs/isa.md shows (tilegate/gate/decode_choice.py),
on the CPU: no build. suite/isa/test_decode_choice.py holds those figures to the builds."""

from dataclasses import replace

from tilegate.gate.decode_choice import (
    CANDIDATES,
    documented,
    documented_figures,
    order_problems,
    table,
)
from tilegate.kernels.configs import DECODE_TABLES


def test_the_docs_table_is_one_row_per_config_and_candidate_at_each_head_dim():
    figures = documented_figures()
    for d in (64, 128):
        shipped = [cfg.name for cfg in DECODE_TABLES["gfx942"][d]]
        want = [(name, True) for name in shipped] + [(c.name, False) for c in CANDIDATES]
        assert [(f.config, f.shipped) for f in figures if f.head_dim == d] == want


def test_the_docs_rows_are_what_their_figures_render():
    """Cycles per key, the floor and its verdict are recomputed from the row's own figures."""
    assert table(documented_figures()) == documented()


def test_each_wave_takes_the_keys_cycles_per_key_divides_by():
    """Q K^T and P V of 16 query rows: 16x16x16 MFMAs, 2 x keys x head_dim / 256 of them a wave."""
    for f in documented_figures():
        assert f.mfma == 2 * f.keys_per_wave * f.head_dim // 256, f.config


def test_the_counter_rewrite_gives_the_as_built_cycles_wherever_llvm_mca_finishes():
    """The rewrite (tilegate/gfx942/inner_loop.py) stands in for a loop llvm-mca 19 hangs on: on
    every documented loop it finishes as built, the two figures are the same."""
    finished = [f for f in documented_figures() if not f.rewritten]
    assert finished and all(f.cycles == f.rewrite_cycles for f in finished)


def test_the_table_order_follows_the_documented_rule():
    assert order_problems(documented_figures()) == []


def test_the_rule_catches_a_table_out_of_order_or_a_better_config_left_out():
    figures = documented_figures()
    reordered = {"gfx942": {d: tuple(reversed(DECODE_TABLES["gfx942"][d])) for d in (64, 128)}}
    assert len(order_problems(figures, reordered)) == 2
    # a candidate that met the floor and cost fewer cycles a key would belong in the table
    lifted = [
        replace(f, waves_per_simd=4.0) if f.config == CANDIDATES[0].name else f for f in figures
    ]
    assert any("rank ahead" in p for p in order_problems(lifted))
