"""Scores over a loop of key blocks, S = Q K^T summed over the blocks, for the latency-proxy tests
(suite/families/test_latency_proxies.py; loaded by path, not a test module). With
``k_in_loop`` each block's K tile is loaded inside the loop and waited for before its MFMAs (a
plain T.copy: TileLang prefetches no copy on gfx942); without, the tile is loaded once before the
loop, which then makes no load: its loads are as overlapped as can be. Without ``loop``, one key
block and no loop at all: a build whose latency proxies have nothing to measure."""

import tilelang.language as T


def scores(
    head_dim: int, block_n: int = 64, threads: int = 128, k_in_loop: bool = True, loop: bool = True
):
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(
        Q: T.Tensor((m, head_dim), "bfloat16"),
        K: T.Tensor((n, head_dim), "bfloat16"),
        S: T.Tensor((m, block_n), "float32"),
    ):
        with T.Kernel(T.ceildiv(m, 64), threads=threads) as bx:
            q = T.alloc_shared((64, head_dim), "bfloat16")
            k = T.alloc_shared((block_n, head_dim), "bfloat16")
            acc = T.alloc_fragment((64, block_n), "float32")
            T.copy(Q[bx * 64, 0], q)
            T.clear(acc)
            if not k_in_loop or not loop:
                T.copy(K[0, 0], k)
            if loop:
                for kb in T.serial(T.ceildiv(n, block_n)):
                    if k_in_loop:
                        T.copy(K[kb * block_n, 0], k)
                    T.gemm(q, k, acc, transpose_B=True)
            else:
                T.gemm(q, k, acc, transpose_B=True)
            T.copy(acc, S[bx * 64, 0])

    return main
