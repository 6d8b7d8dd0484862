"""The gate's instrumented SGLang plugin (entry point ``tilelang-harness``): test-only.

The harness child (tilegate.harness.sglang_child) lets SGLang load only this plugin
(``SGLANG_PLUGINS=tilelang-harness``) and names a marker folder; elsewhere ``register`` does
nothing. In every SGLang process it then registers:

  tilelang                        the production backend and plugin, observed: each process it
                                  registers in, and each backend built, leaves a marker
  tilelang-reference              the production adapter over the kernels' FP32 torch reference
                                  (tilegate.references.paged): SGLang's CPU engine can serve it
  tilelang-reference-planted-BUG  the same with a planted bug, the comparisons' self-test:
                                  scale (softmax scale x1.25), stale_kv (each decode query misses
                                  its own key, the one just written: a paged-cache bookkeeping bug),
                                  scale10 (softmax scale x1.1: keeps the long-context model's greedy
                                  tokens but moves their logprobs, see tilegate.fixtures.e2e_prompts)
"""

from __future__ import annotations

import json
import os
import time

from tilegate.harness import sglang_protocol as proto
from tilegate.serving import sglang_plugin
from tilegate.serving.sglang_backend import TileLangAttnBackend

REFERENCE = "tilelang-reference"
# bug -> (softmax scale factor, decode length shift)
PLANTED_BUGS = {"scale": (1.25, 0), "stale_kv": (1.0, 1), "scale10": (1.1, 0)}


class ReferenceOps:
    """The kernels' contract in FP32 torch, cast back to q's dtype. ``scale_factor`` and
    ``decode_len_shift`` plant bugs (1.0 and 0: none)."""

    name = "reference"

    def __init__(self, scale_factor: float = 1.0, decode_len_shift: int = 0):
        self.scale_factor, self.decode_len_shift = scale_factor, decode_len_shift

    def extend(self, meta, q, k_pool, v_pool, scale):
        """``meta``: the batch's prepared indices (tilegate.serving.batch_indices.BatchIndices)."""
        from tilegate.references.paged import ref_paged_extend

        return ref_paged_extend(q, k_pool, v_pool, meta.req_to_token, meta.req_pool_indices, meta.seq_lens,
                                meta.extend_lens, scale=scale * self.scale_factor).to(q.dtype)

    def decode(self, meta, q, k_pool, v_pool, scale):
        from tilegate.references.paged import ref_paged_decode

        return ref_paged_decode(q, k_pool, v_pool, meta.req_to_token, meta.req_pool_indices,
                                meta.seq_lens - self.decode_len_shift, scale=scale * self.scale_factor).to(q.dtype)


def _marker(kind: str, record: dict | None = None) -> None:
    folder = os.environ.get(proto.MARKER_DIR_ENV)
    if folder:
        line = {**(record or {}), "pid": os.getpid(), "ppid": os.getppid(), "time": time.time()}
        with open(os.path.join(folder, f"{kind}-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")


class ObservedBackend(TileLangAttnBackend):
    """The production backend, recording where it was built and which entry points served."""

    def __init__(self, model_runner, ops=None, *, served_as: str = sglang_plugin.BACKEND_NAME, planted_bug=None):
        super().__init__(model_runner, ops)
        self.served_as, self.planted_bug = served_as, planted_bug
        self._seen: set[str] = set()
        base = TileLangAttnBackend
        _marker("backend", {"event": "constructed", "mode": self.mode, "served_as": served_as,
                            "planted_bug": planted_bug, "class": base.__qualname__, "module": base.__module__})

    def _forward(self, kind, *args):
        if kind not in self._seen:
            self._seen.add(kind)
            _marker("backend", {"event": f"first-{kind}", "mode": self.mode, "served_as": self.served_as})
        return super()._forward(kind, *args)


def _factory(name: str, ops_for=None, planted_bug: str | None = None):
    def create(model_runner):
        return ObservedBackend(model_runner, ops_for() if ops_for else None, served_as=name, planted_bug=planted_bug)

    return create


def planted_name(bug: str) -> str:
    """The attention_backend name that serves the reference adapter with ``bug`` planted."""
    return f"{REFERENCE}-planted-{bug}"


def register() -> None:
    if not os.environ.get(proto.MARKER_DIR_ENV):
        return  # not under the gate's harness: leave SGLang as the production plugin set it up
    sglang_plugin.register()  # production first, then observed in its place
    sglang_plugin.register_backend(sglang_plugin.BACKEND_NAME, _factory(sglang_plugin.BACKEND_NAME))
    sglang_plugin.register_backend(REFERENCE, _factory(REFERENCE, ReferenceOps))
    for bug, (scale, shift) in PLANTED_BUGS.items():  # every planted bug, each under its own name
        name = planted_name(bug)
        sglang_plugin.register_backend(name, _factory(name, lambda s=scale, d=shift: ReferenceOps(s, d), bug))
    _marker("registered", {"names": [sglang_plugin.BACKEND_NAME, REFERENCE, *map(planted_name, PLANTED_BUGS)]})
