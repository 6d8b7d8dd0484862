"""SGLang attention backend ``attention_backend="tilelang"``: tilegate's paged TileLang kernels.

SGLang (0.5.23) hands a backend, per attention layer and batch:
  q            [tokens, q_heads * head_dim]  (view as [tokens, q_heads, head_dim])
  k, v         [tokens, kv_heads, head_dim]  the new tokens' keys and values
  forward_batch.out_cache_loc                [tokens] pool slots for those new K/V
  forward_batch.req_pool_indices, seq_lens   [batch]; extend also extend_prefix_lens,
  extend_seq_lens
  model_runner.req_to_token_pool.req_to_token [max_reqs, max_context]
  model_runner.token_to_kv_pool              get_key_buffer(layer_id) [pool_tokens, kv_heads,
  head_dim]
and expects [tokens, q_heads * head_dim] back in q's dtype. Like SGLang's torch_native backend,
this one first writes the new K/V into the pool (set_kv_buffer), then attends over the pool.

The attention itself is an ``ops`` object (``extend``, ``decode``): the paged kernels here; the
gate's harness passes their FP32 torch reference instead (tilegate.harness.sglang.instrumented).
What the kernels do not support is refused with ``UnsupportedByTileLangBackend`` (the checks are
in tilegate.serving.sglang_checks); nothing ever falls back to another backend.
"""

from __future__ import annotations

import logging

import torch

try:
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
except ImportError:
    # The gate's own environment has no SGLang (it lives in .venv-sglang): there the adapter is
    # unit-tested with hand-built pools (suite/serving/test_sglang_backend.py). SGLang can only ever
    # construct this class where it imports, so there the real base class is used.
    AttentionBackend = object

from tilegate.platform import NoLocalTarget, local_target
from tilegate.serving.sglang_checks import (
    UnsupportedByTileLangBackend,
    check_forward_mode,
    check_layer,
    check_model_runner,
)

logger = logging.getLogger(__name__)

# The profiler range around each batch's preparation (tilegate.harness.sglang.step_profile reads it)
PREPARE_RANGE = "tilegate.prepare_batch"


class KernelOps:
    """tilegate's TileLang paged kernels (tilegate.serving.paged) on the local GPU."""

    name = "kernel"

    def __init__(self):
        try:
            local_target()
        except NoLocalTarget as exc:
            raise UnsupportedByTileLangBackend(
                f"the tilelang backend cannot run here: {exc}"
            ) from exc
        from tilegate.serving import paged

        self.extend, self.decode = paged.extend_batch, paged.decode_batch


