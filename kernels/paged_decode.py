"""Paged decode (flash-decoding) as two pure TileLang factories.

One query token per request, at its last context position. K and V are gathered from
SGLang's token pools through req_to_token. Each request's context is cut into at most
``splits`` chunks processed in parallel, ``splits`` being the launch's (the partial outputs'
third dimension, chosen per batch by tilegate.serving.decode_schedule); a chunk holds whole key
blocks, so a short context uses fewer splits and the rest exit at once. Each split writes a
partial output and its log-sum-exp (base 2) in fp32, and a second kernel combines them in fp32;
a launch of one split writes the output itself, and no combine runs.
"""

# No `from __future__ import annotations`: TileLang evaluates the T.Tensor hints.
import tilelang.language as T

from tilegate.kernels.configs import DecodeConfig
from tilegate.kernels.hooks import CombineKnobs, require
from tilegate.kernels.online_softmax import (
    FP32,
    accumulate_pv,
    alloc_softmax_state,
    alloc_v_tile,
    qk_scores,
    reset_softmax_state,
    scale_log2,
    softmax_update,
    stage_v_tile,
)
from tilegate.kernels.paged_gather import (
    advance_kv_prefetch,
    gather_rows,
    gather_v_tile,
    load_slots,
    start_kv_prefetch,
)
from tilegate.kernels.problem import AttentionShape

INDEX = "int32"


def paged_decode_split(
    shape: AttentionShape, cfg: DecodeConfig, *, softmax_scale: float | None = None
):
    """Partial attention per (request, KV head, split): O_part [b, hq, splits, d], LSE [b, hq,
    splits]; with one split, Out [b, hq, d] itself (O_part and LSE untouched).
    ``softmax_scale`` defaults to head_dim^-1/2."""
    groups, head_dim, dtype = shape.groups, shape.head_dim, shape.dtype
    block_h, block_n = cfg.block_h(shape), cfg.block_n
    log2_scale = scale_log2(head_dim, softmax_scale)
    policy = T.GemmWarpPolicy.FullCol  # 16 rows: split the key / head_dim columns across waves
    qk = qk_scores(policy)
    update = softmax_update(log2_scale)
    accumulate = accumulate_pv(FP32, policy, cfg.v_transposed)
    gather_v = gather_v_tile(cfg.v_transposed)
    stage_v = stage_v_tile(cfg.v_transposed)

    batch, pool, max_reqs, max_ctx, splits = T.dynamic(
        "batch, pool_tokens, max_reqs, max_context, splits"
    )

    @T.prim_func
    def paged_decode_split_kernel(
        Q: T.Tensor([batch, shape.q_heads, head_dim], dtype),
        K_pool: T.Tensor([pool, shape.kv_heads, head_dim], dtype),
        V_pool: T.Tensor([pool, shape.kv_heads, head_dim], dtype),
        req_to_token: T.Tensor([max_reqs, max_ctx], INDEX),
        req_pool_indices: T.Tensor([batch], INDEX),
        seq_lens: T.Tensor([batch], INDEX),
        O_part: T.Tensor([batch, shape.q_heads, splits, head_dim], FP32),
        LSE: T.Tensor([batch, shape.q_heads, splits], FP32),
        Out: T.Tensor([batch, shape.q_heads, head_dim], dtype),
    ):
        with T.Kernel(batch, shape.kv_heads, splits, threads=cfg.threads) as (b, kv_head, split):
            q_tile = T.alloc_shared([block_h, head_dim], dtype)
            k_tile = T.alloc_shared([block_n, head_dim], dtype)
            v_tile, v_regs = alloc_v_tile(block_n, head_dim, dtype, cfg.v_transposed)
            slots = T.alloc_shared([block_n], INDEX)
            # P through shared memory: with the columns split across waves, every wave needs all of
            # P.
            scores, probs, out_acc, row_max, row_max_prev, rescale, block_sum, row_sum = (
                alloc_softmax_state(block_h, block_n, head_dim, dtype, probs_in_shared=True)
            )

            req = req_pool_indices[b]
            ctx = seq_lens[b]
            # whole key blocks per split: the last split holding keys may be short, the ones after
            # it are empty
            chunk = T.ceildiv(T.ceildiv(ctx, splits), block_n) * block_n
            start = split * chunk
            stop = T.min(start + chunk, ctx)
            n_blocks = T.ceildiv(T.max(stop - start, 0), block_n)

            for h, d in T.Parallel(block_h, head_dim):  # rows past the group are padding
                q_tile[h, d] = T.if_then_else(h < groups, Q[b, kv_head * groups + h, d], 0)
            reset_softmax_state(out_acc, row_sum, row_max)

            if cfg.prefetch_kv:
                k_next = T.alloc_fragment([block_n, head_dim], dtype)
                v_next = T.alloc_fragment([block_n, head_dim], dtype)
                slots_ahead = T.alloc_fragment([block_n], INDEX)
                start_kv_prefetch(
                    req_to_token,
                    req,
                    start,
                    stop,
                    slots,
                    slots_ahead,
                    K_pool,
                    V_pool,
                    kv_head,
                    k_next,
                    v_next,
                )
                for kb in T.serial(n_blocks):
                    T.copy(k_next, k_tile)
                    stage_v(v_next, v_tile)
                    # in flight while this block computes; past the last block, every slot is
                    # NO_SLOT and nothing is read
                    advance_kv_prefetch(
                        req_to_token,
                        req,
                        start + (kb + 1) * block_n,
                        stop,
                        slots,
                        slots_ahead,
                        K_pool,
                        V_pool,
                        kv_head,
                        k_next,
                        v_next,
                    )
                    for h, n in T.Parallel(block_h, block_n):
                        scores[h, n] = T.if_then_else(
                            start + kb * block_n + n < stop, 0, -T.infinity(FP32)
                        )
                    qk(q_tile, k_tile, scores)
                    update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
                    accumulate(probs, v_tile, out_acc, rescale, None, None)
            else:
                for kb in T.Pipelined(n_blocks, num_stages=cfg.num_stages):
                    load_slots(req_to_token, req, start + kb * block_n, stop, slots)
                    gather_rows(K_pool, slots, kv_head, k_tile)
                    for h, n in T.Parallel(block_h, block_n):
                        scores[h, n] = T.if_then_else(
                            start + kb * block_n + n < stop, 0, -T.infinity(FP32)
                        )
                    qk(q_tile, k_tile, scores)
                    update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
                    gather_v(V_pool, slots, kv_head, v_tile, v_regs)
                    accumulate(probs, v_tile, out_acc, rescale, None, None)

            if splits == 1:  # the whole context: the output itself (ctx >= 1, so row_sum > 0)
                for h, d in T.Parallel(block_h, head_dim):
                    if h < groups:
                        Out[b, kv_head * groups + h, d] = T.cast(out_acc[h, d] / row_sum[h], dtype)
            else:
                # An empty split (short context) leaves row_sum 0: output 0, LSE -inf, weight 0.
                for h, d in T.Parallel(block_h, head_dim):
                    if h < groups:
                        O_part[b, kv_head * groups + h, split, d] = T.if_then_else(
                            row_sum[h] > 0, out_acc[h, d] / row_sum[h], 0
                        )
                for h in T.Parallel(block_h):
                    if h < groups:
                        LSE[b, kv_head * groups + h, split] = T.if_then_else(
                            row_sum[h] > 0,
                            T.log2(row_sum[h]) + row_max[h] * log2_scale,
                            -T.infinity(FP32),
                        )

    return paged_decode_split_kernel


