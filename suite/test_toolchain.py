"""Toolchain discovery, code object identity, and the disk cache."""

import dataclasses

import pytest

from tilegate import toolchain as tc
from tilegate.codeobj import build_code_object

TINY_KERNEL = 'extern "C" __global__ void tiny(float* x) { x[threadIdx.x] *= 2.0f; }\n'


def test_missing_cross_prefix_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEGATE_TOOLCHAIN", str(tmp_path / "nowhere"))
    monkeypatch.setattr(tc, "_rocm_toolchain", lambda: None)
    tc.find_toolchain.cache_clear()
    try:
        with pytest.raises(tc.ToolchainMissing, match="install-gfx942-toolchain.sh"):
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

    monkeypatch.setattr("tilegate.codeobj._run", no_compiler)
    assert build_code_object(TINY_KERNEL, chain, tmp_path) == first

    other = dataclasses.replace(chain, version=chain.version + " (another build)")
    with pytest.raises(AssertionError, match="compiler ran"):
        build_code_object(TINY_KERNEL, other, tmp_path)


def test_compiler_errors_carry_its_message(tmp_path):
    from tilegate.codeobj import BuildError
    with pytest.raises(BuildError, match="error"):
        build_code_object("this is not C++\n", tc.find_toolchain(), tmp_path)


def test_lowered_cache_reuses_disk_entries(fresh_builder, monkeypatch):
    from tilegate.fixtures.compile_cases import cases
    case = cases("gfx942")[0]
    first = fresh_builder.lowered(case)
    monkeypatch.setattr("tilegate.lowering.lower", lambda *a: pytest.fail("lowered again despite the disk cache"))
    from tilegate.builder import KernelBuilder
    again = KernelBuilder(fresh_builder.cache_dir).lowered(case)
    assert again == first
