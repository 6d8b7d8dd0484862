"""Flash-attention forward (prefill) as a pure TileLang factory.

Layout [batch, seq, heads, head_dim]. Batch and both sequence lengths are dynamic, so
one compiled kernel serves every length. With ``causal``, the diagonal is aligned
bottom-right: query row i sits at absolute position i + (seq_k - seq_q), as SGLang's
extend places new tokens after a cached prefix. Keys past ``seq_k`` are masked, so
lengths that are not multiples of a block (3782) are exact.
"""

# No `from __future__ import annotations`: TileLang evaluates the T.Tensor hints.

import tilelang.language as T

from tilegate.kernels.configs import TileConfig
from tilegate.kernels.hooks import PrefillKnobs, require
from tilegate.kernels.online_softmax import (
    accumulate_pv,
    alloc_softmax_state,
    alloc_v_tile,
    p_scratch,
    qk_scores,
    reset_softmax_state,
    scale_log2,
    softmax_update,
    stage_v_tile,
    store_transposed,
    visibility_mask,
)
from tilegate.kernels.problem import AttentionShape

# The hooks below are flash_fwd's own steps, each built healthy or, for the gate's sensitivity
# tests, with a planted defect's knobs (kernels/hooks.py): the kernel body never branches on one.


def key_loader(block_n: int, head_dim: int, *, unguarded: bool = False):
    """A macro loading key block ``kb`` of K into ``dst`` (LDS, or registers when prefetching): a
    tile copy, bounded at seq_k, or (``unguarded``: read_past_seq_k) element by element, so that
    no bulk copy clips the tail block."""

    @T.macro
    def load_k(K, b, kv_head, kb, dst):
        T.copy(K[b, kb * block_n : (kb + 1) * block_n, kv_head, :], dst)

    @T.macro
    def load_k_unguarded(K, b, kv_head, kb, dst):
        for i, j in T.Parallel(block_n, head_dim):
            dst[i, j] = K[b, kb * block_n + i, kv_head, j]

    return load_k_unguarded if unguarded else load_k


def key_block_count(block_n: int, *, whole_blocks_only: bool = False):
    """``n_keys`` -> the key blocks that hold them; ``whole_blocks_only`` (drop_last_block) rounds
    down, so that a partial last block is skipped."""
    if whole_blocks_only:
        return lambda n_keys: n_keys // block_n
    return lambda n_keys: T.ceildiv(n_keys, block_n)


def causal_reach(sees_next_key: int = 0):
    """``pos`` -> the last key the query row at diagonal position ``pos`` sees: that key, or the
    ``sees_next_key`` after it too (causal_off_by_one)."""
    return lambda pos: pos + sees_next_key


def window_start(block_n: int, window: int | None, *, rounds_up: bool = False):
    """``first_row_key`` -> the first key block a row tile sees under a sliding ``window`` (its row
    0 sees the earliest key, ``window`` before its diagonal), or None without a window: the loop
    starts at block 0. ``rounds_up`` (window_start_past_tile_edge) starts at the next block
    instead, so a tile whose window opens inside a key block skips that block's visible keys."""
    if window is None:
        return None
    if rounds_up:
        return lambda first_row_key: T.ceildiv(T.max(first_row_key - window, 0), block_n)
    return lambda first_row_key: T.max(first_row_key - window, 0) // block_n


def output_normaliser(rows: int, head_dim: int, *, hang: bool = False):
    """A macro dividing each row of ``out_acc`` by its softmax sum. ``hang`` first spins through
    ~2^60 dependent updates of out_acc, which the kernel then stores: never optimised away."""

    @T.macro
    def normalise(out_acc, row_sum):
        for i, j in T.Parallel(rows, head_dim):
            out_acc[i, j] /= row_sum[i]

    @T.macro
    def spin_then_normalise(out_acc, row_sum):
        for _spin in T.serial(1 << 30):
            for _spin2 in T.serial(1 << 30):
                for i, j in T.Parallel(rows, head_dim):
                    out_acc[i, j] = out_acc[i, j] * 0.5 + 1.0
        normalise(out_acc, row_sum)

    return spin_then_normalise if hang else normalise


