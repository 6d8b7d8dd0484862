"""Attention scores S = Q K^T for one block of queries against one block of keys, bf16 in, fp32
out."""

import tilelang.language as T


def scores(block_m: int, block_n: int, head_dim: int, *, threads: int = 128):
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(
        Q: T.Tensor((m, head_dim), "bfloat16"),
        K: T.Tensor((n, head_dim), "bfloat16"),
        S: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=threads) as (bx, by):
            q = T.alloc_shared((block_m, head_dim), "bfloat16")
            k = T.alloc_shared((block_n, head_dim), "bfloat16")
            acc = T.alloc_fragment((block_m, block_n), "float32")
            T.copy(Q[by * block_m, 0], q)
            T.copy(K[bx * block_n, 0], k)
            T.gemm(q, k, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, S[by * block_m, bx * block_n])

    return main
