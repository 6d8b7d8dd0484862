"""The sanitize tier's parts that need no GPU: the tools' summary lines parsed, the child's
refusal of a defect it cannot plant."""

import pytest

from tilegate.harness.sanitize import child as sanitize_child
from tilegate.harness.sanitize.driver import parse_summary


def test_summary_lines_are_parsed():
    assert parse_summary("memcheck", "========= ERROR SUMMARY: 0 errors\n") == (0, 0)
    assert parse_summary("initcheck", "========= ERROR SUMMARY: 66048 errors\n") == (66048, 0)
    assert parse_summary(
        "racecheck", "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n"
    ) == (1, 2)
    assert parse_summary("memcheck", "Traceback (most recent call last):\n") is None
    assert parse_summary("racecheck", "========= ERROR SUMMARY: 0 errors\n") is None


def test_child_rejects_a_defect_outside_prefill():
    with pytest.raises(SystemExit):
        sanitize_child.main(["decode", "--defect", "race"])