def output_store(
    rows: int,
    head_dim: int,
    dtype: str,
    cfg: TileConfig,
    *,
    racy: bool = False,
    unstored_rows: int = 0,
):
    """(whether Out goes through a shared tile ``o_tile``, a macro storing the normalised
    ``out_acc`` into row tile ``bx`` of Out). Out goes through shared memory (a TMA store on sm90)
    unless Q stays in registers, when each thread stores its own rows, less ``unstored_rows`` at
    the end of the sequence (register_store_skips_last_row). ``racy`` (race): shared stores and
    reads of rows other threads wrote, with no barrier between."""

    @T.macro
    def store_through_shared(out_acc, o_tile, Out, b, bx, head, seq_q):
        T.copy(out_acc, o_tile)
        T.copy(o_tile, Out[b, bx * rows : (bx + 1) * rows, head, :])

    @T.macro
    def store_racy(out_acc, o_tile, Out, b, bx, head, seq_q):
        for i, j in T.Parallel(rows, head_dim):
            o_tile[i, j] = out_acc[i, j]
        for i, j in T.Parallel(rows, head_dim):
            Out[b, bx * rows + i, head, j] = o_tile[i, j]

    @T.macro
    def store_from_registers(out_acc, o_tile, Out, b, bx, head, seq_q):
        for i, j in T.Parallel(rows, head_dim):
            if bx * rows + i < seq_q - unstored_rows:
                Out[b, bx * rows + i, head, j] = T.cast(out_acc[i, j], dtype)

    if racy:
        return True, store_racy
    if cfg.q_in_registers:
        return False, store_from_registers
    return True, store_through_shared


