"""The backends of the gate's instrumented SGLang plugin (tilegate.harness.sglang.registration,
entry point ``tilelang-harness``): test-only, imported when SGLang builds one of the backends the
plugin registers (its docstring lists them). Each observes the production backend: a marker for
every process it registers in, every backend built and every batch served (``batch`` records:
what the kernels were given)."""

from __future__ import annotations

from dataclasses import replace

from tilegate.gate.planted import CombineDefect, ExtendDefect, knobs_for
from tilegate.harness.sglang.observations import marker
from tilegate.harness.sglang.planted import KERNEL_BUGS
from tilegate.serving import sglang_plugin
from tilegate.serving.sglang_backend import KernelOps, TileLangAttnBackend


class ReferenceOps:
    """The kernels' contract in FP32 torch, cast back to q's dtype. ``scale_factor`` and
    ``decode_len_shift`` plant bugs (1.0 and 0: none)."""

    name = "reference"

    def __init__(self, scale_factor: float = 1.0, decode_len_shift: int = 0):
        self.scale_factor, self.decode_len_shift = scale_factor, decode_len_shift

    def extend(self, meta, q, k_pool, v_pool, scale):
        """``meta``: the batch's prepared indices (tilegate.serving.batch_indices.BatchIndices)."""
        from tilegate.references.paged import ref_paged_extend

        return ref_paged_extend(
            q,
            k_pool,
            v_pool,
            meta.req_to_token,
            meta.req_pool_indices,
            meta.seq_lens,
            meta.extend_lens,
            scale=scale * self.scale_factor,
        ).to(q.dtype)

    def decode(self, meta, q, k_pool, v_pool, scale):
        from tilegate.references.paged import ref_paged_decode

        return ref_paged_decode(
            q,
            k_pool,
            v_pool,
            meta.req_to_token,
            meta.req_pool_indices,
            meta.seq_lens - self.decode_len_shift,
            scale=scale * self.scale_factor,
        ).to(q.dtype)


class PlantedKernelOps:
    """The production kernels (tilegate.serving.paged, through KernelOps) with one of KERNEL_BUGS
    planted."""

    name = KernelOps.name

    def __init__(self, bug: str):
        self._ops = KernelOps()
        planted = KERNEL_BUGS[bug]
        self.scale_factor, self.decode_len_shift = planted.scale_factor, planted.decode_len_shift
        self.extend_knobs = knobs_for(planted.extend_defect, ExtendDefect)
        self.combine_knobs = knobs_for(planted.combine_defect, CombineDefect)

    def extend(self, meta, q, k_pool, v_pool, scale):
        return self._ops.extend(
            meta, q, k_pool, v_pool, scale * self.scale_factor, knobs=self.extend_knobs
        )

    def decode(self, meta, q, k_pool, v_pool, scale):
        if self.decode_len_shift:
            meta = replace(meta, seq_lens=meta.seq_lens - self.decode_len_shift)
        return self._ops.decode(
            meta, q, k_pool, v_pool, scale * self.scale_factor, knobs=self.combine_knobs
        )


def _capturing() -> bool:
    """Inside SGLang's graph capture (its warm-up runs and a breakable graph's eager attention
    included), or inside any CUDA graph capture: the batch is a dummy, not a request's."""
    import torch

    try:
        from sglang.srt.model_executor.runner import get_is_capture_mode

        in_sglang_capture = bool(get_is_capture_mode())
    except ImportError:  # another SGLang layout: torch's own view of the stream decides
        in_sglang_capture = False
    return in_sglang_capture or (
        torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    )


class ObservedBackend(TileLangAttnBackend):
    """The production backend, recording where it was built, which entry points served, and one
    ``batch`` record per batch its ops were given (at the first layer): eager forwards, graph
    captures, and graph replays with their real (unpadded) requests."""

    def __init__(
        self,
        model_runner,
        ops=None,
        *,
        served_as: str = sglang_plugin.BACKEND_NAME,
        planted_bug=None,
    ):
        super().__init__(model_runner, ops)
        self.served_as, self.planted_bug = served_as, planted_bug
        self._seen: set[str] = set()
        base = TileLangAttnBackend
        marker(
            "backend",
            {
                "event": "constructed",
                "mode": self.mode,
                "served_as": served_as,
                "planted_bug": planted_bug,
                "class": base.__qualname__,
                "module": base.__module__,
            },
        )

    def _forward(self, kind, q, k, v, layer, forward_batch, save_kv_cache):
        if kind not in self._seen:
            self._seen.add(kind)
            marker(
                "backend",
                {"event": f"first-{kind}", "mode": self.mode, "served_as": self.served_as},
            )
        if layer.layer_id == 0:
            self._record_batch(kind, q.shape[0], forward_batch)
        return super()._forward(kind, q, k, v, layer, forward_batch, save_kv_cache)

    def _record_batch(self, kind: str, tokens: int, forward_batch) -> None:
        if _capturing():  # a dummy batch, and no host reads while a graph is captured
            marker(
                "backend", {"event": "batch", "kind": kind, "graph": "capture", "tokens": tokens}
            )
            return
        record = {
            "event": "batch",
            "kind": kind,
            "graph": "eager",
            "tokens": tokens,
            "requests": len(forward_batch.seq_lens),
        }
        if kind == "extend":
            prefix = getattr(forward_batch, "extend_prefix_lens_cpu", None)
            prefix = prefix if prefix is not None else forward_batch.extend_prefix_lens.tolist()
            # requests extending a cached prefix
            record["prefixed"] = sum(1 for n in prefix if n > 0)
        marker("backend", record)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture: bool = False):
        super().init_forward_metadata_out_graph(forward_batch, in_capture)
        if in_capture:
            return  # the capture's own forwards are recorded as such by _forward
        # before a replay: a padded row has the fill length (1), a real decode row its prompt and
        # one more
        bs = forward_batch.batch_size
        real = int((forward_batch.seq_lens[:bs] > self.get_cuda_graph_seq_len_fill_value()).sum())
        marker(
            "backend",
            {
                "event": "batch",
                "kind": "decode",
                "graph": "replay",
                "tokens": real,
                "requests": real,
                "padded_to": bs,
            },
        )
