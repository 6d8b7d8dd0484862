"""Loading K/V tiles from SGLang's token pool through req_to_token, shared by extend and decode.

A block's pool slots are read once into shared memory, then each tile row is gathered by its
slot. Positions past the block's limit get slot -1 and a zero row: the caller masks their
scores, and nothing past a request's context is read. Reading the slots once, instead of
re-indexing req_to_token in every element of the K and V gathers, also keeps TileLang's
simplifier from working through the nested index (paged extend lowered 3x faster).
"""

import tilelang.language as T

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