def flash_fwd(shape: AttentionShape, cfg: TileConfig, *, knobs: PrefillKnobs | None = None):
    """Return the TileLang prim_func for ``shape`` tiled by ``cfg``.

    Softmax statistics and the per-block Q@K^T and P@V products are fp32. The running
    output accumulator and row sum use ``cfg.accum_dtype``: fp32 normally; fp16 only in
    the variant that exists so the gate can prove it catches fp16 accumulation.
    ``knobs`` change its hooks (kernels/hooks.py; the gate's planted defects only).
    """
    knobs = PrefillKnobs() if knobs is None else knobs
    require(knobs, PrefillKnobs, "flash_fwd")
    block_m, block_n, head_dim = cfg.block_m, cfg.block_n, shape.head_dim
    groups, causal = shape.groups, shape.causal
    dtype, acc = shape.dtype, cfg.accum_dtype
    fp32 = "float32"
    acc16 = acc != fp32
    log2_scale = scale_log2(head_dim) * knobs.scale_factor

    policy = T.GemmWarpPolicy.FullRow
    qk = qk_scores(policy, scalar_loops=knobs.scalar_gemm)
    # under a sliding window, the first block a tile loads holds keys its first rows see only
    update = softmax_update(log2_scale, rows_may_see_nothing=shape.window is not None)
    accumulate = accumulate_pv(acc, policy, cfg.v_transposed, scalar_loops=knobs.scalar_gemm)
    alloc_p_tile = p_scratch(knobs.scalar_gemm)
    stage_v = stage_v_tile(cfg.v_transposed)

    mask_scores = visibility_mask(
        block_m, block_n, causal, window=shape.window, skip_middle_block=knobs.skip_middle_block
    )
    first_block_of = window_start(block_n, shape.window, rounds_up=knobs.window_start_rounds_up)
    load_k = key_loader(block_n, head_dim, unguarded=knobs.unguarded_k)
    count_key_blocks = key_block_count(block_n, whole_blocks_only=knobs.whole_key_blocks)
    reach = causal_reach(knobs.sees_next_key)
    normalise = output_normaliser(block_m, head_dim, hang=knobs.hang)
    store_via_shared, store_out = output_store(
        block_m, head_dim, dtype, cfg, racy=knobs.racy_store, unstored_rows=knobs.unstored_last_rows
    )

    @T.macro
    def block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state):
        """Block ``kb``'s masked scores folded into the running statistics; P left in ``probs``."""
        scores, probs, _, row_max, row_max_prev, rescale, block_sum, row_sum = state
        mask_scores(scores, kb, seq_k, first_row_key, key_blocks)
        qk(q_tile, k_tile, scores)
        update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)

    batch, seq_q, seq_k = T.dynamic("batch, seq_q, seq_k")
    q_layout = [batch, seq_q, shape.q_heads, head_dim]
    kv_layout = [batch, seq_k, shape.kv_heads, head_dim]

    @T.prim_func
    def flash_fwd_kernel(
        Q: T.Tensor(q_layout, dtype),
        K: T.Tensor(kv_layout, dtype),
        V: T.Tensor(kv_layout, dtype),
        Out: T.Tensor(q_layout, dtype),
    ):
        # Heads vary fastest, so the query heads of one KV head run side by side (K/V shared in L2);
        # with a causal mask the longest row tiles (the last) are launched first, so that short ones
        # fill the tail of the grid instead of a long one running alone at its end.
        n_tiles = T.ceildiv(seq_q, block_m)
        with T.Kernel(shape.q_heads, n_tiles, batch, threads=cfg.threads) as (head, tile, b):
            bx = n_tiles - 1 - tile if causal else tile
            q_tile = (T.alloc_fragment if cfg.q_in_registers else T.alloc_shared)(
                [block_m, head_dim], dtype
            )
            k_tile = T.alloc_shared([block_n, head_dim], dtype)
            v_tile, v_regs = alloc_v_tile(block_n, head_dim, dtype, cfg.v_transposed)
            o_tile = T.alloc_shared([block_m, head_dim], dtype) if store_via_shared else None
            state = alloc_softmax_state(block_m, block_n, head_dim, dtype, acc)
            scores, probs, out_acc, row_max, row_max_prev, rescale, block_sum, row_sum = state
            block_out = T.alloc_fragment([block_m, head_dim], fp32) if acc16 else None
            p_tile = alloc_p_tile([block_m, block_n], dtype)  # None unless P V reads P from LDS

            kv_head = head // groups
            diagonal = seq_k - seq_q  # bottom-right causal alignment
            T.copy(Q[b, bx * block_m : (bx + 1) * block_m, head, :], q_tile)
            reset_softmax_state(out_acc, row_sum, row_max)

            key_blocks = count_key_blocks(seq_k)
            if causal:
                # one past the tile's last visible key
                last_key = reach((bx + 1) * block_m + diagonal)
                n_blocks = T.min(key_blocks, T.ceildiv(last_key, block_n))
            else:
                n_blocks = key_blocks

            first_row_key = reach(bx * block_m + diagonal)  # the last key row 0 may see
            # without a window every loop starts at 0, as a literal: the lowering stays the same
            first = 0 if first_block_of is None else first_block_of(first_row_key)
            loop = (n_blocks,) if first_block_of is None else (first, n_blocks)
            if cfg.prefetch_kv:
                # block kb + 1's K and V are loaded into registers while block kb computes (gfx942:
                # TileLang pipelines no copies there); each is written to LDS at the top of its turn
                k_next = T.alloc_fragment([block_n, head_dim], dtype)
                v_next = T.alloc_fragment([block_n, head_dim], dtype)
                load_k(K, b, kv_head, first, k_next)
                T.copy(V[b, first * block_n : (first + 1) * block_n, kv_head, :], v_next)
                for kb in T.serial(*loop):
                    T.copy(k_next, k_tile)
                    stage_v(v_next, v_tile)
                    if kb + 1 < n_blocks:
                        load_k(K, b, kv_head, kb + 1, k_next)
                        T.copy(V[b, (kb + 1) * block_n : (kb + 2) * block_n, kv_head, :], v_next)
                    block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state)
                    accumulate(probs, v_tile, out_acc, rescale, block_out, p_tile)
            else:
                for kb in T.Pipelined(*loop, num_stages=cfg.num_stages):
                    load_k(K, b, kv_head, kb, k_tile)
                    block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state)
                    if cfg.v_transposed:
                        T.copy(V[b, kb * block_n : (kb + 1) * block_n, kv_head, :], v_regs)
                        store_transposed(v_regs, v_tile)
                    else:
                        T.copy(V[b, kb * block_n : (kb + 1) * block_n, kv_head, :], v_tile)
                    accumulate(probs, v_tile, out_acc, rescale, block_out, p_tile)

            normalise(out_acc, row_sum)
            store_out(out_acc, o_tile, Out, b, bx, head, seq_q)

    return flash_fwd_kernel
