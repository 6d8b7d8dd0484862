"""Flash-attention forward for prefill, [batch, seq, heads, head_dim], as one TileLang factory.

Batch, both lengths and both head counts are dynamic: a build is fixed by head_dim, dtype and the
mask only, unless ``seq`` (one length for Q and K) and ``batch`` fix those at compile time, as
TileLang's AMD flash-attention example does. Query rows are the last seq_q of the seq_k keys
(chunked prefill): with ``causal`` row i sees keys 0 .. i + seq_k - seq_q. Q @ K^T and P @ V
accumulate in fp32; softmax runs online in base 2. ``mask_tail=False`` is a planted bug for the
gate's tests: keys at or past seq_k in the last, partial key block are not masked, so the zeros a
bounded copy leaves there join the softmax of a full mask (a causal mask hides them anyway).
"""

# No `from __future__ import annotations`: TileLang reads the T.Tensor hints.

import tilelang.language as T

LOG2_E = 1.4426950408889634


def flash_fwd(
    head_dim: int,
    dtype: str,
    causal: bool,
    seq: int | None = None,
    batch: int | None = None,
    *,
    block_m: int,
    block_n: int,
    threads: int,
    mask_tail: bool = True,
):
    fp32 = "float32"
    scale = head_dim**-0.5 * LOG2_E  # exp(x / sqrt(d)) as exp2(x * scale)
    batch = T.dynamic("batch") if batch is None else batch
    seq_q, seq_k = T.dynamic("seq_q, seq_k") if seq is None else (seq, seq)
    heads, kv_heads = T.dynamic("heads, kv_heads")
    rows = [batch, seq_q, heads, head_dim]
    keys = [batch, seq_k, kv_heads, head_dim]

    @T.prim_func
    def main(
        Q: T.Tensor(rows, dtype),
        K: T.Tensor(keys, dtype),
        V: T.Tensor(keys, dtype),
        Out: T.Tensor(rows, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_m), heads, batch, threads=threads) as (tile, h, b):
            q = T.alloc_fragment([block_m, head_dim], dtype)  # Q stays in registers
            k = T.alloc_shared([block_n, head_dim], dtype)
            v_rows = T.alloc_fragment([block_n, head_dim], dtype)
            # V transposed in LDS: P @ V then reads it along the reduction, not 16 bits at a time
            v_t = T.alloc_shared([head_dim, block_n], dtype)
            s = T.alloc_fragment([block_m, block_n], fp32)
            p = T.alloc_fragment([block_m, block_n], dtype)
            acc = T.alloc_fragment([block_m, head_dim], fp32)
            m = T.alloc_fragment([block_m], fp32)
            m_prev = T.alloc_fragment([block_m], fp32)
            shrink = T.alloc_fragment([block_m], fp32)
            block_sum = T.alloc_fragment([block_m], fp32)
            row_sum = T.alloc_fragment([block_m], fp32)

            kv_h = h // (heads // kv_heads)
            first = tile * block_m + seq_k - seq_q  # the key position of the tile's first row
            T.copy(Q[b, tile * block_m : (tile + 1) * block_m, h, :], q)
            T.fill(acc, 0)
            T.fill(row_sum, 0)
            T.fill(m, -T.infinity(fp32))
            n_blocks = T.ceildiv(seq_k, block_n)
            if causal:
                n_blocks = T.min(n_blocks, T.ceildiv(first + block_m, block_n))

            for kb in T.serial(n_blocks):
                T.copy(K[b, kb * block_n : (kb + 1) * block_n, kv_h, :], k)
                for i, j in T.Parallel(block_m, block_n):
                    key = kb * block_n + j
                    seen = key < seq_k if mask_tail else key >= 0
                    if causal:
                        seen = seen & (key <= first + i)
                    s[i, j] = T.if_then_else(seen, 0, -T.infinity(fp32))
                T.gemm(q, k, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_m):
                    shrink[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_m, block_n):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, block_sum, dim=1)
                for i in T.Parallel(block_m):
                    row_sum[i] = row_sum[i] * shrink[i] + block_sum[i]
                T.copy(s, p)

                T.copy(V[b, kb * block_n : (kb + 1) * block_n, kv_h, :], v_rows)
                for n, d in T.Parallel(block_n, head_dim):
                    v_t[d, n] = v_rows[n, d]
                for i, d in T.Parallel(block_m, head_dim):
                    acc[i, d] *= shrink[i]
                T.gemm(p, v_t, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

            for i, d in T.Parallel(block_m, head_dim):
                if tile * block_m + i < seq_q:
                    Out[b, tile * block_m + i, h, d] = T.cast(acc[i, d] / row_sum[i], dtype)

    return main
