"""Attention scores S = Q K^T from a module that asks torch for the GPU at import, and exits
without one: its tile size is picked by the device it finds. Loaded by path by
suite/families/test_usual.py; not a test module."""

import sys

import tilelang.language as T
import torch

if not torch.cuda.is_available():
    sys.exit("gpu_at_import: no GPU, nothing to run on")
DEVICE = torch.cuda.get_device_name()
ARCH = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
BLOCK_N = 64 if ARCH == "gfx942" else 128  # the key block, by the GPU found at import


def scores(head_dim: int, block_m: int = 64, threads: int = 128):
    m, n, block_n = T.dynamic("m"), T.dynamic("n"), BLOCK_N

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
