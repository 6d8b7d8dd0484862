"""Paged extend (prefill over a cached prefix) as a pure TileLang factory.

SGLang's extend step: a ragged batch of requests, each with extend_lens[i] new tokens after
seq_lens[i] - extend_lens[i] cached ones. Queries and outputs are packed back to back
[total_tokens, heads, head_dim]; request i's start in them is extend_starts[i]. K and V of
the whole context (new tokens included, already written by the backend) are gathered from
the pools through req_to_token: nothing is copied to a contiguous buffer first. Causal
masks align bottom-right within each request. The per-block math is the prefill kernel's
(kernels/online_softmax.py).

Grid: heads x (tiles of block_m over total_tokens) x requests, heads fastest and a request's last
(longest) row tiles launched first; tiles past a request's own extend length run no key blocks
and store nothing.

Three ways to bring K and V in, by config: gathered in line (gfx942), a block ahead into registers
(prefetch_kv), or by a producer warpgroup into shared stages while the others compute
(gather_warpgroup, sm90; kernels/paged_gather.py).
"""

# No `from __future__ import annotations`: TileLang evaluates the T.Tensor hints.
import tilelang.language as T

from tilegate.kernels.configs import PRODUCER_THREADS, TileConfig
from tilegate.kernels.hooks import ExtendKnobs, require
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
    visibility_mask,
)
from tilegate.kernels.paged_gather import (
    ROW_LANES,
    advance_kv_prefetch,
    gather_next_kv,
    gather_rows,
    gather_v_tile,
    load_slots,
    produce_kv_stages,
    start_kv_prefetch,
)
from tilegate.kernels.problem import AttentionShape

INDEX = "int32"


# setmaxnreg with a producer warpgroup: the producer keeps 24 registers a thread (PTX's least), and
# the consumers share the rest of the SM's 64K, in multiples of 8, at most 240 (as TileLang's own
# warp-specialised prefill: 24 / 160 with three consumer warpgroups).
PRODUCER_REGS, REGISTER_FILE, MAX_REGS = 24, 65536, 240


def consumer_regs(consumer_threads: int) -> int:
    return min(
        MAX_REGS, (REGISTER_FILE - PRODUCER_REGS * PRODUCER_THREADS) // consumer_threads // 8 * 8
    )


@T.macro
def load_q_rows(Q, first, row0, n_new, head, q_tile):
    """Rows ``row0 + i`` of this request's new tokens (zero past ``n_new``)."""
    for i, d in T.Parallel(q_tile.shape[0], q_tile.shape[1]):
        row = row0 + i
        q_tile[i, d] = T.if_then_else(row < n_new, Q[first + row, head, d], 0)


@T.macro
def store_out_rows(out_acc, row_sum, Out, first, row0, n_new, head):
    for i, d in T.Parallel(out_acc.shape[0], out_acc.shape[1]):
        row = row0 + i
        if row < n_new:
            Out[first + row, head, d] = T.cast(out_acc[i, d] / row_sum[i], Out.dtype)


# The hooks below are the steps the gate's knobs change (kernels/hooks.py), each built healthy or
# with a planted defect's knobs: the kernel body never branches on one.


def cached_prefix(prefix_shift: int = 0):
    """(context length, new tokens) -> the cached prefix: the position of the first new token.
    ``prefix_shift`` (prefix_off_by_one) places the tokens after a cached prefix that much late."""
    if prefix_shift:
        return lambda ctx, n_new: T.if_then_else(ctx > n_new, ctx - n_new + prefix_shift, 0)
    return lambda ctx, n_new: ctx - n_new


