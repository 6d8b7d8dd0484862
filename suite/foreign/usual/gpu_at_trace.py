"""Attention scores S = Q K^T from a factory that asks torch for the GPU while it traces (its key
block picked by the architecture it finds then, as TileLang's AMD examples read the device in the
kernel function): the import needs no GPU, the build does. Loaded by path by
suite/foreign/test_foreign_usual.py; not a test module."""

import tilelang.language as T
import torch


def scores(head_dim: int, block_m: int = 64, threads: int = 128):
    arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]  # RuntimeError on a CPU
    block_n = 64 if arch == "gfx942" else 128
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
