"""SGLang attention backend ``attention_backend="tilelang"``: the paged contract of tilegate's kernels.

SGLang (0.5.23) hands a backend, per attention layer and batch:
  q            [tokens, q_heads * head_dim]  (view as [tokens, q_heads, head_dim])
  k, v         [tokens, kv_heads, head_dim]  the new tokens' keys and values
  forward_batch.out_cache_loc                [tokens] pool slots for those new K/V
  forward_batch.req_pool_indices, seq_lens   [batch]; extend also extend_prefix_lens, extend_seq_lens
  model_runner.req_to_token_pool.req_to_token [max_reqs, max_context]
  model_runner.token_to_kv_pool              get_key_buffer(layer_id) [pool_tokens, kv_heads, head_dim]
and expects [tokens, q_heads * head_dim] back in q's dtype. Like SGLang's torch_native backend,
this one first writes the new K/V into the pool (set_kv_buffer), then attends over the pool.

Two modes, chosen by ``TILEGATE_BACKEND_MODE``:
  kernel     tilegate.kernels.paged (TileLang) -- imported only in this mode
  reference  tilegate.references.paged in FP32, cast back to q's dtype: exactly the kernels'
             contract, for CPU machines and for proving the adapter against SGLang's engine
The default is ``kernel`` where torch sees a GPU and ``reference`` otherwise; the choice is
always logged, and a marker file records it when ``TILEGATE_SGLANG_MARKER_DIR`` is set.

What the kernels do not support is refused with ``UnsupportedByTileLangBackend`` -- at
construction when the model runner tells, else at the first forward of the offending layer:
MLA, cross attention / encoder-decoder / encoder-only, sliding windows, logit soft-capping,
head dims without a tile config, GQA ratios that do not divide, speculative modes. Nothing ever
falls back to another backend.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import ClassVar

import torch

try:
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
except ImportError:
    # The gate's own environment has no SGLang (it lives in .venv-sglang): there the adapter is
    # unit-tested with hand-built pools (suite/test_sglang_backend.py). SGLang can only ever
    # construct this class where it imports, so there the real base class is used.
    AttentionBackend = object

logger = logging.getLogger(__name__)

MODE_ENV = "TILEGATE_BACKEND_MODE"
MODES = ("kernel", "reference")
MARKER_DIR_ENV = "TILEGATE_SGLANG_MARKER_DIR"
# The gate's proof that its end-to-end comparison can fail: in reference mode only, "scale"
# plants a wrong softmax scale (x1.25); "stale_kv" an off-by-one decode length (each decode
# query attends to every key but its own, the one just written: a paged-cache bookkeeping bug).
# Logged as a warning and recorded in the marker file. Value: (scale factor, decode length shift).
PLANTED_BUG_ENV = "TILEGATE_BACKEND_PLANTED_BUG"
PLANTED_BUGS = {"scale": (1.25, 0), "stale_kv": (1.0, 1)}
# Head dims with a tile config (kernels/configs.py): Llama-3's 128, and 64.
SUPPORTED_HEAD_DIMS = (64, 128)


class UnsupportedByTileLangBackend(ValueError):
    """The model or batch needs something tilegate's TileLang kernels do not implement."""


def resolve_mode(environ=os.environ, cuda_available: bool | None = None) -> tuple[str, str]:
    """(mode, why). An unknown value of TILEGATE_BACKEND_MODE is an error, never a guess."""
    asked = environ.get(MODE_ENV, "").strip().lower()
    if asked:
        if asked not in MODES:
            raise ValueError(f"{MODE_ENV}={asked!r}: expected one of {', '.join(MODES)}")
        return asked, f"{MODE_ENV}={asked}"
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if cuda_available:
        return "kernel", f"{MODE_ENV} unset and a GPU is present"
    return "reference", f"{MODE_ENV} unset and no GPU: the FP32 torch reference stands in for the kernels"


