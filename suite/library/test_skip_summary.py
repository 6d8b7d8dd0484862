"""The end of a run reads as its verdict: skips are counted by what is missing, a line a kind
(tilegate/testing/skips.py, skip_groups), not a line a distinct reason (a hundred on the CPU)."""

from types import SimpleNamespace

from tilegate.testing.skips import skip_groups


def _skipped(reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=("tilegate/testing/skips.py", 127, f"Skipped: {reason}"))


def test_skips_are_counted_by_their_first_clause_most_first():
    reports = [
        *[_skipped("no GPU: this check runs kernels or compiles for the local GPU")] * 3,
        _skipped("opt-in tier: select it with -m perf"),
        _skipped("opt-in tier: select it with -m stress"),
        _skipped("sglang-dsa-partial: its capabilities leave out head_dim 64 (declared: 576)"),
        _skipped("sglang-dsa-partial: sglang is not installed in this environment (python3)"),
    ]
    assert skip_groups(reports) == [("no GPU", 3), ("opt-in tier", 2), ("sglang-dsa-partial", 2)]


def test_a_reason_without_a_clause_is_its_own_group_and_nothing_is_lost():
    reports = [_skipped("plain reason"), SimpleNamespace(longrepr="Skipped: other")]
    groups = skip_groups(reports)
    assert groups == [("other", 1), ("plain reason", 1)]
    assert sum(n for _, n in groups) == len(reports)
