"""flash.flash_fwd compiled for the local GPU, once per build, and called on torch tensors."""

import functools

import torch

from dense_example.flash import flash_fwd

# target -> tile config, never chosen from the device's name. gfx942: 4 waves of 64 share 32-key K
# and V tiles (18 KiB of LDS at d128, so several workgroups fit a CU's 64 KiB); sm90: 64-key tiles
# for the same 128 query rows (8 warps).
CONFIGS = {
    "gfx942": dict(block_m=128, block_n=32, threads=256),
    "sm90": dict(block_m=128, block_n=64, threads=256),
}
DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def local_target() -> str:
    """The local GPU's architecture, exactly: gfx942 is gfx942, sm90 is compute capability 9.0."""
    if torch.version.hip:
        arch = torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName
        arch = arch.split(":")[0]
    else:
        major, minor = torch.cuda.get_device_capability()
        arch = f"sm{major}{minor}"
    if arch not in CONFIGS:
        raise RuntimeError(f"no tile config for {arch}: there are for {', '.join(CONFIGS)}")
    return arch


@functools.cache
def compiled(head_dim: int, dtype: str, causal: bool, mask_tail: bool = True):
    import tilelang

    prim = flash_fwd(head_dim, dtype, causal, mask_tail=mask_tail, **CONFIGS[local_target()])
    return tilelang.compile(prim, out_idx=None, target="hip" if torch.version.hip else "cuda")


def attention(q, k, v, out, *, causal: bool, mask_tail: bool = True):
    """Writes softmax(q k^T / sqrt(d)) v into ``out`` and returns it. q, out: [batch, seq_q,
    heads, d]; k, v: [batch, seq_k, kv_heads, d], seq_q <= seq_k, heads a multiple of kv_heads."""
    if not 1 <= q.shape[1] <= k.shape[1] or q.shape[2] % k.shape[2]:
        raise ValueError(f"q {tuple(q.shape)} against k {tuple(k.shape)}: see the docstring")
    compiled(q.shape[-1], DTYPES[q.dtype], causal, mask_tail)(q, k, v, out)
    return out
