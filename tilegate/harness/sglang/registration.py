"""The gate's instrumented SGLang plugin (entry point ``tilelang-harness``): test-only, and light
(the backends it registers are in instrumented.py, loaded when SGLang builds one).

The harness child (tilegate.harness.sglang.child) lets SGLang load this plugin in place of the
production one (tilegate.harness.sglang.protocol.child_env) and names a marker folder; elsewhere
``register`` does nothing. In every SGLang process it then registers:

  tilelang                        the production backend and plugin, observed: each process it
                                  registers in, each backend built and each batch it served leaves
                                  a marker (``batch`` records: what the kernels were given)
  tilelang-planted-BUG            the production kernels with a planted bug (GPU): stale_kv (each
                                  decode query misses its own key), scale10 (softmax scale x1.1),
                                  prefix_off_by_one (the extend kernel's ExtendDefect: rows after
                                  a cached prefix misplaced), drop_smallest_split (the decode
                                  combine's CombineDefect)
  tilelang-reference              the production adapter over the kernels' FP32 torch reference
                                  (tilegate.references.paged): SGLang's CPU engine can serve it
  tilelang-reference-planted-BUG  the same with a planted bug, the CPU comparisons' self-test:
                                  scale (x1.25), stale_kv, scale10 (x1.1: keeps the long-context
                                  model's greedy tokens but moves their logprobs)
"""

from __future__ import annotations

import os

from tilegate.harness.sglang import protocol as proto
from tilegate.harness.sglang.observations import marker
from tilegate.harness.sglang.planted import KERNEL_BUGS, REFERENCE, REFERENCE_BUGS
from tilegate.serving import sglang_plugin


def _factory(name: str, ops: str | None = None, args: tuple = (), planted_bug: str | None = None):
    """A backend factory for ``name``: ``ops`` names an adapter class of instrumented.py, built with
    ``args`` (None: the production kernels). instrumented.py, and torch with it, loads only when
    SGLang builds a model runner: registering costs nothing."""

    def create(model_runner):
        from tilegate.harness.sglang import instrumented

        adapter = getattr(instrumented, ops)(*args) if ops else None
        return instrumented.ObservedBackend(
            model_runner, adapter, served_as=name, planted_bug=planted_bug
        )

    return create


def planted_name(bug: str) -> str:
    """The attention_backend name that serves the reference adapter with ``bug`` planted."""
    return f"{REFERENCE}-planted-{bug}"


def kernel_planted_name(bug: str) -> str:
    """The attention_backend name that serves the production kernels with ``bug`` planted."""
    return f"{sglang_plugin.BACKEND_NAME}-planted-{bug}"


def register() -> None:
    if not os.environ.get(proto.MARKER_DIR_ENV):
        return  # not under the gate's harness: leave SGLang as the production plugin set it up
    sglang_plugin.register()  # production first, then observed in its place
    sglang_plugin.register_backend(sglang_plugin.BACKEND_NAME, _factory(sglang_plugin.BACKEND_NAME))
    sglang_plugin.register_backend(REFERENCE, _factory(REFERENCE, "ReferenceOps"))
    for bug, planted in REFERENCE_BUGS.items():  # every planted bug, each under its own name
        name = planted_name(bug)
        args = (planted.scale_factor, planted.decode_len_shift)
        sglang_plugin.register_backend(name, _factory(name, "ReferenceOps", args, bug))
    for bug in KERNEL_BUGS:
        name = kernel_planted_name(bug)
        sglang_plugin.register_backend(name, _factory(name, "PlantedKernelOps", (bug,), bug))
    names = [
        sglang_plugin.BACKEND_NAME,
        REFERENCE,
        *map(planted_name, REFERENCE_BUGS),
        *map(kernel_planted_name, KERNEL_BUGS),
    ]
    marker("registered", {"names": names})
