"""The ROCm ASan tier's build, on the CPU: the planted read past seq_k, built as the sanitizer
child's ``--asan`` builds it (through TileLang's own HIP compile route), comes back from TileLang
instrumented for gfx942:xnack+; the plain build of the same source has no instrumentation.

Symptom: ``--asan`` set ``tl.device_compile_flags``, which TileLang's HIP compile (0.1.12 and
0.1.15) never reads: test_rocm_asan_reports_the_planted_read ran an uninstrumented kernel.
Fix: the child replaces TileLang's HIP compile callback with the gate's device ASan build
(tilegate/harness/sanitize/asan_build.py).
"""

import contextlib
import subprocess
from pathlib import Path

import pytest

from tilegate.gate.planted import PrefillDefect, knobs_for
from tilegate.gate.registry import planted_pass_configs
from tilegate.gfx942.asan import ASAN_TARGET_ID, AsanReading, read_asan
from tilegate.gfx942.code_object import build_code_object
from tilegate.gfx942.toolchain import find_toolchain
from tilegate.harness.sanitize import child as sanitize_child
from tilegate.harness.sanitize.asan_build import HIP_COMPILE
from tilegate.kernels.configs import CONFIG_TABLES, configs_for
from tilegate.kernels.flash_fwd import flash_fwd
from tilegate.kernels.problem import AttentionShape

PLANTED = PrefillDefect.READ_PAST_SEQ_K
# the child's --one launch on an MI300X: causal, head_dim 128, gfx942's first config
SHAPE = AttentionShape(*sanitize_child.HEADS, 128, True, sanitize_child.DTYPE)
CONFIG = configs_for("gfx942", 128, CONFIG_TABLES)[0]


@contextlib.contextmanager
def _handed_to_tilelang():
    """(HIP source, code object) of each build TileLang's HIP compile route hands back inside,
    whichever callback is registered there."""
    import tvm_ffi

    compile_hip = tvm_ffi.get_global_func(HIP_COMPILE)
    got: list[tuple[str, bytes]] = []

    def recorded(code, target):
        out = compile_hip(code, target)
        got.append((code, bytes(out)))
        return out

    tvm_ffi.register_global_func(HIP_COMPILE, recorded, override=True)
    try:
        yield got
    finally:
        tvm_ffi.register_global_func(HIP_COMPILE, compile_hip, override=True)


@pytest.fixture(scope="module")
def planted_asan_build(tmp_path_factory, request) -> tuple[str, Path]:
    """The planted kernel compiled by TileLang for gfx942 inside the child's ``--asan`` builds, as
    tilegate.runtime.compiled compiles it on the runner: (its HIP source, the code object)."""
    import tilelang

    from tilegate import runtime
    from tilegate.gate import lowering

    cache = Path(request.config.getoption("--tilegate-cache"))
    with sanitize_child.builds(asan=True, cache=cache), _handed_to_tilelang() as got:
        planted = planted_pass_configs(flash_fwd, PLANTED)
        tilelang.compile(
            flash_fwd(SHAPE, CONFIG, knobs=knobs_for(PLANTED)),
            out_idx=None,
            target=lowering.tilelang_target("gfx942"),
            pass_configs={**runtime.process_pass_configs, **planted},
        )
    assert len(got) == 1, f"TileLang's HIP compile ran {len(got)} times for one kernel"
    source, hsaco = got[0]
    path = tmp_path_factory.mktemp("asan") / "planted.hsaco"
    path.write_bytes(hsaco)
    return source, path


def _read(hsaco: Path) -> tuple[AsanReading, str]:
    """The code object's instrumentation and its ELF header flags."""
    chain = find_toolchain()

    def tool(*args: str) -> str:
        return subprocess.run(
            [*args, str(hsaco)], capture_output=True, text=True, check=True
        ).stdout

    listing = tool(str(chain.objdump), "-d", "--mcpu=gfx942")
    flags = next(ln for ln in tool(str(chain.readelf), "-h").splitlines() if "Flags:" in ln)
    return read_asan(listing, tool(str(chain.readelf), "--notes")), flags


def test_asan_build_of_the_planted_read_is_instrumented(planted_asan_build):
    reading, flags = _read(planted_asan_build[1])
    assert reading.instrumented, f"the --asan build is not instrumented: {reading.summary()}"
    # the planted defect is a global load past seq_k: the loads are what must be checked
    loads = {k: n for k, n in reading.report_calls.items() if k.startswith("__asan_report_load")}
    assert loads, f"no load is checked: {dict(reading.report_calls)}"
    assert reading.unresolved_calls == 0, reading
    assert "xnack+" in flags, f"{ASAN_TARGET_ID} asked, the ELF header says {flags.strip()}"


def test_plain_build_of_the_same_source_has_no_instrumentation(planted_asan_build, builder):
    plain = build_code_object(planted_asan_build[0], find_toolchain(), builder.cache_dir)
    reading = read_asan(plain.disassembly(), plain.notes.read_text())
    assert reading.kernels and not reading.report_calls and reading.shadow_checks == 0, (
        reading.summary()
    )
