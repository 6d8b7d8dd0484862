"""The online-softmax math every attention kernel here shares, as TileLang macros.

A kernel loads its K and V tiles its own way (dense copy, or a gather through SGLang's
req_to_token) and writes 0 / -inf into ``scores`` for visible / masked keys; these macros
do the rest, identically for prefill, extend and decode:

  scores += Q K^T;  running max and sum updated;  P = exp2(scores * scale - max * scale);
  out = out * rescale + P V   (fp32, or fp16 in the variant the gate must catch)
"""

import math
from typing import Any, NamedTuple

import tilelang.language as T

FP32 = "float32"
LOG2E = 1.4426950408889634


def scale_log2(head_dim: int, softmax_scale: float | None = None) -> float:
    """The softmax scale in base 2: exp(x * scale) == exp2(x * scale_log2). Default
    head_dim^-1/2."""
    return LOG2E * (softmax_scale if softmax_scale is not None else 1 / math.sqrt(head_dim))


class SoftmaxState(NamedTuple):
    """A tile's online-softmax state: one key block's scores and P, the output accumulator and
    the per-row running max, previous max, rescale factor, block sum and running sum. Unpack it
    in the kernel body (``scores, probs, ... = alloc_softmax_state(...)``) so that the buffers
    take those names in the lowered code."""

    scores: Any  # a TileLang buffer
    probs: Any  # a TileLang buffer
    out_acc: Any  # a TileLang buffer
    row_max: Any  # a TileLang buffer
    row_max_prev: Any  # a TileLang buffer
    rescale: Any  # a TileLang buffer
    block_sum: Any  # a TileLang buffer
    row_sum: Any  # a TileLang buffer


def alloc_softmax_state(
    rows: int, cols: int, head_dim: int, dtype: str, acc: str = FP32, probs_in_shared: bool = False
) -> SoftmaxState:
    """Allocate the state inside a kernel body. ``acc`` types the output accumulator
    and running sum; P goes through shared memory when every warp needs all of it."""
    alloc_probs = T.alloc_shared if probs_in_shared else T.alloc_fragment
    return SoftmaxState(
        scores=T.alloc_fragment([rows, cols], FP32),
        probs=alloc_probs([rows, cols], dtype),
        out_acc=T.alloc_fragment([rows, head_dim], acc),
        row_max=T.alloc_fragment([rows], FP32),
        row_max_prev=T.alloc_fragment([rows], FP32),
        rescale=T.alloc_fragment([rows], FP32),
        block_sum=T.alloc_fragment([rows], FP32),
        row_sum=T.alloc_fragment([rows], acc),
    )


def visibility_mask(
    rows: int,
    cols: int,
    causal: bool,
    *,
    window: int | None = None,
    skip_middle_block: bool = False,
):
    """A macro writing 0 / -inf into ``scores`` [rows, cols] for key block ``kb``: key
    ``kb * cols + j`` is visible to row i when it is below ``n_keys`` and, ``causal``, at most
    ``first_row_key + i`` (the last key row 0 may see), and, with a ``window``, at least ``window``
    before it (SGLang: q_id <= kv_id + window). ``skip_middle_block`` plants flash_fwd's defect of
    that name (block ``key_blocks // 2`` masked out)."""

    @T.macro
    def mask(scores, kb, n_keys, first_row_key, key_blocks=0):
        for i, j in T.Parallel(rows, cols):
            key = kb * cols + j
            if causal:
                visible = (key < n_keys) & (key <= first_row_key + i)
            else:
                visible = key < n_keys
            if window is not None:
                visible = visible & (key + window >= first_row_key + i)
            if skip_middle_block:
                visible = visible & (kb != key_blocks // 2)
            scores[i, j] = T.if_then_else(visible, 0, -T.infinity(FP32))

    return mask


@T.macro
def reset_softmax_state(out_acc, row_sum, row_max):
    """Before the first key block: nothing accumulated, running max -inf."""
    T.fill(out_acc, 0)
    T.fill(row_sum, 0)
    T.fill(row_max, -T.infinity(FP32))


def qk_scores(policy, *, scalar_loops: bool = False):
    """A macro adding Q K^T to ``scores``: one matrix product, or (``scalar_loops``, flash_fwd's
    scalar_gemm defect) plain loops that use no MFMA."""

    @T.macro
    def qk(q_tile, k_tile, scores):
        T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=policy)

    @T.macro
    def qk_by_loops(q_tile, k_tile, scores):
        for i, j in T.Parallel(scores.shape[0], scores.shape[1]):
            for d in T.serial(q_tile.shape[1]):
                scores[i, j] += T.cast(q_tile[i, d], FP32) * T.cast(k_tile[j, d], FP32)

    return qk_by_loops if scalar_loops else qk


