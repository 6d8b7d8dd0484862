"""Lowering a TileLang prim_func for a named target, without a device."""

from __future__ import annotations

import contextlib

import tilelang
import tvm
from tvm.target import Target

# Target names as the config tables spell them -> TileLang targets.
TILELANG_TARGETS = {
    "gfx942": {"kind": "hip", "mcpu": "gfx942"},
    "sm90": {"kind": "cuda", "arch": "sm_90"},
}


class LoweringError(RuntimeError):
    """TileLang could not lower a kernel for a target."""


def tilelang_target(target: str) -> Target:
    if target not in TILELANG_TARGETS:
        raise LoweringError(f"unknown target {target!r}: known {sorted(TILELANG_TARGETS)}")
    return Target(TILELANG_TARGETS[target])


def lower(prim_func, target: str, pass_configs: dict | None = None) -> tuple[str, int, str]:
    """Return (device source, dynamic shared-memory bytes, kernel symbol) for ``target``.
    ``pass_configs``: what a @tilelang.jit kernel declares, applied as its JIT applies them (the
    gate's own kernels declare none, and lower in the ambient context)."""
    tl_target = tilelang_target(target)
    passes = (
        tvm.transform.PassContext(opt_level=3, config=pass_configs)
        if pass_configs
        else contextlib.nullcontext()
    )
    try:
        with passes, tl_target:
            artifact = tilelang.lower(prim_func, target=tl_target)
    except Exception as exc:  # TVM raises its own error types; keep the message, name the target
        raise LoweringError(
            f"TileLang {tilelang.__version__} failed to lower for {target}: {exc}"
        ) from exc
    kernels = [
        f for f in artifact.device_mod.functions.values() if f.attrs and "global_symbol" in f.attrs
    ]
    if len(kernels) != 1:
        raise LoweringError(f"expected one device kernel for {target}, got {len(kernels)}")
    attrs = kernels[0].attrs
    # TileLang sizes shared memory dynamically and after buffer reuse; the code object's
    # static group segment stays 0, so this attribute is the only true LDS figure.
    lds = int(attrs["dyn_shared_memory_buf"]) if "dyn_shared_memory_buf" in attrs else 0
    return artifact.kernel_source, lds, str(attrs["global_symbol"])