def split_weighting(splits: int, *, drop_smallest_split: bool = False):
    """A macro returning the weight the combination gives split ``s`` (of ``splits``), from its
    softmax weight ``w``: ``w`` itself, or (drop_smallest_split) 0 for the last split that holds
    keys. It returns a value, rather than folding the split in, so that no alloc_var crosses a
    macro boundary (TileLang passes those by value)."""

    @T.macro
    def weight(w, LSE, b, h, s):
        return w

    @T.macro
    def weight_unless_smallest(w, LSE, b, h, s):
        last = (s == splits - 1) | (LSE[b, h, T.min(s + 1, splits - 1)] == -T.infinity(FP32))
        return T.if_then_else(last & (LSE[b, h, s] > -T.infinity(FP32)), 0, w)

    return weight_unless_smallest if drop_smallest_split else weight


def paged_decode_combine(
    shape: AttentionShape, cfg: DecodeConfig, *, knobs: CombineKnobs | None = None
):
    """Out[b, h, :] = sum_s 2^(LSE_s - max) O_s / sum_s 2^(LSE_s - max), in fp32, over the
    ``cfg.num_splits`` splits of the launch (tilegate.serving.paged passes the launch's count as
    cfg.num_splits). One thread per d.
    ``knobs`` change its hook (kernels/hooks.py; the gate's planted defects only)."""
    knobs = CombineKnobs() if knobs is None else knobs
    require(knobs, CombineKnobs, "paged_decode_combine")
    # a static split count (the launch's, a power of two: one build per count used), so that the
    # loops over the splits unroll and their loads overlap
    head_dim, dtype, splits = shape.head_dim, shape.dtype, cfg.num_splits
    split_weight = split_weighting(splits, drop_smallest_split=knobs.drop_smallest_split)
    batch = T.dynamic("batch")

    @T.prim_func
    def paged_decode_combine_kernel(
        O_part: T.Tensor([batch, shape.q_heads, splits, head_dim], FP32),
        LSE: T.Tensor([batch, shape.q_heads, splits], FP32),
        Out: T.Tensor([batch, shape.q_heads, head_dim], dtype),
    ):
        with T.Kernel(batch, shape.q_heads, threads=head_dim) as (b, h):
            d = T.get_thread_binding(0)
            lse_max = T.alloc_var(FP32, init=-T.infinity(FP32))
            weight_sum = T.alloc_var(FP32, init=0)
            acc = T.alloc_var(FP32, init=0)
            for s in T.serial(splits):
                lse_max = T.max(lse_max, LSE[b, h, s])
            for s in T.serial(splits):
                # split 0 is never empty, so lse_max is finite
                w = split_weight(T.exp2(LSE[b, h, s] - lse_max), LSE, b, h, s)
                weight_sum += w
                acc += w * O_part[b, h, s, d]
            Out[b, h, d] = T.cast(acc / weight_sum, dtype)

    return paged_decode_combine_kernel