def check_head_config(*, q_heads: int, kv_heads: int, qk_head_dim: int, v_head_dim: int, where: str) -> None:
    """Raise UnsupportedByTileLangBackend for shapes the kernels have no config for."""
    if qk_head_dim != v_head_dim:
        raise UnsupportedByTileLangBackend(
            f"{where}: qk_head_dim {qk_head_dim} != v_head_dim {v_head_dim} (MLA-style attention) is not "
            "supported by the tilelang backend")
    if qk_head_dim not in SUPPORTED_HEAD_DIMS:
        raise UnsupportedByTileLangBackend(
            f"{where}: head_dim {qk_head_dim} has no TileLang tile config "
            f"(supported: {', '.join(map(str, SUPPORTED_HEAD_DIMS))})")
    if kv_heads <= 0 or q_heads % kv_heads:
        raise UnsupportedByTileLangBackend(
            f"{where}: GQA ratio {q_heads}:{kv_heads} does not divide (query heads must be a multiple of KV heads)")


def check_model_runner(model_runner) -> None:
    """Everything the model runner already tells about the attention we would serve."""
    mc = model_runner.model_config
    if getattr(model_runner, "use_mla_backend", False):
        raise UnsupportedByTileLangBackend("the model uses MLA attention: not supported by the tilelang backend")
    if getattr(mc, "is_encoder_decoder", False):
        raise UnsupportedByTileLangBackend(
            "encoder-decoder model (cross attention): not supported by the tilelang backend")
    window = getattr(model_runner, "sliding_window_size", None)
    if window is not None and window > 0:
        raise UnsupportedByTileLangBackend(
            f"sliding-window attention (window {window}): not supported by the tilelang backend")
    if getattr(model_runner, "is_hybrid_swa", False) or getattr(mc, "is_hybrid_swa", False):
        raise UnsupportedByTileLangBackend("hybrid sliding-window model: not supported by the tilelang backend")
    tp = getattr(model_runner, "tp_size", 1) or 1
    check_head_config(
        q_heads=max(1, mc.num_attention_heads // tp),
        kv_heads=mc.get_num_kv_heads(tp),
        qk_head_dim=mc.head_dim,
        v_head_dim=getattr(mc, "v_head_dim", None) or mc.head_dim,
        where="model",
    )


class _ReferenceOps:
    """The kernels' contract in FP32 torch (tilegate.references.paged)."""

    def __init__(self):
        from tilegate.references.paged import ref_paged_decode, ref_paged_extend

        self._extend, self._decode = ref_paged_extend, ref_paged_decode

    def extend(self, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens, scale):
        return self._extend(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens,
                            scale=scale).to(q.dtype)

    def decode(self, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale):
        return self._decode(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale=scale).to(q.dtype)


class _KernelOps:
    """tilegate's TileLang paged kernels (tilegate.kernels.paged)."""

    def __init__(self):
        from tilegate.kernels import paged

        self._paged = paged

    def extend(self, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens, scale):
        return self._paged.paged_extend(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, extend_lens,
                                        scale)

    def decode(self, q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale):
        return self._paged.paged_decode(q, k_pool, v_pool, req_to_token, req_pool_indices, seq_lens, scale)


class TileLangAttnBackend(AttentionBackend):
    """SGLang backend over tilegate's paged extend/decode (kernel mode) or their FP32 reference."""

    name = "tilelang"

    def __init__(self, model_runner, *, mode: str | None = None):
        super().__init__()
        check_model_runner(model_runner)
        if mode is None:
            mode, why = resolve_mode()
        elif mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        else:
            why = "passed by the caller"
        self.mode = mode
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.ops = _KernelOps() if mode == "kernel" else _ReferenceOps()
        self.planted_bug = os.environ.get(PLANTED_BUG_ENV) or None
        self._scale_factor, self._decode_len_shift = 1.0, 0
        if self.planted_bug:
            if mode != "reference" or self.planted_bug not in PLANTED_BUGS:
                raise ValueError(f"{PLANTED_BUG_ENV}={self.planted_bug!r}: only "
                                 f"{', '.join(PLANTED_BUGS)} in reference mode")
            self._scale_factor, self._decode_len_shift = PLANTED_BUGS[self.planted_bug]
            logger.warning("tilelang attention backend: PLANTED BUG %r (a self-test of the gate)", self.planted_bug)
        self.forward_metadata = None
        self._checked_layers: set[int] = set()
        self.calls = {"extend": 0, "decode": 0}
        (logger.info if mode == "kernel" else logger.warning)(
            "tilelang attention backend: %s mode (%s)", mode, why)
        self._marker({"event": "constructed", "mode": mode, "why": why, "class": type(self).__qualname__,
                      "module": type(self).__module__, "planted_bug": self.planted_bug})

    # -- bookkeeping -------------------------------------------------------------------------

    def _marker(self, record: dict) -> None:
        folder = os.environ.get(MARKER_DIR_ENV)
        if not folder:
            return
        record = {**record, "pid": os.getpid(), "ppid": os.getppid(), "time": time.time()}
        with open(os.path.join(folder, f"backend-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")

    def _count(self, kind: str) -> None:
        self.calls[kind] += 1
        if self.calls[kind] == 1:
            self._marker({"event": f"first-{kind}", "mode": self.mode})

    def _check_layer(self, layer) -> None:
        if layer.layer_id in self._checked_layers:
            return
        where = f"layer {layer.layer_id}"
        if getattr(layer, "is_cross_attention", False):
            raise UnsupportedByTileLangBackend(f"{where}: cross attention is not supported by the tilelang backend")
        attn_type = getattr(layer, "attn_type", None)
        if attn_type is not None and getattr(attn_type, "name", str(attn_type)) != "DECODER":
            raise UnsupportedByTileLangBackend(
                f"{where}: attention type {getattr(attn_type, 'name', attn_type)} is not supported "
                "(the tilelang backend serves causal decoder self-attention)")
        window = getattr(layer, "sliding_window_size", None)
        if window is not None and window > -1:
            raise UnsupportedByTileLangBackend(
                f"{where}: sliding window {window} is not supported by the tilelang backend")
        cap = getattr(layer, "logit_cap", 0) or 0
        if cap > 0:
            raise UnsupportedByTileLangBackend(f"{where}: logit soft-capping ({cap}) is not supported")
        check_head_config(q_heads=layer.tp_q_head_num, kv_heads=layer.tp_k_head_num,
                          qk_head_dim=layer.qk_head_dim, v_head_dim=layer.v_head_dim, where=where)
        self._checked_layers.add(layer.layer_id)

    # Forward modes each entry point serves; speculative (TARGET_VERIFY, DRAFT_EXTEND*),
    # diffusion-LM and split-prefill batches are refused.
    SERVED_MODES: ClassVar[dict[str, tuple[str, ...]]] = {"extend": ("EXTEND", "MIXED"), "decode": ("DECODE",)}

    @classmethod
    def _check_mode(cls, forward_batch, kind: str) -> None:
        fm = forward_batch.forward_mode
        name = getattr(fm, "name", str(fm))
        if name not in cls.SERVED_MODES[kind]:
            raise UnsupportedByTileLangBackend(
                f"forward mode {name} is not supported by the tilelang backend's {kind} "
                f"(serves {', '.join(cls.SERVED_MODES[kind])})")
        if getattr(forward_batch, "encoder_lens", None) is not None:
            raise UnsupportedByTileLangBackend("batch carries encoder_lens (encoder-decoder): not supported")

    # -- SGLang's interface ---------------------------------------------------------------------

    def init_forward_metadata(self, forward_batch):
        """Nothing to precompute: the kernels read req_to_token and seq_lens directly."""
        self.forward_metadata = None

    def _write_kv(self, layer, forward_batch, k, v, save_kv_cache: bool) -> None:
        if save_kv_cache and k is not None and v is not None:
            self.token_to_kv_pool.set_kv_buffer(layer, _write_loc(forward_batch), k, v)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward("extend", q, k, v, layer, forward_batch, save_kv_cache)

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward("decode", q, k, v, layer, forward_batch, save_kv_cache)

    def _forward(self, kind: str, q, k, v, layer, forward_batch, save_kv_cache: bool):
        """Write the new K/V into the pool, then attend over each request's whole context in it."""
        self._check_layer(layer)
        self._check_mode(forward_batch, kind)
        self._count(kind)
        self._write_kv(layer, forward_batch, k, v, save_kv_cache)
        q3 = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
        pools = (self.token_to_kv_pool.get_key_buffer(layer.layer_id),
                 self.token_to_kv_pool.get_value_buffer(layer.layer_id),
                 self.req_to_token_pool.req_to_token, forward_batch.req_pool_indices)
        scale = layer.scaling * self._scale_factor
        if kind == "extend":
            out = self.ops.extend(q3, *pools, forward_batch.seq_lens, forward_batch.extend_seq_lens, scale)
        else:
            out = self.ops.decode(q3, *pools, forward_batch.seq_lens - self._decode_len_shift, scale)
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