class TileLangAttnBackend(AttentionBackend):
    """SGLang backend over tilegate's paged extend and decode."""

    name = "tilelang"

    def __init__(self, model_runner, ops=None):
        super().__init__()
        check_model_runner(model_runner)
        self.ops = ops if ops is not None else KernelOps()
        self.mode = self.ops.name
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        # (the forward batch it was prepared for, or None for a graph's decode batches; its
        # BatchIndices)
        self.forward_metadata: tuple | None = None
        self._checked_layers: set[int] = set()
        logger.info("tilelang attention backend: %s ops", self.mode)

    def init_forward_metadata(self, forward_batch):
        """Once per batch: validate and narrow its index tensors (the only host reads)."""
        with torch.profiler.record_function(PREPARE_RANGE):
            self.forward_metadata = (
                forward_batch,
                _prepare(self.req_to_token_pool.req_to_token, forward_batch),
            )

    # ---- CUDA/HIP graphs (SGLang captures decode steps by default) ----------------------
    # SGLang 0.5.23's contract (AttentionBackend's docstring): init_cuda_graph_state once; before
    # each capture and each replay, outside the graph, init_forward_metadata_out_graph(batch,
    # in_capture); inside the capture, init_forward_metadata_in_graph(batch), which every replay
    # then repeats on the device. The batch carries the graph runner's padded static buffers,
    # which the runner refills before each replay.

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int, kv_indices_buf=None):
        """Static index buffers the captured kernels read; each replay refills them in place."""
        self.graph_req_pool_indices = torch.zeros(max_bs, dtype=torch.int32, device=self.device)
        self.graph_seq_lens = torch.full(
            (max_bs,),
            self.get_cuda_graph_seq_len_fill_value(),
            dtype=torch.int32,
            device=self.device,
        )

    def get_cuda_graph_seq_len_fill_value(self):
        return 1  # padded requests of a graph batch: one key each, a length the kernels accept

    def init_forward_metadata_out_graph(self, forward_batch, in_capture: bool = False):
        """Before a capture or a replay, on the host: refuse what the captured kernels cannot
        run, check a replay's lengths on SGLang's host copy (no device work, no wait), and point
        the layers at the static buffers."""
        with torch.profiler.record_function(PREPARE_RANGE):
            fb = forward_batch
            _check_graph_mode(
                fb.forward_mode, getattr(fb, "encoder_lens", None), getattr(fb, "spec_info", None)
            )
            seq_lens_cpu = getattr(fb, "seq_lens_cpu", None)
            if not in_capture and seq_lens_cpu is not None:
                from tilegate.serving.batch_indices import check_host_seq_lens

                check_host_seq_lens(seq_lens_cpu[: fb.batch_size], self._graph_columns())
            self.forward_metadata = (None, self._graph_batch(fb.batch_size))

    def init_forward_metadata_in_graph(self, forward_batch):
        """Captured into the graph, so every replay runs it on the device with no host work:
        check the runner's refilled buffers (a bad entry stops the process with a device-side
        assertion before a kernel reads out of range), then copy them into the static buffers
        the kernels read. At capture the buffers hold fill values, which pass."""
        from tilegate.serving.batch_indices import check_replayed_decode

        bs = forward_batch.batch_size
        req_pool_indices, seq_lens = (
            forward_batch.req_pool_indices[:bs],
            forward_batch.seq_lens[:bs],
        )
        check_replayed_decode(self.req_to_token_pool.req_to_token, req_pool_indices, seq_lens)
        self.graph_req_pool_indices[:bs].copy_(req_pool_indices)
        self.graph_seq_lens[:bs].copy_(seq_lens)

    def _graph_columns(self) -> int:
        return self.req_to_token_pool.req_to_token.shape[1]

    def _graph_batch(self, bs: int):
        from tilegate.serving.batch_indices import BatchIndices

        r2t = self.req_to_token_pool.req_to_token
        if r2t.dtype != torch.int32:
            raise UnsupportedByTileLangBackend(
                f"CUDA graphs need req_to_token in int32, got {r2t.dtype}"
            )
        return BatchIndices(
            r2t, self.graph_req_pool_indices[:bs], self.graph_seq_lens[:bs], tokens=bs
        )

    # ---- forward -----------------------------------------------------------------------

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward("extend", q, k, v, layer, forward_batch, save_kv_cache)

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward("decode", q, k, v, layer, forward_batch, save_kv_cache)

    def _forward(self, kind: str, q, k, v, layer, forward_batch, save_kv_cache: bool):
        """Write the new K/V into the pool, then attend over each request's whole context in it."""
        if layer.layer_id not in self._checked_layers:
            check_layer(layer)
            self._checked_layers.add(layer.layer_id)
        check_forward_mode(forward_batch, kind)
        meta = self._batch_metadata(kind, forward_batch)
        if save_kv_cache and k is not None and v is not None:
            self.token_to_kv_pool.set_kv_buffer(layer, _write_loc(forward_batch), k, v)
        q3 = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
        pools = (
            self.token_to_kv_pool.get_key_buffer(layer.layer_id),
            self.token_to_kv_pool.get_value_buffer(layer.layer_id),
        )
        out = (self.ops.extend if kind == "extend" else self.ops.decode)(
            meta, q3, *pools, layer.scaling
        )
        return out.reshape(q3.shape[0], layer.tp_q_head_num * layer.v_head_dim)

    def _batch_metadata(self, kind: str, forward_batch):
        """This batch's prepared indices: from init_forward_metadata (or, for decode, a graph's),
        else prepared now."""
        if self.forward_metadata is not None:
            prepared_for, meta = self.forward_metadata
            if prepared_for is forward_batch or (prepared_for is None and kind == "decode"):
                return meta
        meta = _prepare(self.req_to_token_pool.req_to_token, forward_batch)
        self.forward_metadata = (forward_batch, meta)
        return meta

    def support_triton(self):
        return False


def _prepare(req_to_token, forward_batch):
    from tilegate.serving.batch_indices import prepare_decode, prepare_extend

    fb = forward_batch
    if getattr(fb.forward_mode, "name", str(fb.forward_mode)) == "DECODE":
        return prepare_decode(req_to_token, fb.req_pool_indices, fb.seq_lens, fb.seq_lens.device)
    return prepare_extend(
        req_to_token, fb.req_pool_indices, fb.seq_lens, fb.extend_seq_lens, fb.seq_lens.device
    )


def _check_graph_mode(forward_mode, encoder_lens, spec_info) -> None:
    name = getattr(forward_mode, "name", str(forward_mode))
    if name != "DECODE" or encoder_lens is not None or spec_info is not None:
        raise UnsupportedByTileLangBackend(
            f"CUDA graphs: the tilelang backend captures plain decode batches only, not {name}"
            + (" with speculative info" if spec_info is not None else "")
        )


def _write_loc(forward_batch):
    """The batch's out_cache_loc as SGLang 0.5.23's pools want it (KVWriteLoc carries the
    'physical' mark a unified pool checks); a bare tensor where KVWriteLoc does not exist."""
    try:
        from sglang.srt.mem_cache.memory_pool import KVWriteLoc
    except ImportError:
        return forward_batch.out_cache_loc
    if not hasattr(forward_batch, "out_cache_loc_is_physical"):
        return forward_batch.out_cache_loc
    return KVWriteLoc.for_batch(forward_batch)
