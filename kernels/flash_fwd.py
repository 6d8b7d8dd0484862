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
from tilegate.kernels.online_softmax import (
    accumulate_pv,
    alloc_softmax_state,
    alloc_v_tile,
    qk_scores,
    reset_softmax_state,
    scale_log2,
    softmax_update,
    stage_v_tile,
    store_transposed,
    visibility_mask,
)
from tilegate.kernels.problem import AttentionShape

# Planted defects, for the gate's own sensitivity tests only: each is a bug the gate
# must catch. Production callers never pass one.
DEFECTS = (
    "scalar_gemm",  # matrix products as plain loops: no MFMA (ISA tier)
    "wrong_scale",  # softmax scale 1/sqrt(d) * 1.05 (numerics tier)
    "causal_off_by_one",  # each query also sees the next key (numerics tier)
    "drop_last_block",  # the last partial key block is skipped (numerics tier)
    "hang",  # a loop that does not end in any test's lifetime (the GPU tiers' deadline)
    "race",  # no barrier between the output tile's shared-memory writes and other threads' reads (racecheck)
    "read_past_seq_k",  # K tiles read with no bound check: the last partial block reads past seq_k (memcheck)
    "extra_exp",  # P passed through exp2(log2(.)) again: the same values, two more transcendentals a score (perf tier)
    "skip_middle_block",  # the key block in the middle of the context is ignored (end-to-end tier, long prompts)
    "wrong_scale_10pct",  # softmax scale 1/sqrt(d) * 1.1 (end-to-end tier)
    # gfx942's direct store of Out from registers (q_in_registers) leaves the last query row unwritten;
    # configs that store through shared memory (sm90's) are unchanged (numerics tier, gfx942 configs)
    "register_store_skips_last_row",
)

# TileLang inserts the barriers and bound checks these two defects are about; these pass
# configs switch that off for the defect's own build (the planted kernel only; kernels/registry.py).
DEFECT_PASS_CONFIGS = {
    "race": {"tl.disable_thread_storage_sync": True, "tl.disable_tma_lower": True},
    "read_past_seq_k": {"tl.disable_safe_memory_legalize": True},
}


