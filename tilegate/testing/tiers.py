"""The suite's tiers, one folder each: ``suite/<tier>/`` holds the tier's tests, and its conftest.py
gives every test there the tier's marker, so that a folder and a marker cannot disagree.

A test carries its own folder's tier marker and no other tier's, but for the tiers a folder's tests
are also part of (``also``: the adapted-kernel tier runs the compile, ISA, numerics and sanitizer
tiers on kernels from other packages). Markers that say what a test needs (gpu, rocm, cuda, sglang,
llama3, container, tilelang_venv, config_target) and what it is (decode, slow) are not tiers and
are set by the tests themselves. ``check_folders`` refuses a collection that breaks any of this.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True, kw_only=True)
class Tier:
    name: str  # the folder under suite/ and the marker
    question: str
    needs: str
    also: tuple[str, ...] = ()


TIERS = (
    Tier(
        name="compile",
        question="does every kernel x tile config lower for gfx942, and for the local GPU?",
        needs="CPU (the local-GPU half: a GPU)",
    ),
    Tier(
        name="isa",
        question="is the gfx942 code object what was meant: no spills, LDS fits, MFMA, wide "
        "loads, no fp16 accumulation, latency proxies, golden snapshot?",
        needs="CPU + cross toolchain",
    ),
    Tier(
        name="numerics",
        question="does each kernel (prefill, paged extend and decode) match an FP32 "
        "reference as closely as plain torch does?",
        needs="GPU",
    ),
    Tier(
        name="drift",
        question="how does error grow with length; is fp16 accumulation caught?",
        needs="GPU",
    ),
    Tier(
        name="e2e",
        question="does a Llama-3 served by these kernels (transformers; SGLang's engine on "
        "CPU and GPU) say what the FP32 model says?",
        needs="GPU; the SGLang CPU engine: .venv-sglang",
    ),
    Tier(
        name="serving",
        question="does the SGLang `tilelang` backend hand the kernels what SGLang's "
        "contract says, and fail loudly when a launch breaks?",
        needs="CPU (+ .venv-sglang)",
    ),
    Tier(
        name="sanitize",
        question="out-of-bounds reads, shared-memory races, uninitialised reads, "
        "barrier misuse? (opt-in)",
        needs="compute-sanitizer (MI300X: HIP ASan)",
    ),
    Tier(
        name="stress", question="do the asynchronous paths race? (opt-in, -n 0)", needs="GPU, alone"
    ),
    Tier(
        name="counters",
        question="bank conflicts, occupancy, decode DRAM throughput within the device's "
        "baseline? (opt-in)",
        needs="ncu (MI300X: rocprofv3)",
    ),
    Tier(
        name="perf",
        question="speed as a ratio to torch SDPA and SGLang's peer, within the device's "
        "baseline? (opt-in, -n 0)",
        needs="GPU, alone",
    ),
    Tier(
        name="compat",
        question="do compile + ISA pass under TileLang 0.1.12, SGLang 0.5.23's pin?",
        needs="CPU + .venv-tl012",
    ),
    Tier(
        name="families",
        question="does every kernel, the gate's own and adapted ones, match FP32 on its family's "
        "cases, and do adapted kernels build for gfx942 as their adapter says?",
        needs="CPU + .venv-sglang; GPU",
        also=("compile", "isa", "numerics", "sanitize"),
    ),
    Tier(
        name="library",
        question="does the gate's own machinery (references, ISA readers, records, "
        "CI scripts, the runner's boundary) do what it says?",
        needs="CPU",
    ),
)
BY_NAME = {tier.name: tier for tier in TIERS}


def folder_marker(conftest: str):
    """The ``pytest_itemcollected`` hook of ``suite/<tier>/conftest.py``: the folder's marker on
    each test collected under it (pytest calls a conftest's hook only for the items below its
    folder)."""
    tier = BY_NAME[Path(conftest).parent.name]

    def pytest_itemcollected(item: pytest.Item) -> None:
        item.add_marker(tier.name)

    return pytest_itemcollected


def check_folders(suite: Path, items: list[pytest.Item]) -> None:
    """Refuse a collection in which a test module of ``suite`` sits outside a tier folder, lacks its
    folder's marker (a missing conftest.py) or carries another tier's."""
    problems = []
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(suite) or not path.name.startswith("test_"):
            continue
        folder = path.relative_to(suite).parts[0]
        tier = BY_NAME.get(folder)
        if tier is None:
            problems.append(f"{item.nodeid}: not in a tier folder ({', '.join(BY_NAME)})")
            continue
        marked = {mark.name for mark in item.iter_markers()} & set(BY_NAME)
        if tier.name not in marked:
            problems.append(
                f"{item.nodeid}: no {tier.name} marker (suite/{tier.name}/conftest.py sets it)"
            )
        if stray := sorted(marked - {tier.name, *tier.also}):
            problems.append(
                f"{item.nodeid}: marked {', '.join(stray)}, but its folder is the {tier.name} tier"
            )
    if problems:
        raise pytest.UsageError(
            "the suite's tier folders and markers disagree:\n  " + "\n  ".join(problems)
        )


def readme_table() -> list[str]:
    """The README's tier table: each tier's folder (its marker), question and needs."""
    rows = [f"| [`suite/{t.name}/`](suite/{t.name}/) | {t.question} | {t.needs} |" for t in TIERS]
    return ["| tier folder = marker | question | needs |", "| --- | --- | --- |", *rows]
