"""The committed golden ISA snapshots (suite/golden/gfx942/<toolchain>/tilelang-<version>/) and
how a build's IsaRecord is compared with its snapshot: field by field, the inner loop's cycles by
their rise. A changed field is a Violation whose rule is the field's name. An update records each
moved field's before/after and the one-line reason it was given (``updated_snapshot``)."""

from __future__ import annotations

from pathlib import Path

from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.isa_checks import Violation

GOLDEN_ROOT = REPO_ROOT / "suite" / "golden" / "gfx942"
CHANGE_KEY = "change"  # in a snapshot: its last update's reason and each moved field's before/after
# The toolchain every commit's CI records snapshots with (scripts/install-gfx942-toolchain.sh).
REFERENCE_TOOLCHAIN = "debian-cross"
# What a kernel's code object shows whichever LLVM built it: the matrix instructions, no
# spills, its LDS (TileLang's figure) and the occupancy they allow. A toolchain with no
# snapshot of its own (ROCm's on the MI300X runner, at first) is held to these.
TOOLCHAIN_INDEPENDENT = (
    "mfma",
    "vgpr_spill_count",
    "sgpr_spill_count",
    "private_segment_bytes",
    "scratch",
    "lds_bytes",
    "occupancy",
)


def golden_path(name: str, toolchain_kind: str, tilelang_version: str) -> Path:
    """Snapshots are per toolchain and per TileLang version: each emits different code."""
    return GOLDEN_ROOT / toolchain_kind / f"tilelang-{tilelang_version}" / f"{name}.json"


# The inner loop's llvm-mca estimate is judged by its rise, not by equality: a kernel that got
# cheaper passes. llvm-mca is deterministic for a given code object and toolchain (rebuilds gave
# the same figures), so a rise past this fraction fails the golden test.
CYCLES_FIELD, CYCLES_RISE_LIMIT = "inner_loop_cycles", 0.10


# Barriers per iteration are judged by their rise too: a run whose process lowers with another hash
# seed than the workers' (tilegate/testing/pytest_plugin.py) can lose a redundant barrier; any added
# one fails.
BARRIERS_FIELD = "barriers_per_iteration"


def golden_diff(expected: dict, actual: dict, fields=None) -> list[Violation]:
    # the change note is no figure
    keys = sorted(fields or (set(expected) | set(actual)) - {CHANGE_KEY})
    diff = [
        Violation(k, f"golden {expected.get(k)!r} -> now {actual.get(k)!r}")
        for k in keys
        if k not in (CYCLES_FIELD, BARRIERS_FIELD) and expected.get(k) != actual.get(k)
    ]
    if CYCLES_FIELD in keys:
        diff += cycles_rise(expected.get(CYCLES_FIELD), actual.get(CYCLES_FIELD))
    if BARRIERS_FIELD in keys:
        diff += barriers_rise(expected.get(BARRIERS_FIELD), actual.get(BARRIERS_FIELD))
    return diff


def barriers_rise(golden: int | None, now: int | None) -> list[Violation]:
    if golden is None or now is None:
        return (
            []
            if golden == now
            else [Violation(BARRIERS_FIELD, f"golden {golden!r} -> now {now!r}")]
        )
    return (
        [Violation(BARRIERS_FIELD, f"golden {golden} -> now {now} barriers per iteration")]
        if now > golden
        else []
    )


def cycles_rise(golden: float | None, now: float | None) -> list[Violation]:
    if golden is None or now is None:
        return (
            [] if golden == now else [Violation(CYCLES_FIELD, f"golden {golden!r} -> now {now!r}")]
        )
    if now > golden * (1 + CYCLES_RISE_LIMIT):
        return [
            Violation(
                CYCLES_FIELD,
                f"inner loop {golden} -> {now} cycles per iteration "
                f"(+{now / golden - 1:.0%}, over the {CYCLES_RISE_LIMIT:.0%} allowed)",
            )
        ]
    return []


# --- recording: every change says what moved and why ----------------------------------------


class UpdateRefused(ValueError):
    """A snapshot update without a one-line reason: the message names what it would have changed."""


def updated_snapshot(old: dict | None, new: dict, reason: str | None) -> dict | None:
    """What ``--update-golden`` writes over ``old`` (None: no snapshot yet) for a build that now
    reads ``new``: None where no field moved (the file stays, its last change with it); else
    ``new`` with a CHANGE_KEY entry of the reason and every moved field's [before, after]. The
    reason is one line of text; an update without one is refused (UpdateRefused)."""
    before = {k: v for k, v in (old or {}).items() if k != CHANGE_KEY}
    moved = {
        k: [before.get(k), new.get(k)]
        for k in sorted(set(before) | set(new))
        if before.get(k) != new.get(k)
    }
    if old is not None and not moved:
        return None
    what = "a new snapshot" if old is None else "changes " + ", ".join(moved)
    if not reason or not reason.strip() or "\n" in reason:
        raise UpdateRefused(
            f"{what}: say why in one line with --golden-reason=TEXT (the reason is kept in the "
            "snapshot)"
        )
    change = {"reason": reason.strip(), "fields": {} if old is None else moved}
    return new | {CHANGE_KEY: change}
