"""SGLang attention backend ``attention_backend="tilelang"``: tilegate's paged TileLang kernels.

SGLang (0.5.23) hands a backend, per attention layer and batch:
  q            [tokens, q_heads * head_dim]  (view as [tokens, q_heads, head_dim])
  k, v         [tokens, kv_heads, head_dim]  the new tokens' keys and values
  forward_batch.out_cache_loc                [tokens] pool slots for those new K/V
  forward_batch.req_pool_indices, seq_lens   [batch]; extend also extend_prefix_lens, extend_seq_lens
  model_runner.req_to_token_pool.req_to_token [max_reqs, max_context]
  model_runner.token_to_kv_pool              get_key_buffer(layer_id) [pool_tokens, kv_heads, head_dim]
and expects [tokens, q_heads * head_dim] back in q's dtype. Like SGLang's torch_native backend,
this one first writes the new K/V into the pool (set_kv_buffer), then attends over the pool.

The attention itself is an ``ops`` object (``extend``, ``decode``): the paged kernels here; the
gate's harness passes their FP32 torch reference instead (tilegate.harness.sglang_instrumented).
What the kernels do not support is refused with ``UnsupportedByTileLangBackend`` (the checks are
in tilegate.serving.sglang_checks); nothing ever falls back to another backend.
"""

from __future__ import annotations

import logging

try:
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
except ImportError:
    # The gate's own environment has no SGLang (it lives in .venv-sglang): there the adapter is
    # unit-tested with hand-built pools (suite/test_sglang_backend.py). SGLang can only ever
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


class KernelOps:
    """tilegate's TileLang paged kernels (tilegate.serving.paged) on the local GPU."""

    name = "kernel"

    def __init__(self):
        try:
            local_target()
        except NoLocalTarget as exc:
            raise UnsupportedByTileLangBackend(f"the tilelang backend cannot run here: {exc}") from exc
        from tilegate.serving import paged

        self.extend, self.decode = paged.paged_extend, paged.paged_decode


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
        self.forward_metadata = None
        self._checked_layers: set[int] = set()
        logger.info("tilelang attention backend: %s ops", self.mode)

    def init_forward_metadata(self, forward_batch):
        """Nothing to precompute: the kernels read req_to_token and seq_lens directly."""
        self.forward_metadata = None

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
        if save_kv_cache and k is not None and v is not None:
            self.token_to_kv_pool.set_kv_buffer(layer, _write_loc(forward_batch), k, v)
        q3 = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
        pools = (self.token_to_kv_pool.get_key_buffer(layer.layer_id),
                 self.token_to_kv_pool.get_value_buffer(layer.layer_id),
                 self.req_to_token_pool.req_to_token, forward_batch.req_pool_indices)
        if kind == "extend":
            out = self.ops.extend(q3, *pools, forward_batch.seq_lens, forward_batch.extend_seq_lens, layer.scaling)
        else:
            out = self.ops.decode(q3, *pools, forward_batch.seq_lens, layer.scaling)
        return out.reshape(q3.shape[0], layer.tp_q_head_num * layer.v_head_dim)

    def support_triton(self):
        return False


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
