"""The compile cache survives faults: a damaged entry (truncated, altered, half-written) is
detected, discarded and rebuilt, never loaded; builders racing on one key leave one good entry."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilegate.fixtures.compile_cases import cases
from tilegate.gate import lowering
from tilegate.gate.builder import KernelBuilder
from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942 import code_object as codeobj
from tilegate.gfx942.code_object import (
    MANIFEST,
    CacheEntryDiscarded,
    build_code_object,
    entry_problem,
)
from tilegate.gfx942.toolchain import GFX942_TARGET_ID, find_toolchain

# A kernel that needs no HIP header, built by light_toolchain(): the cache's behaviour does not
# depend on what a source includes, and this builds in 0.2 s where a HIP source takes 2 s.
TINY_KERNEL = (
    'extern "C" __attribute__((global)) void tiny(float* x) '
    "{ x[__builtin_amdgcn_workitem_id_x()] *= 2.0f; }\n"
)
LIGHT_FLAGS = (
    "-x",
    "hip",
    f"--offload-arch={GFX942_TARGET_ID}",
    "--offload-device-only",
    "--no-gpu-bundle-output",
    "-O3",
    "-nogpuinc",
    "-nogpulib",
)


def light_toolchain():
    """The installed gfx942 compiler, without HIP's headers and device libraries."""
    return dataclasses.replace(find_toolchain(), compile_flags=LIGHT_FLAGS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One real kernel (decode's combine step: the quickest to lower), lowered and built once;
    each test damages its own copy."""
    case = next(c for c in cases("gfx942") if c.kernel == "paged_decode_combine")
    builder = KernelBuilder(tmp_path_factory.mktemp("built") / "cache")
    obj = builder.code_object(case)
    return (
        builder.cache_dir,
        case,
        obj.hsaco.read_bytes(),
        obj.disassembly(),
        builder.isa_reading(case).metrics(),
    )


def copy_cache(built, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built[0], tmp_path / "cache"))


def only_entry(cache: Path, kind: str) -> Path:
    entries = sorted((cache / kind).iterdir())
    assert len(entries) == 1, (
        f"expected one {kind} entry and nothing else, found {[p.name for p in entries]}"
    )
    return entries[0]


def test_truncated_code_object_is_rebuilt(built, tmp_path):
    # Symptom: a kernel.hsaco cut short (full disk, killed worker, half-restored CI cache) was
    # loaded as is. Fix: every entry has a manifest (size, sha256 per file) checked on load; a
    # mismatch rebuilds it.
    cache, case = copy_cache(built, tmp_path), built[1]
    hsaco = KernelBuilder(cache).code_object(case).hsaco
    hsaco.write_bytes(built[2][: len(built[2]) // 2])
    session = KernelBuilder(cache)  # a later run: only the disk cache is shared
    with pytest.warns(CacheEntryDiscarded, match=r"kernel\.hsaco has \d+ bytes, its manifest says"):
        rebuilt = session.code_object(case)
    assert rebuilt.hsaco.read_bytes() == built[2], (
        "the rebuilt code object is not the full object again"
    )
    assert session.isa_reading(case).metrics() == built[4]
    assert entry_problem(only_entry(cache, "hsaco")) is None


def test_altered_listing_is_rebuilt(built, tmp_path):
    # Symptom: a listing with flipped bytes (same size) fed the ISA rules instructions the compiler
    # never emitted. Fix: the manifest's sha256 covers the listing, notes and ELF header too, not
    # only the code object.
    cache, case = copy_cache(built, tmp_path), built[1]
    listing = KernelBuilder(cache).code_object(case).listing
    data = bytearray(listing.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x01
    listing.write_bytes(bytes(data))
    with pytest.warns(CacheEntryDiscarded, match=r"kernel\.s does not match its manifest's sha256"):
        rebuilt = KernelBuilder(cache).code_object(case)
    assert rebuilt.disassembly() == built[3]


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_damaged_lowered_entry_is_relowered(built, tmp_path, monkeypatch, damage):
    # Symptom: a truncated lowered JSON crashed the run; a garbled one that still parsed was
    # compiled as the kernel. Fix: the entry embeds the sha256 of its fields; an entry that fails to
    # parse or match is relowered.
    cache, case = copy_cache(built, tmp_path), built[1]
    before = KernelBuilder(cache).lowered(case)
    path = only_entry(cache, "lowered")
    text = path.read_text()
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    else:
        entry = json.loads(text)
        entry["source"] = entry["source"].replace("for (", "for  (", 1)
        assert entry["source"] != before.source
        path.write_text(json.dumps(entry))
    real, calls = lowering.lower, []
    monkeypatch.setattr("tilegate.gate.lowering.lower", lambda *a: calls.append(a) or real(*a))
    with pytest.warns(
        CacheEntryDiscarded,
        match="unreadable" if damage == "truncated" else "does not match its sha256",
    ):
        again = KernelBuilder(cache).lowered(case)
    assert len(calls) == 1
    assert (again.lds_bytes, again.symbol, _names_folded(again.source)) == (
        before.lds_bytes,
        before.symbol,
        _names_folded(before.source),
    )
    monkeypatch.setattr(
        "tilegate.gate.lowering.lower", lambda *a: pytest.fail("the rewritten entry was not reused")
    )
    assert KernelBuilder(cache).lowered(case) == again


def _names_folded(source: str) -> str:
    # TileLang numbers its reduction workspaces per process: lowering the same kernel again in a
    # process that lowered others may swap `workspace` and `workspace_1` (seen here).
    return re.sub(r"\bworkspace(_\d+)?\b", "workspace", source)


@pytest.fixture(scope="module")
def tiny_cache(tmp_path_factory) -> Path:
    """A cache holding TINY_KERNEL's entry, built once; tests copy it and damage their copy."""
    cache = tmp_path_factory.mktemp("tiny")
    build_code_object(TINY_KERNEL, light_toolchain(), cache)
    return cache


def tiny_copy(tiny_cache: Path, tmp_path: Path):
    """A copy of ``tiny_cache`` in ``tmp_path`` and its entry, loaded (verified, not rebuilt)."""
    shutil.copytree(tiny_cache, tmp_path, dirs_exist_ok=True)
    return build_code_object(TINY_KERNEL, light_toolchain(), tmp_path)


@pytest.mark.parametrize(
    "damage", ["manifest deleted", "manifest garbled", "manifest field missing", "file deleted"]
)
def test_entry_with_broken_manifest_or_missing_file_is_rebuilt(tiny_cache, tmp_path, damage):
    # Symptom: an entry counted as complete when kernel.hsaco existed, whatever the other files
    # held. Fix: no manifest, an unreadable one, or a file it lists missing: the entry is discarded
    # and rebuilt.
    chain = light_toolchain()
    first = tiny_copy(tiny_cache, tmp_path)
    good, manifest = first.hsaco.read_bytes(), first.hsaco.parent / MANIFEST
    if damage == "manifest deleted":
        manifest.unlink()
    elif damage == "manifest garbled":
        manifest.write_text(manifest.read_text()[:40])
    elif damage == "manifest field missing":
        manifest.write_text(
            json.dumps(
                {k: v for k, v in json.loads(manifest.read_text()).items() if k != "notes.txt"}
            )
        )
    else:
        first.notes.unlink()
    expected = {
        "manifest deleted": "manifest.json is missing",
        "file deleted": "notes.txt is missing",
    }.get(damage, "unreadable manifest")
    with pytest.warns(CacheEntryDiscarded, match=expected):
        again = build_code_object(TINY_KERNEL, chain, tmp_path)
    assert again.hsaco.read_bytes() == good and entry_problem(again.hsaco.parent) is None


@pytest.mark.parametrize("theirs_damaged", [False, True], ids=["theirs-good", "theirs-damaged"])
def test_losing_the_install_race(tiny_cache, tmp_path, monkeypatch, recwarn, theirs_damaged):
    # Symptom: two workers building one key wrote file by file into one folder; a reader could see a
    # mix. Fix: build in a folder beside it, rename it into place; the loser keeps the winner's
    # entry if it verifies.
    chain = light_toolchain()
    entry = tiny_copy(tiny_cache, tmp_path).hsaco.parent
    theirs = tmp_path / "theirs"
    os.rename(entry, theirs)
    if theirs_damaged:
        (theirs / "kernel.hsaco").write_bytes(b"\x7fELF")
    inode = theirs.stat().st_ino
    real = codeobj._build_into

    def build_then_lose(folder, source, toolchain, cache_dir=None):
        real(folder, source, toolchain, cache_dir)
        os.rename(theirs, entry)  # another process installs its entry first

    monkeypatch.setattr("tilegate.gfx942.code_object._build_into", build_then_lose)
    build_code_object(TINY_KERNEL, chain, tmp_path)
    assert (entry.stat().st_ino == inode) is not theirs_damaged
    assert entry_problem(entry) is None and only_entry(tmp_path, "hsaco") == entry
    assert len([w for w in recwarn if w.category is CacheEntryDiscarded]) == int(theirs_damaged)


CHILD = """
import sys, time
from pathlib import Path
import tilegate.gfx942.code_object as codeobj
import dataclasses
from tilegate.gfx942.toolchain import find_toolchain
cache, tag, source, flags = Path(sys.argv[1]), sys.argv[2], sys.argv[3], tuple(sys.argv[4:])
chain, real, compiles = dataclasses.replace(find_toolchain(), compile_flags=flags), codeobj._run, []
def counting_run(cmd, what, *rest):
    if "compile" in what:
        compiles.append(what)
    return real(cmd, what, *rest)
codeobj._run = counting_run
(cache / f"ready-{tag}").touch()
while not (cache / "go").exists():
    time.sleep(0.005)
obj = codeobj.build_code_object(source, chain, cache)
print(len(compiles), obj.hsaco)
"""


def test_concurrent_builds_leave_one_verified_entry(tmp_path):
    # Symptom: xdist workers building the same key at once could leave a half-written or mixed
    # entry. Fix: each builds in its own temporary folder and renames it whole; the loser verifies
    # and keeps the winner's.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), tag, TINY_KERNEL, *LIGHT_FLAGS],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in "ab"
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{tag}").exists() for tag in "ab"):
        assert time.monotonic() < deadline and all(c.poll() is None for c in children), (
            "a builder did not start"
        )
        time.sleep(0.01)
    (tmp_path / "go").touch()  # both start building the same key at the same moment
    results = [c.communicate(timeout=120) for c in children]
    assert [c.returncode for c in children] == [0, 0], [err[-2000:] for _, err in results]
    compiles, paths = zip(*(out.split() for out, _ in results))
    assert compiles == ("1", "1"), "both builders should have compiled: the race did not happen"
    assert paths[0] == paths[1]
    entry = only_entry(tmp_path, "hsaco")  # no building- or discard- folders left behind
    assert str(entry / "kernel.hsaco") == paths[0] and entry_problem(entry) is None
