"""Attention scores S = Q K^T, written the usual TileLang way: an autotuned @tilelang.jit factory
(tilegate/families/case.py unwrap_factory). Loaded by path by suite/families/test_usual.py;
not a test module."""

import itertools

import tilelang
import tilelang.language as T


def get_configs() -> list[dict]:
    blocks = itertools.product((64, 128), (64, 128), (128, 256))
    return [dict(block_m=m, block_n=n, threads=t) for m, n, t in blocks]


@tilelang.autotune(configs=get_configs())
@tilelang.jit(out_idx=[-1], pass_configs={"tl.disable_warp_specialized": True})
def scores(head_dim: int, block_m: int = 64, block_n: int = 64, threads: int = 128):
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
