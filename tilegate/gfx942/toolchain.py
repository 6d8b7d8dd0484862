"""Finding the compiler that builds gfx942 code objects, and naming it exactly.

Two kinds, in order of preference:
  rocm          ROCm's own clang under $ROCM_PATH (or /opt/rocm): what the MI300X runner has.
  debian-cross  Debian 12's clang-19/llvm-19 plus HIP 6.4 headers and device libraries
                unpacked into a prefix by scripts/install-gfx942-toolchain.sh.
The identity string (compiler version, HIP headers, flags) goes into every cache key and
ISA record: a code object from one toolchain says little about another's.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tilegate.gate.paths import REPO_ROOT

# MI300X's runtime target id: sramecc on, xnack off. A bare "gfx942" means xnack "any",
# which compiles as xnack on (more VGPRs, lower occupancy than the device gets).
GFX942_TARGET_ID = "gfx942:sramecc+:xnack-"
INSTALL_HINT = (
    "run a tilegate checkout's scripts/install-gfx942-toolchain.sh [PREFIX] (Debian 12) or set "
    "ROCM_PATH to a ROCm install"
)
# hipcc passes these to ROCm's clang; the cross build passes them too, so both inline alike.
ROCM_LLVM_FLAGS = (
    "-mllvm",
    "-amdgpu-early-inline-all=true",
    "-mllvm",
    "-amdgpu-function-calls=false",
)
# The cross build's clang 19 folds __builtin_amdgcn_wavefrontsize() only at instruction selection,
# after control flow is laid out: TileLang's reductions (`if (offset >= warpSize)`) keep their
# wave32 LDS path, barriers included, as blocks that never run on wave64. LLVM 20 folds it in the
# middle end (llvm/llvm-project#114481). Pinning it to gfx942's 64 builds what LLVM 20 builds, so
# the ISA tier counts the barriers and LDS traffic that execute. ROCm's own clang builds as shipped.
CROSS_WAVE_SIZE_FLAGS = ("-D__builtin_amdgcn_wavefrontsize()=64",)


class ToolchainMissing(RuntimeError):
    """No gfx942 toolchain is installed; the message says how to get one."""


@dataclass(frozen=True)
class Toolchain:
    kind: str  # "rocm" | "debian-cross"
    clang: Path
    objdump: Path
    readelf: Path
    mca: Path  # llvm-mca: the inner loop's static cycle estimate (tilegate/gfx942/inner_loop.py)
    compile_flags: tuple[str, ...]  # everything but the source and output paths
    version: str  # the compiler's own first version line, plus the HIP headers' version

    @property
    def identity(self) -> str:
        flags = hashlib.sha256(" ".join(self.compile_flags).encode()).hexdigest()[:12]
        return f"{self.kind} | {self.version} | flags {flags}"

    def compile_command(self, source: Path, output: Path) -> list[str]:
        return [str(self.clang), *self.compile_flags, "-o", str(output), str(source)]


def tilelang_include_flags() -> list[str]:
    # Found without importing tilelang (which imports torch: seconds for a process that only
    # builds).
    spec = importlib.util.find_spec("tilelang")
    if spec is None or spec.origin is None:
        raise ToolchainMissing(
            "tilelang is not installed: its HIP templates are part of every gfx942 build"
        )
    root = Path(spec.origin).parent
    dirs = [root / "src", root / "src" / "tl_templates" / "hip"]
    # TileLang 0.1.12's HIP templates need ck_tile
    ck = root / "3rdparty" / "composable_kernel" / "include"
    if ck.is_dir():
        dirs.append(ck)
    return [f"-I{d}" for d in dirs]


def _common_flags() -> list[str]:
    return [
        "-x",
        "hip",
        f"--offload-arch={GFX942_TARGET_ID}",
        "--offload-device-only",
        "--no-gpu-bundle-output",  # write the code object ELF itself, no offload bundle
        "-O3",
        "-std=c++17",
        "-Wno-everything",
        *ROCM_LLVM_FLAGS,
    ]


def _first_line(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[0]


def _hip_version(include_dir: Path) -> str:
    header = include_dir / "hip" / "hip_version.h"
    if not header.is_file():
        return "hip ?"
    fields = {}
    for line in header.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("HIP_VERSION_"):
            fields[parts[1]] = parts[2].strip('"')
    return "hip {}.{}.{}".format(
        *(fields.get(f"HIP_VERSION_{k}", "?") for k in ("MAJOR", "MINOR", "PATCH"))
    )


def _rocm_toolchain() -> Toolchain | None:
    root = Path(os.environ.get("ROCM_PATH", "/opt/rocm"))
    llvm = root / "lib" / "llvm" / "bin"
    clang = llvm / "clang++"
    if not clang.is_file():
        return None
    rocwmma = root / "include" / "rocwmma" / "rocwmma.hpp"
    shim = [] if rocwmma.is_file() else [f"-I{_shim_dir()}"]
    flags = (
        *_common_flags(),
        f"--rocm-path={root}",
        *tilelang_include_flags(),
        *shim,
        "-include",
        "hip/hip_bfloat16.h",
    )
    version = f"{_first_line([str(clang), '--version'])} | {_hip_version(root / 'include')}"
    return Toolchain(
        "rocm",
        clang,
        llvm / "llvm-objdump",
        llvm / "llvm-readelf",
        llvm / "llvm-mca",
        tuple(flags),
        version,
    )


def cross_prefix() -> Path:
    return Path(os.environ.get("TILEGATE_TOOLCHAIN", REPO_ROOT / ".toolchain" / "gfx942"))


def _shim_dir() -> Path:
    return cross_prefix() / "shim"


def _debian_cross_toolchain() -> Toolchain:
    prefix = cross_prefix()
    found = {
        name: shutil.which(f"{name}-19")
        for name in ("clang++", "llvm-objdump", "llvm-readelf", "llvm-mca")
    }
    missing = [f"{name}-19" for name, path in found.items() if path is None]
    tools = {name: path for name, path in found.items() if path is not None}
    if missing:
        raise ToolchainMissing(
            f"gfx942 cross toolchain: {', '.join(missing)} not on PATH; {INSTALL_HINT}"
        )
    if not (prefix / ".complete").is_file():
        where = (
            "$TILEGATE_TOOLCHAIN"
            if "TILEGATE_TOOLCHAIN" in os.environ
            else "the default beside the tilegate package, as in a checkout; a tilegate installed "
            "into a venv has none there: set TILEGATE_TOOLCHAIN to a complete prefix, as a "
            "checkout's .toolchain/gfx942 after its scripts/setup.sh"
        )
        raise ToolchainMissing(
            f"gfx942 cross toolchain: HIP headers/device libs not in {prefix} ({where}); "
            f"{INSTALL_HINT}"
        )
    usr = prefix / "usr"
    flags = (
        *_common_flags(),
        f"--rocm-path={usr}",
        f"--hip-path={usr}",
        f"--rocm-device-lib-path={usr}/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
        *tilelang_include_flags(),
        f"-I{prefix / 'shim'}",
        "-include",
        "hip/hip_bfloat16.h",
        *CROSS_WAVE_SIZE_FLAGS,
    )
    packages = (prefix / "PACKAGES").read_text().split()
    version = (
        f"{_first_line([tools['clang++'], '--version'])} | {_hip_version(usr / 'include')} "
        f"| {' '.join(packages)}"
    )
    return Toolchain(
        "debian-cross",
        Path(tools["clang++"]),
        Path(tools["llvm-objdump"]),
        Path(tools["llvm-readelf"]),
        Path(tools["llvm-mca"]),
        flags,
        version,
    )


@functools.cache
def find_toolchain() -> Toolchain:
    """ROCm's compiler when present, else the Debian cross toolchain; ToolchainMissing if
    neither."""
    return _rocm_toolchain() or _debian_cross_toolchain()