def staged_qk(qk, *, release_k_early: bool = False):
    """A macro adding Q K^T from K stage ``stage`` to ``scores``, then releasing the stage to the
    producer (``k_free``); ``release_k_early`` (k_stage_released_early) releases it first."""

    @T.macro
    def qk_then_release(q_tile, k_tiles, stage, scores, k_free):
        qk(q_tile, k_tiles[stage, :, :], scores)
        T.barrier_arrive(k_free[stage])

    @T.macro
    def release_then_qk(q_tile, k_tiles, stage, scores, k_free):
        T.barrier_arrive(k_free[stage])
        qk(q_tile, k_tiles[stage, :, :], scores)

    return release_then_qk if release_k_early else qk_then_release


def v_stage_acquire(*, skip_wait: bool = False):
    """A macro making V stage ``stage`` readable by P@V: its ready barrier waited on (phase
    ``phase``), then the async-proxy fence; ``skip_wait`` (v_read_before_ready) only fences."""

    @T.macro
    def wait_then_fence(v_ready, stage, phase):
        T.barrier_wait(v_ready[stage], phase)
        T.fence_proxy_async()

    @T.macro
    def fence_only(v_ready, stage, phase):
        T.fence_proxy_async()

    return fence_only if skip_wait else wait_then_fence


def kv_prefetch(block_n: int, *, own_barriers: bool = False):
    """(start, advance) macros of the register prefetch (configs with prefetch_kv): ``start`` reads
    block 0's slots and gathers it into ``k_next``/``v_next``; ``advance``, at key block ``kb``,
    gathers block kb + 1 while block kb computes. TileLang places the barriers. ``own_barriers``
    (prefetch_overwrites_tile_in_use, built with TileLang's barriers off) places them here, all but
    the one at the top of the key-block loop (block kb's readers are done)."""

    @T.macro
    def start(
        req_to_token, req, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
    ):
        start_kv_prefetch(
            req_to_token, req, 0, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
        )

    @T.macro
    def advance(
        kb,
        n_blocks,
        req_to_token,
        req,
        limit,
        slots,
        slots_ahead,
        k_pool,
        v_pool,
        kv_head,
        k_next,
        v_next,
    ):
        if kb + 1 < n_blocks:  # in flight while this block computes
            advance_kv_prefetch(
                req_to_token,
                req,
                (kb + 1) * block_n,
                limit,
                slots,
                slots_ahead,
                k_pool,
                v_pool,
                kv_head,
                k_next,
                v_next,
            )

    @T.macro
    def start_own_barriers(
        req_to_token, req, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
    ):
        load_slots(req_to_token, req, 0, limit, slots)
        T.sync_threads()
        gather_next_kv(
            req_to_token, req, 0, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
        )

    @T.macro
    def advance_own_barriers(
        kb,
        n_blocks,
        req_to_token,
        req,
        limit,
        slots,
        slots_ahead,
        k_pool,
        v_pool,
        kv_head,
        k_next,
        v_next,
    ):
        if kb + 1 < n_blocks:
            T.copy(slots_ahead, slots)
        T.sync_threads()  # the staged tiles and slots are written
        if kb + 1 < n_blocks:
            gather_next_kv(
                req_to_token,
                req,
                (kb + 1) * block_n,
                limit,
                slots,
                slots_ahead,
                k_pool,
                v_pool,
                kv_head,
                k_next,
                v_next,
            )

    if own_barriers:
        return start_own_barriers, advance_own_barriers
    return start, advance


def _check_knobs(knobs: ExtendKnobs, cfg: TileConfig) -> None:
    """Knobs of a path the config does not take would build the healthy kernel: refused."""
    require(knobs, ExtendKnobs, "paged_extend")
    if (knobs.skip_v_wait or knobs.release_k_early) and not cfg.gather_warpgroup:
        raise ValueError(f"{knobs} changes the producer-warpgroup path: config {cfg.name} has none")
    if knobs.own_barriers and not cfg.prefetch_kv:
        raise ValueError(f"{knobs} changes the register-prefetch path: config {cfg.name} has none")


