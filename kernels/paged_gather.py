"""Loading K/V tiles from SGLang's token pool through req_to_token, shared by extend and decode.

A block's pool slots are read once into shared memory, then each tile row is gathered by its
slot. Positions past the block's limit get slot -1 and a zero row: the caller masks their
scores, and nothing past a request's context is read. Reading the slots once, instead of
re-indexing req_to_token in every element of the K and V gathers, also keeps TileLang's
simplifier from working through the nested index (paged extend lowered 3x faster).
"""

import tilelang.language as T

from tilegate.kernels.configs import PRODUCER_THREADS
from tilegate.kernels.online_softmax import store_transposed
from tilegate.kernels.problem import dtype_bytes

NO_SLOT = -1


@T.macro
def load_slots(req_to_token, req, first, limit, slots):
    """``slots[n]`` = the pool slot of context position ``first + n``, or NO_SLOT at ``limit``
    and past."""
    for n in T.Parallel(slots.shape[0]):
        pos = first + n
        slots[n] = T.if_then_else(pos < limit, req_to_token[req, pos], NO_SLOT)


@T.macro
def gather_rows(pool, slots, kv_head, tile):
    """``tile[n, :]`` = ``pool[slots[n], kv_head, :]``; zero where the slot is NO_SLOT."""
    for n, d in T.Parallel(tile.shape[0], tile.shape[1]):
        tile[n, d] = T.if_then_else(slots[n] != NO_SLOT, pool[slots[n], kv_head, d], 0)


def gather_v_tile(transposed: bool):
    """A macro gathering one key block's V rows into ``v_tile``: as gathered, or (``transposed``,
    gfx942) through the registers ``v_regs`` into a [head_dim, block_n] tile (alloc_v_tile)."""

    @T.macro
    def gather_v(v_pool, slots, kv_head, v_tile, v_regs):
        if transposed:
            gather_rows(v_pool, slots, kv_head, v_regs)
            store_transposed(v_regs, v_tile)
        else:
            gather_rows(v_pool, slots, kv_head, v_tile)

    return gather_v


# Prefetching (configs with prefetch_kv): block kb + 1's K and V rows are gathered into registers
# while block kb computes, and block kb + 2's slots are read a block earlier still, so that neither
# the slot read nor the row gather waits in line with the matrix products.


@T.macro
def gather_kv(k_pool, v_pool, slots, kv_head, k_dst, v_dst):
    gather_rows(k_pool, slots, kv_head, k_dst)
    gather_rows(v_pool, slots, kv_head, v_dst)


@T.macro
def gather_next_kv(
    req_to_token,
    req,
    next_first,
    limit,
    slots,
    slots_ahead,
    k_pool,
    v_pool,
    kv_head,
    k_next,
    v_next,
):
    """The block from ``next_first`` (its slots already in ``slots``) into ``k_next``/``v_next``;
    the block after it's slots into ``slots_ahead``."""
    gather_kv(k_pool, v_pool, slots, kv_head, k_next, v_next)
    load_slots(req_to_token, req, next_first + slots.shape[0], limit, slots_ahead)


@T.macro
def start_kv_prefetch(
    req_to_token, req, first, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
):
    """Block 0 (context positions from ``first``) into ``k_next``/``v_next``; block 1's slots
    into ``slots_ahead``."""
    load_slots(req_to_token, req, first, limit, slots)
    gather_next_kv(
        req_to_token, req, first, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next
    )


@T.macro
def advance_kv_prefetch(
    req_to_token,
    req,
    next_first,
    limit,
    slots,
    slots_ahead,
    k_pool,
    v_pool,
    kv_head,
    k_next,
    v_next,
):
    """The next block (from ``next_first``, its slots already in ``slots_ahead``) into
    ``k_next``/``v_next``; the block after it's slots into ``slots_ahead``."""
    T.copy(slots_ahead, slots)
    gather_next_kv(
        req_to_token,
        req,
        next_first,
        limit,
        slots,
        slots_ahead,
        k_pool,
        v_pool,
        kv_head,
        k_next,
        v_next,
    )


# A gathering producer warpgroup (configs with gather_warpgroup, sm90). Its PRODUCER_THREADS threads
# gather block kb's K rows and then its V rows by cp.async into shared stage kb % stages, each row
# 16 bytes a thread by ROW_LANES threads (128 contiguous bytes per row and pass; head_dim 64 and
# 128, the only ones AttentionShape takes, are whole passes). Each cp.async batch arrives on the
# stage's ready barrier when it lands (.noinc: one arrival per producer thread); the consumers
# arrive on its free barrier when their matrix product has read it. Rows at ``limit`` and past are
# zero-filled (cp.async with no source bytes): nothing past a request's context is read.
ROW_LANES = 8
CP_ASYNC_BYTES = 16


@T.macro
def gather_stage(pool, slots, kv_head, tiles, stage, first, limit, lane):
    """Rows ``first + lane // ROW_LANES + r * rows_per_pass`` of ``pool`` (their slots in
    ``slots[r]``) into
    ``tiles[stage]``, by cp.async."""
    _, block_n, head_dim = tiles.shape
    vec = CP_ASYNC_BYTES // dtype_bytes(str(pool.dtype))
    rows_per_pass = PRODUCER_THREADS // ROW_LANES
    for r in T.serial(block_n // rows_per_pass):
        row = r * rows_per_pass + lane // ROW_LANES
        for u in T.serial(head_dim // (ROW_LANES * vec)):
            col = (u * ROW_LANES + lane % ROW_LANES) * vec
            T.ptx_cp_async(
                T.access_ptr(tiles[stage, row, col], "w", vec),
                T.access_ptr(pool[slots[r], kv_head, col], "r", vec),
                vec,
                predicate=first + row < limit,
            )


@T.macro
def produce_kv_stages(
    req_to_token,
    req,
    limit,
    n_blocks,
    k_pool,
    v_pool,
    kv_head,
    k_tiles,
    v_tiles,
    k_ready,
    v_ready,
    k_free,
    v_free,
    lane,
    slots,
):
    """The producer warpgroup's loop (``lane``: its thread's index within it); ``slots`` is a local
    int32 buffer of block_n // (PRODUCER_THREADS // ROW_LANES) entries."""
    stages, block_n, _ = k_tiles.shape
    rows_per_pass = PRODUCER_THREADS // ROW_LANES
    for kb in T.serial(n_blocks):
        stage = kb % stages
        phase = (kb // stages) % 2
        first = kb * block_n
        for r in T.serial(block_n // rows_per_pass):
            pos = first + r * rows_per_pass + lane // ROW_LANES
            slots[r] = T.if_then_else(pos < limit, req_to_token[req, pos], 0)
        # a fresh barrier passes parity 1: the first round waits for nothing
        T.barrier_wait(k_free[stage], phase ^ 1)
        gather_stage(k_pool, slots, kv_head, k_tiles, stage, first, limit, lane)
        T.cp_async_barrier_noinc(k_ready[stage])
        T.barrier_wait(v_free[stage], phase ^ 1)
        gather_stage(v_pool, slots, kv_head, v_tiles, stage, first, limit, lane)
        T.cp_async_barrier_noinc(v_ready[stage])
