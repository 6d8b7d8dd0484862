"""Loading K/V tiles from SGLang's token pool through req_to_token, shared by extend and decode.

A block's pool slots are read once into shared memory, then each tile row is gathered by its
slot. Positions past the block's limit get slot -1 and a zero row: the caller masks their
scores, and nothing past a request's context is read. Reading the slots once, instead of
re-indexing req_to_token in every element of the K and V gathers, also keeps TileLang's
simplifier from working through the nested index (paged extend lowered 3x faster).
"""

import tilelang.language as T

from tilegate.kernels.online_softmax import store_transposed

NO_SLOT = -1


@T.macro
def load_slots(req_to_token, req, first, limit, slots):
    """``slots[n]`` = the pool slot of context position ``first + n``, or NO_SLOT at ``limit`` and past."""
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
def start_kv_prefetch(req_to_token, req, first, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next, v_next):
    """Block 0 (context positions from ``first``) into ``k_next``/``v_next``; block 1's slots into ``slots_ahead``."""
    load_slots(req_to_token, req, first, limit, slots)
    gather_kv(k_pool, v_pool, slots, kv_head, k_next, v_next)
    load_slots(req_to_token, req, first + slots.shape[0], limit, slots_ahead)


@T.macro
def advance_kv_prefetch(req_to_token, req, next_first, limit, slots, slots_ahead, k_pool, v_pool, kv_head, k_next,
                        v_next):
    """The next block (from ``next_first``, its slots already in ``slots_ahead``) into ``k_next``/``v_next``;
    the block after it's slots into ``slots_ahead``."""
    T.copy(slots_ahead, slots)
    gather_kv(k_pool, v_pool, slots, kv_head, k_next, v_next)
    load_slots(req_to_token, req, next_first + slots.shape[0], limit, slots_ahead)
