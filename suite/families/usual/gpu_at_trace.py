"""K copied through LDS, from a factory that asks torch for the GPU while it traces (its row block
picked by the architecture it finds then, as TileLang's AMD examples read the device in the kernel
function): the import needs no GPU, the build does. Loaded by path by
suite/families/test_usual.py; not a test module."""

import tilelang.language as T
import torch


def staged_copy(head_dim: int, threads: int = 128):
    arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]  # raises on a CPU
    block = 64 if arch == "gfx942" else 128
    n = T.dynamic("n")

    @T.prim_func
    def main(K: T.Tensor((n, head_dim), "bfloat16"), Out: T.Tensor((n, head_dim), "bfloat16")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            tile = T.alloc_shared((block, head_dim), "bfloat16")
            T.copy(K[bx * block, 0], tile)
            T.copy(tile, Out[bx * block, 0])

    return main
