"""The ROCm ASan child's HIP builds: TileLang's HIP compile callback replaced by the gate's own
device ASan build of the same source (tilegate.gfx942.asan).

TileLang 0.1.12 and 0.1.15 both build a HIP kernel's code object by calling the global function
``tilelang_callback_hip_compile(code, target)`` from their C++ codegen
(src/rocm/codegen/rt_mod_hip.cc), and both register it with fixed hipcc options: the callback is
given no pass configs, so neither ``tl.device_compile_flags`` nor ``compile_flags`` reaches it,
and flags given that way build a plain code object. A function registered under that name after
``import tilelang`` is the one the codegen calls, on the runner and on the CPU alike: it builds
with the ISA tier's toolchain (ROCm's clang on the runner, the cross toolchain here), and
suite/isa/test_asan_build.py builds the planted read past seq_k through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tilegate.gfx942.asan import ASAN_TARGET_ID, AsanReading, asan_toolchain, read_asan
from tilegate.gfx942.code_object import BuildError, build_code_object
from tilegate.gfx942.toolchain import find_toolchain

HIP_COMPILE = "tilelang_callback_hip_compile"


@dataclass
class AsanHipCompile:
    """The callback: each HIP source TileLang hands it, built for ASAN_TARGET_ID with the
    sanitizer on. A build with no instrumentation in its kernels is an error, never a launch."""

    cache_dir: Path
    built: list[AsanReading] = field(default_factory=list)

    def __call__(self, code: str, target: object) -> bytes:
        from tilelang.rocm.target import target_get_mcpu  # the same in 0.1.12 and 0.1.15

        mcpu = str(target_get_mcpu(target) or "")
        if mcpu.split(":")[0] != "gfx942":
            raise BuildError(f"the ASan build is for gfx942, TileLang asked for {mcpu!r}")
        obj = build_code_object(code, asan_toolchain(find_toolchain()), self.cache_dir)
        reading = read_asan(obj.disassembly(), obj.notes.read_text())
        if not reading.instrumented:
            raise BuildError(f"the {ASAN_TARGET_ID} ASan build is not instrumented: {reading}")
        self.built.append(reading)
        return obj.hsaco.read_bytes()


@contextlib.contextmanager
def asan_builds(cache_dir: Path) -> Iterator[AsanHipCompile]:
    """Inside, every HIP build of this process is the ASan build; on exit TileLang's own callback
    and its kernel cache are back (a test's process goes on)."""
    import tilelang  # registers TileLang's own callback first: ours then replaces it
    import tvm_ffi

    previous = tvm_ffi.get_global_func(HIP_COMPILE, allow_missing=True)
    cached = tilelang.is_cache_enabled()
    hook = AsanHipCompile(cache_dir)
    # a kernel from TileLang's disk cache was built by whatever callback was there then
    tilelang.disable_cache()
    tvm_ffi.register_global_func(HIP_COMPILE, hook, override=True)
    try:
        yield hook
    finally:
        if previous is not None:
            tvm_ffi.register_global_func(HIP_COMPILE, previous, override=True)
        if cached:
            tilelang.enable_cache()