def flash_fwd(shape: AttentionShape, cfg: TileConfig, *, defect: str | None = None):
    """Return the TileLang prim_func for ``shape`` tiled by ``cfg``.

    Softmax statistics and the per-block Q@K^T and P@V products are fp32. The running
    output accumulator and row sum use ``cfg.accum_dtype``: fp32 normally; fp16 only in
    the variant that exists so the gate can prove it catches fp16 accumulation.
    ``defect`` plants one of DEFECTS (sensitivity tests only).
    """
    if defect is not None and defect not in DEFECTS:
        raise ValueError(f"unknown defect {defect!r}: known {DEFECTS}")
    scalar_gemm = defect == "scalar_gemm"
    block_m, block_n, head_dim = cfg.block_m, cfg.block_n, shape.head_dim
    groups, causal = shape.groups, shape.causal
    dtype, acc = shape.dtype, cfg.accum_dtype
    fp32 = "float32"
    acc16 = acc != fp32
    log2_scale = scale_log2(head_dim)
    if defect in ("wrong_scale", "wrong_scale_10pct"):
        log2_scale *= 1.05 if defect == "wrong_scale" else 1.10
    sees_next_key = 1 if defect == "causal_off_by_one" else 0
    drop_last = defect == "drop_last_block"
    hang = defect == "hang"
    race = defect == "race"
    unguarded_k = defect == "read_past_seq_k"
    extra_exp = defect == "extra_exp"
    skip_middle = defect == "skip_middle_block"
    last_row = 1 if defect == "register_store_skips_last_row" else 0

    policy = T.GemmWarpPolicy.FullRow
    qk = qk_scores(scalar_gemm, policy)
    update = softmax_update(log2_scale)
    accumulate = accumulate_pv(acc, scalar_gemm, policy, cfg.v_transposed)
    stage_v = stage_v_tile(cfg.v_transposed)

    mask_scores = visibility_mask(block_m, block_n, causal, skip_middle)

    @T.macro
    def load_k(K, b, kv_head, kb, dst):
        """Key block ``kb`` of K into ``dst`` (LDS, or registers when prefetching)."""
        if unguarded_k:  # element by element, so no bulk copy clips the tail block
            for i, j in T.Parallel(block_n, head_dim):
                dst[i, j] = K[b, kb * block_n + i, kv_head, j]
        else:
            T.copy(K[b, kb * block_n : (kb + 1) * block_n, kv_head, :], dst)

    @T.macro
    def block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state):
        """Block ``kb``'s masked scores folded into the running statistics; P left in ``probs``."""
        scores, probs, _, row_max, row_max_prev, rescale, block_sum, row_sum = state
        mask_scores(scores, kb, seq_k, first_row_key, key_blocks)
        qk(q_tile, k_tile, scores)
        update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum)
        if extra_exp:  # exp, the softmax's bottleneck on sm90 (special-function units), twice more
            for i, j in T.Parallel(block_m, block_n):
                probs[i, j] = T.cast(T.exp2(T.log2(T.cast(probs[i, j], fp32))), dtype)

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
            q_tile = (T.alloc_fragment if cfg.q_in_registers else T.alloc_shared)([block_m, head_dim], dtype)
            k_tile = T.alloc_shared([block_n, head_dim], dtype)
            v_tile, v_regs = alloc_v_tile(block_n, head_dim, dtype, cfg.v_transposed)
            # Out goes through shared memory (a TMA store on sm90) unless Q stays in registers
            store_via_shared = race or not cfg.q_in_registers
            o_tile = T.alloc_shared([block_m, head_dim], dtype) if store_via_shared else None
            state = alloc_softmax_state(block_m, block_n, head_dim, dtype, acc)
            scores, probs, out_acc, row_max, row_max_prev, rescale, block_sum, row_sum = state
            block_out = T.alloc_fragment([block_m, head_dim], fp32) if acc16 else None
            p_tile = T.alloc_shared([block_m, block_n], dtype) if scalar_gemm else None

            kv_head = head // groups
            diagonal = seq_k - seq_q  # bottom-right causal alignment
            T.copy(Q[b, bx * block_m : (bx + 1) * block_m, head, :], q_tile)
            reset_softmax_state(out_acc, row_sum, row_max)

            key_blocks = seq_k // block_n if drop_last else T.ceildiv(seq_k, block_n)
            if causal:
                last_key = (bx + 1) * block_m + diagonal + sees_next_key  # one past the tile's last visible key
                n_blocks = T.min(key_blocks, T.ceildiv(last_key, block_n))
            else:
                n_blocks = key_blocks

            first_row_key = bx * block_m + diagonal + sees_next_key  # the last key row 0 may see
            if cfg.prefetch_kv:
                # block kb + 1's K and V are loaded into registers while block kb computes (gfx942:
                # TileLang pipelines no copies there); each is written to LDS at the top of its turn
                k_next = T.alloc_fragment([block_n, head_dim], dtype)
                v_next = T.alloc_fragment([block_n, head_dim], dtype)
                load_k(K, b, kv_head, 0, k_next)
                T.copy(V[b, 0:block_n, kv_head, :], v_next)
                for kb in T.serial(n_blocks):
                    T.copy(k_next, k_tile)
                    stage_v(v_next, v_tile)
                    if kb + 1 < n_blocks:
                        load_k(K, b, kv_head, kb + 1, k_next)
                        T.copy(V[b, (kb + 1) * block_n : (kb + 2) * block_n, kv_head, :], v_next)
                    block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state)
                    accumulate(probs, v_tile, out_acc, rescale, block_out, p_tile)
            else:
                for kb in T.Pipelined(n_blocks, num_stages=cfg.num_stages):
                    load_k(K, b, kv_head, kb, k_tile)
                    block_probs(q_tile, k_tile, kb, seq_k, first_row_key, key_blocks, state)
                    if cfg.v_transposed:
                        T.copy(V[b, kb * block_n : (kb + 1) * block_n, kv_head, :], v_regs)
                        store_transposed(v_regs, v_tile)
                    else:
                        T.copy(V[b, kb * block_n : (kb + 1) * block_n, kv_head, :], v_tile)
                    accumulate(probs, v_tile, out_acc, rescale, block_out, p_tile)

            if hang:  # ~2^60 dependent updates of a value the kernel then stores: never optimised away
                for _spin in T.serial(1 << 30):
                    for _spin2 in T.serial(1 << 30):
                        for i, j in T.Parallel(block_m, head_dim):
                            out_acc[i, j] = out_acc[i, j] * 0.5 + 1.0
            for i, j in T.Parallel(block_m, head_dim):
                out_acc[i, j] /= row_sum[i]
            if race:  # plain shared stores, then each thread reads rows other threads wrote, no barrier between
                for i, j in T.Parallel(block_m, head_dim):
                    o_tile[i, j] = out_acc[i, j]  # type: ignore[index]  # allocated: race stores via shared
                for i, j in T.Parallel(block_m, head_dim):
                    Out[b, bx * block_m + i, head, j] = o_tile[i, j]  # type: ignore[index]
            elif store_via_shared:
                T.copy(out_acc, o_tile)
                T.copy(o_tile, Out[b, bx * block_m : (bx + 1) * block_m, head, :])
            else:
                for i, j in T.Parallel(block_m, head_dim):
                    if bx * block_m + i < seq_q - last_row:
                        Out[b, bx * block_m + i, head, j] = T.cast(out_acc[i, j], dtype)

    return flash_fwd_kernel