def softmax_update(scale_log2: float, *, rows_may_see_nothing: bool = False):
    """Fold one block of ``scores`` into the running statistics; leaves P in ``scores`` and
    ``probs``. ``rows_may_see_nothing``: a row may have seen no key yet after this block (a
    sliding window's first block holds keys only its first rows see): its max stays -inf, and is
    taken as 0 in the exponents, so that its P and rescale are 0, not exp2(-inf + inf) = NaN."""

    def shift(m):
        return T.if_then_else(m == -T.infinity(FP32), 0, m) if rows_may_see_nothing else m

    @T.macro
    def update(scores, probs, row_max, row_max_prev, rescale, block_sum, row_sum):
        rows, cols = scores.shape
        T.copy(row_max, row_max_prev)
        T.reduce_max(scores, row_max, dim=1, clear=False)
        for i in T.Parallel(rows):
            row_max[i] = T.max(row_max[i], row_max_prev[i])
            rescale[i] = T.exp2(row_max_prev[i] * scale_log2 - shift(row_max[i]) * scale_log2)
        # x * s - m * s: one fused multiply-add per score (m * s is computed once per row)
        for i, j in T.Parallel(rows, cols):
            scores[i, j] = T.exp2(scores[i, j] * scale_log2 - shift(row_max[i]) * scale_log2)
        T.reduce_sum(scores, block_sum, dim=1)
        for i in T.Parallel(rows):
            row_sum[i] = row_sum[i] * rescale[i] + block_sum[i]
        T.copy(scores, probs)

    return update


def alloc_v_tile(block_n: int, head_dim: int, dtype: str, transposed: bool):
    """V's LDS tile, [block_n, head_dim] or, ``transposed``, [head_dim, block_n]; a transposed
    tile is filled from registers (``v_regs``, else None) so the global loads stay 128-bit."""
    if transposed:
        return T.alloc_shared([head_dim, block_n], dtype), T.alloc_fragment(
            [block_n, head_dim], dtype
        )
    return T.alloc_shared([block_n, head_dim], dtype), None


@T.macro
def store_transposed(v_regs, v_tile):
    """``v_tile[d, n] = v_regs[n, d]``: 16-bit LDS writes once per key block, so that P@V reads V
    along its reduction dimension (on gfx942, 64-bit reads instead of 16-bit ones)."""
    for n, d in T.Parallel(v_regs.shape[0], v_regs.shape[1]):
        v_tile[d, n] = v_regs[n, d]


def stage_v_tile(transposed: bool):
    """A macro writing V rows held in registers (``v_regs``, [block_n, head_dim]) into the LDS tile
    alloc_v_tile made: as they are, or ``transposed``."""

    @T.macro
    def stage(v_regs, v_tile):
        if transposed:
            store_transposed(v_regs, v_tile)
        else:
            T.copy(v_regs, v_tile)

    return stage


def p_scratch(scalar_loops: bool = False):
    """How a kernel allocates ``p_tile``, P's shared-memory copy: only accumulate_pv's
    ``scalar_loops`` read one; otherwise there is none (None)."""
    return T.alloc_shared if scalar_loops else _no_buffer


def _no_buffer(shape, dtype):
    return None


def accumulate_pv(
    accum_dtype: str, policy, v_transposed: bool = False, *, scalar_loops: bool = False
):
    """out_acc = out_acc * rescale + P V. ``block_out`` (fp32) is used only when accumulating
    in fp16, ``p_tile`` (p_scratch) only by ``scalar_loops``; pass None otherwise.
    ``v_transposed``: ``v_tile`` is [head_dim, block_n] (alloc_v_tile). ``scalar_loops``
    (flash_fwd's scalar_gemm defect, fp32 accumulation): P V as plain loops, no MFMA."""
    acc16 = accum_dtype != FP32

    @T.macro
    def accumulate(probs, v_tile, out_acc, rescale, block_out, p_tile):
        rows, dim = out_acc.shape
        if acc16:
            T.clear(block_out)
            T.gemm(probs, v_tile, block_out, transpose_B=v_transposed, policy=policy)
            for i, j in T.Parallel(rows, dim):
                out_acc[i, j] = out_acc[i, j] * T.cast(rescale[i], accum_dtype) + T.cast(
                    block_out[i, j], accum_dtype
                )
        else:
            for i, j in T.Parallel(rows, dim):
                out_acc[i, j] *= rescale[i]
            T.gemm(probs, v_tile, out_acc, transpose_B=v_transposed, policy=policy)

    @T.macro
    def accumulate_by_loops(probs, v_tile, out_acc, rescale, block_out, p_tile):
        rows, dim = out_acc.shape
        for i, j in T.Parallel(rows, dim):
            out_acc[i, j] *= rescale[i]
        T.copy(probs, p_tile)
        for i, j in T.Parallel(rows, dim):
            for n in T.serial(probs.shape[1]):
                v = v_tile[j, n] if v_transposed else v_tile[n, j]
                out_acc[i, j] += T.cast(p_tile[i, n], FP32) * T.cast(v, FP32)

    return accumulate_by_loops if scalar_loops and not acc16 else accumulate
