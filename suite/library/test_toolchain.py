"""Toolchain discovery, code object identity, and the disk cache."""

import dataclasses

import pytest

from tilegate.gfx942 import toolchain as tc
from tilegate.gfx942.code_object import build_code_object

TINY_KERNEL = 'extern "C" __global__ void tiny(float* x) { x[threadIdx.x] *= 2.0f; }\n'


def test_missing_cross_prefix_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEGATE_TOOLCHAIN", str(tmp_path / "nowhere"))
    monkeypatch.setattr(tc, "_rocm_toolchain", lambda: None)
    tc.find_toolchain.cache_clear()
    try:
        with pytest.raises(
            tc.ToolchainMissing,
            match=r"nowhere \(\$TILEGATE_TOOLCHAIN\);.*install-gfx942-toolchain",
        ):
            tc.find_toolchain()
    finally:
        tc.find_toolchain.cache_clear()


def test_a_missing_default_prefix_names_tilegate_toolchain(monkeypatch, tmp_path):
    # Symptom: a gate installed into a kernel package's venv looked in its site-packages'
    # .toolchain/gfx942 and said to run scripts/install-gfx942-toolchain.sh or set ROCM_PATH,
    # never naming TILEGATE_TOOLCHAIN, the one setting that finds a checkout's prepared toolchain.
    monkeypatch.delenv("TILEGATE_TOOLCHAIN", raising=False)
    monkeypatch.setattr(tc, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(tc, "_rocm_toolchain", lambda: None)
    tc.find_toolchain.cache_clear()
    try:
        with pytest.raises(tc.ToolchainMissing, match="set TILEGATE_TOOLCHAIN to a complete"):
            tc.find_toolchain()
    finally:
        tc.find_toolchain.cache_clear()


def test_toolchain_targets_the_mi300x_runtime_id():
    chain = tc.find_toolchain()
    assert f"--offload-arch={tc.GFX942_TARGET_ID}" in chain.compile_flags
    assert "clang version" in chain.version and "hip " in chain.version


def test_code_object_cache_hits_and_keys_on_compiler(tmp_path, monkeypatch):
    chain = tc.find_toolchain()
    first = build_code_object(TINY_KERNEL, chain, tmp_path)
    assert first.hsaco.read_bytes()[:4] == b"\x7fELF"

    def no_compiler(*args, **kwargs):
        raise AssertionError("cache hit expected, but the compiler ran")

    monkeypatch.setattr("tilegate.gfx942.code_object._run", no_compiler)
    assert build_code_object(TINY_KERNEL, chain, tmp_path) == first

    other = dataclasses.replace(chain, version=chain.version + " (another build)")
    with pytest.raises(AssertionError, match="compiler ran"):
        build_code_object(TINY_KERNEL, other, tmp_path)


def test_compiler_errors_carry_its_message(tmp_path):
    from tilegate.gfx942.code_object import BuildError

    with pytest.raises(BuildError, match="error"):
        build_code_object("this is not C++\n", tc.find_toolchain(), tmp_path)


def test_lowered_cache_reuses_disk_entries(fresh_builder, monkeypatch):
    from tilegate.fixtures.compile_cases import cases

    case = cases("gfx942")[0]
    first = fresh_builder.lowered(case)
    monkeypatch.setattr(
        "tilegate.gate.lowering.lower",
        lambda *a: pytest.fail("lowered again despite the disk cache"),
    )
    from tilegate.gate.builder import KernelBuilder

    again = KernelBuilder(fresh_builder.cache_dir).lowered(case)
    assert again == first


def _combine_source(builder) -> str:
    from tilegate.fixtures.compile_cases import cases

    return builder.lowered(
        next(c for c in cases("gfx942") if c.kernel == "paged_decode_combine")
    ).source


def test_the_precompiled_header_changes_no_byte(builder, tmp_path):
    from tilegate.gfx942.code_object import ENTRY_FILES, _build_into

    source, chain = _combine_source(builder), tc.find_toolchain()
    with_pch, without = tmp_path / "with", tmp_path / "without"
    for folder in (with_pch, without):
        folder.mkdir()
    _build_into(with_pch, source, chain, tmp_path / "cache")
    assert list((tmp_path / "cache" / "pch").glob("*.pch")), "no precompiled header was made"
    _build_into(without, source, chain)
    for name in ENTRY_FILES:
        assert (with_pch / name).read_bytes() == (without / name).read_bytes(), name


def test_a_broken_precompiled_header_is_discarded_and_the_build_goes_on(builder, tmp_path):
    from tilegate.gfx942.code_object import _build_into
    from tilegate.gfx942.pch import precompiled_header

    source, chain = _combine_source(builder), tc.find_toolchain()
    pch = precompiled_header(source, chain, tmp_path / "cache")
    pch.write_bytes(b"not a precompiled header")
    (tmp_path / "out").mkdir()
    with pytest.warns(UserWarning, match="discarded the precompiled header"):
        _build_into(tmp_path / "out", source, chain, tmp_path / "cache")
    assert (tmp_path / "out" / "kernel.hsaco").stat().st_size > 0 and not pch.exists()


def test_a_second_writer_keeps_the_first_header(builder, tmp_path):
    # clang checks the header a PCH was made from by size and time: had a second worker rewritten
    # it, every PCH built from the first copy would be refused (seen: warnings in a cold 2-worker
    # run)
    from tilegate.gfx942.pch import precompiled_header

    source, chain = _combine_source(builder), tc.find_toolchain()
    pch = precompiled_header(source, chain, tmp_path)
    header = pch.with_suffix(".h")
    before = header.stat()
    pch.unlink()  # as if another worker were still building its own
    assert precompiled_header(source, chain, tmp_path) == pch
    after = header.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_header_that_cannot_be_made_is_tried_once(builder, tmp_path, monkeypatch, recwarn):
    from tilegate.gfx942 import pch as pch_module

    # a driver with no front-end job
    monkeypatch.setattr(pch_module, "_front_end_command", lambda *args: None)
    monkeypatch.setattr(pch_module, "_cannot_build", set())
    source, chain = _combine_source(builder), tc.find_toolchain()
    assert pch_module.precompiled_header(source, chain, tmp_path) is None
    assert pch_module.precompiled_header(source, chain, tmp_path) is None
    assert len([w for w in recwarn if "no precompiled header" in str(w.message)]) == 1