def paged_extend(
    shape: AttentionShape,
    cfg: TileConfig,
    *,
    softmax_scale: float | None = None,
    knobs: ExtendKnobs | None = None,
):
    """``softmax_scale`` defaults to head_dim^-1/2 (SGLang passes layer.scaling). ``knobs`` change
    its hooks (kernels/hooks.py; the gate's planted defects only)."""
    knobs = ExtendKnobs() if knobs is None else knobs
    _check_knobs(knobs, cfg)
    block_m, block_n, head_dim = cfg.block_m, cfg.block_n, shape.head_dim
    groups, causal, dtype = shape.groups, shape.causal, shape.dtype
    log2_scale = scale_log2(head_dim, softmax_scale)
    policy = T.GemmWarpPolicy.FullRow
    qk = qk_scores(policy)
    update = softmax_update(log2_scale)
    accumulate = accumulate_pv(FP32, policy, cfg.v_transposed)
    prefix_of = cached_prefix(knobs.prefix_shift)
    qk_from_stage = staged_qk(qk, release_k_early=knobs.release_k_early)
    acquire_v = v_stage_acquire(skip_wait=knobs.skip_v_wait)
    start_prefetch, advance_prefetch = kv_prefetch(block_n, own_barriers=knobs.own_barriers)

    # row i sits at context position first_row + i
    mask_scores = visibility_mask(block_m, block_n, causal)
    gather_v = gather_v_tile(cfg.v_transposed)
    stage_v = stage_v_tile(cfg.v_transposed)
    total, batch, pool, max_reqs, max_ctx = T.dynamic(
        "total_tokens, batch, pool_tokens, max_reqs, max_context"
    )
    launched_threads = cfg.threads + (PRODUCER_THREADS if cfg.gather_warpgroup else 0)

    @T.prim_func
    def paged_extend_kernel(
        Q: T.Tensor([total, shape.q_heads, head_dim], dtype),
        K_pool: T.Tensor([pool, shape.kv_heads, head_dim], dtype),
        V_pool: T.Tensor([pool, shape.kv_heads, head_dim], dtype),
        req_to_token: T.Tensor([max_reqs, max_ctx], INDEX),
        req_pool_indices: T.Tensor([batch], INDEX),
        seq_lens: T.Tensor([batch], INDEX),
        extend_lens: T.Tensor([batch], INDEX),
        extend_starts: T.Tensor([batch], INDEX),
        Out: T.Tensor([total, shape.q_heads, head_dim], dtype),
    ):
        # As in flash_fwd: heads fastest, and the longest row tiles (a request's last) launched
        # first.
        n_tiles = T.ceildiv(total, block_m)
        with T.Kernel(shape.q_heads, n_tiles, batch, threads=launched_threads) as (head, tile, b):
            bx = n_tiles - 1 - tile
            q_tile = (T.alloc_fragment if cfg.q_in_registers else T.alloc_shared)(
                [block_m, head_dim], dtype
            )
            if cfg.gather_warpgroup:
                k_tiles = T.alloc_shared([cfg.num_stages, block_n, head_dim], dtype)
                v_tiles = T.alloc_shared([cfg.num_stages, block_n, head_dim], dtype)
                k_ready = T.alloc_barrier([PRODUCER_THREADS] * cfg.num_stages)
                v_ready = T.alloc_barrier([PRODUCER_THREADS] * cfg.num_stages)
                k_free = T.alloc_barrier([cfg.threads] * cfg.num_stages)
                v_free = T.alloc_barrier([cfg.threads] * cfg.num_stages)
                producer_slots = T.alloc_local([block_n * ROW_LANES // PRODUCER_THREADS], INDEX)
            else:
                k_tile = T.alloc_shared([block_n, head_dim], dtype)
                v_tile, v_regs = alloc_v_tile(block_n, head_dim, dtype, cfg.v_transposed)
                slots = T.alloc_shared([block_n], INDEX)
            scores, probs, out_acc, row_max, row_max_prev, rescale, block_sum, row_sum = (
                alloc_softmax_state(block_m, block_n, head_dim, dtype)
            )

            kv_head = head // groups
            req = req_pool_indices[b]
            ctx = seq_lens[b]
            n_new = extend_lens[b]
            first = extend_starts[b]
            # the tile's row i sits at context position prefix + bx * block_m + i
            prefix = prefix_of(ctx, n_new)
            if causal:
                # one past the tile's last visible key
                keys = T.min(ctx, prefix + (bx + 1) * block_m)
            else:
                keys = ctx
            n_blocks = T.if_then_else(bx * block_m < n_new, T.ceildiv(keys, block_n), 0)

            if cfg.gather_warpgroup:
                tx = T.get_thread_binding()
                if tx < cfg.threads:  # the consumer warpgroups
                    T.set_max_nreg(consumer_regs(cfg.threads), 1)
                    load_q_rows(Q, first, bx * block_m, n_new, head, q_tile)
                    reset_softmax_state(out_acc, row_sum, row_max)
                    for kb in T.serial(n_blocks):
                        stage = kb % cfg.num_stages
                        phase = (kb // cfg.num_stages) % 2
                        mask_scores(scores, kb, ctx, prefix + bx * block_m)
                        T.barrier_wait(k_ready[stage], phase)
                        # cp.async wrote the stage; wgmma reads it through the async proxy
                        T.fence_proxy_async()
                        qk_from_stage(q_tile, k_tiles, stage, scores, k_free)
                        update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
                        acquire_v(v_ready, stage, phase)
                        accumulate(probs, v_tiles[stage, :, :], out_acc, rescale, None, None)
                        T.barrier_arrive(v_free[stage])
                    store_out_rows(out_acc, row_sum, Out, first, bx * block_m, n_new, head)
                else:
                    T.set_max_nreg(PRODUCER_REGS, 0)
                    produce_kv_stages(
                        req_to_token,
                        req,
                        ctx,
                        n_blocks,
                        K_pool,
                        V_pool,
                        kv_head,
                        k_tiles,
                        v_tiles,
                        k_ready,
                        v_ready,
                        k_free,
                        v_free,
                        tx - cfg.threads,
                        producer_slots,
                    )
            else:
                load_q_rows(Q, first, bx * block_m, n_new, head, q_tile)
                reset_softmax_state(out_acc, row_sum, row_max)
                if cfg.prefetch_kv:
                    k_next = T.alloc_fragment([block_n, head_dim], dtype)
                    v_next = T.alloc_fragment([block_n, head_dim], dtype)
                    slots_ahead = T.alloc_fragment([block_n], INDEX)
                    # a tile past the request reads nothing
                    first_limit = T.if_then_else(bx * block_m < n_new, ctx, 0)
                    start_prefetch(
                        req_to_token,
                        req,
                        first_limit,
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
                        # block kb + 1 into registers, in flight while this block computes
                        advance_prefetch(
                            kb,
                            n_blocks,
                            req_to_token,
                            req,
                            ctx,
                            slots,
                            slots_ahead,
                            K_pool,
                            V_pool,
                            kv_head,
                            k_next,
                            v_next,
                        )
                        mask_scores(scores, kb, ctx, prefix + bx * block_m)
                        qk(q_tile, k_tile, scores)
                        update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
                        accumulate(probs, v_tile, out_acc, rescale, None, None)
                else:
                    for kb in T.Pipelined(n_blocks, num_stages=cfg.num_stages):
                        load_slots(req_to_token, req, kb * block_n, ctx, slots)
                        gather_rows(K_pool, slots, kv_head, k_tile)
                        mask_scores(scores, kb, ctx, prefix + bx * block_m)
                        qk(q_tile, k_tile, scores)
                        update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
                        gather_v(V_pool, slots, kv_head, v_tile, v_regs)
                        accumulate(probs, v_tile, out_acc, rescale, None, None)
                store_out_rows(out_acc, row_sum, Out, first, bx * block_m, n_new, head)

    return paged_extend_kernel
