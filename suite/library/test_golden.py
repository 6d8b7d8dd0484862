"""Recording golden snapshots: an update says what moved (before/after) and why, or is refused."""

import pytest

from tilegate.gfx942.golden import CHANGE_KEY, UpdateRefused, golden_diff, updated_snapshot

OLD = {"vgpr_count": 100, "sgpr_count": 40, "inner_loop_cycles": 1738.3, "lds_bytes": 18432}


def test_a_changed_snapshot_keeps_each_moved_field_and_the_reason():
    new = OLD | {"vgpr_count": 104, "sgpr_count": 38}
    snapshot = updated_snapshot(
        OLD, new, "Out stored from registers: two fewer SGPRs for the row bound"
    )
    assert snapshot == new | {
        CHANGE_KEY: {
            "reason": "Out stored from registers: two fewer SGPRs for the row bound",
            "fields": {"sgpr_count": [40, 38], "vgpr_count": [100, 104]},
        }
    }


def test_an_update_without_a_reason_is_refused_and_names_what_it_would_change():
    new = OLD | {"inner_loop_cycles": 1900.0}
    for reason in (None, "", "   ", "two\nlines"):
        with pytest.raises(
            UpdateRefused,
            match="changes inner_loop_cycles: say why in one line with --golden-reason",
        ):
            updated_snapshot(OLD, new, reason)


def test_an_unchanged_build_leaves_its_snapshot_and_its_last_reason_alone():
    recorded = OLD | {
        CHANGE_KEY: {"reason": "an earlier change", "fields": {"vgpr_count": [96, 100]}}
    }
    assert updated_snapshot(recorded, dict(OLD), None) is None


def test_a_new_snapshot_needs_a_reason_too():
    with pytest.raises(UpdateRefused, match="a new snapshot"):
        updated_snapshot(None, OLD, None)
    assert updated_snapshot(None, OLD, "new config m128n64w4")[CHANGE_KEY] == {
        "reason": "new config m128n64w4",
        "fields": {},
    }


def test_the_change_note_is_not_compared_but_the_figures_still_are():
    recorded = updated_snapshot(OLD, OLD | {"vgpr_count": 104}, "why")
    assert golden_diff(recorded, OLD | {"vgpr_count": 104}) == []
    assert [v.rule for v in golden_diff(recorded, OLD | {"vgpr_count": 108})] == ["vgpr_count"]
