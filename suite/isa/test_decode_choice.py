"""gfx942's decode table order follows the figures of these builds
(tilegate/gate/decode_choice.py): the split kernel of every decode config and one-wave
candidate, fp16, d64 and d128."""

import pytest
import tilelang

from tilegate.gate import decode_choice as dc
from tilegate.gfx942.toolchain import find_toolchain


@pytest.mark.xdist_group("decode-choice")
def test_the_decode_table_follows_the_figures_of_this_build(builder):
    """Under any TileLang and toolchain, the table's order is ORDER_RULE's on this build's figures.
    Under the ones docs/isa.md was written with, its table is these figures, row for row
    (regenerate: ``PYTHONPATH=. python3 scripts/decode_choice.py``)."""
    figures = dc.all_figures(builder)
    assert dc.order_problems(figures) == [], "\n".join(dc.table(figures))
    if (tilelang.__version__, find_toolchain().kind) == (dc.TILELANG, dc.TOOLCHAIN):
        now, docs = dc.table(figures), dc.documented()
        changed = [f"docs: {a}\nnow:  {b}" for a, b in zip(docs, now, strict=False) if a != b]
        assert now == docs, (
            "docs/isa.md's decode table differs from these builds (run scripts/decode_choice.py):\n"
            + "\n".join(changed)
        )
