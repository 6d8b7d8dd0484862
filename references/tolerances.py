"""Every numerical bound the gate applies, with where it comes from.

The numerics tier follows FlashAttention's own tests (tests/test_flash_attn.py): a kernel
is judged against an FP32 reference *relative to* a plain PyTorch implementation in the
same low precision. The kernel's error may be at most a small multiple of that baseline's
error, plus a small absolute floor for outputs near zero.
"""

import torch

# FlashAttention: `(out - out_ref).abs().max() <= 2 * (out_pt - out_ref).abs().max() + fwd_atol`,
# and the same factor for the mean error.
MAX_ERR_MULTIPLE = 2.0
MEAN_ERR_MULTIPLE = 2.0

# Unit roundoff of each output dtype (IEEE half: 2^-11; bfloat16: 2^-8).
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def abs_floor(ref: torch.Tensor, dtype: torch.dtype) -> float:
    """Two roundings of the reference's largest value into ``dtype``: what storing the output
    alone may cost (FlashAttention's fwd_atol is the same idea: 2x a round trip through the
    dtype)."""
    return 2.0 * UNIT_ROUNDOFF[dtype] * ref.abs().max().item()


def mean_floor(ref: torch.Tensor, dtype: torch.dtype) -> float:
    """Floor for the mean error: 1/100 of one rounding of the mean output. A real baseline's
    mean error is ~1/4 of a rounding, so this only matters when the baseline is exact."""
    return 0.01 * UNIT_ROUNDOFF[dtype] * ref.abs().mean().item()


# Drift tier. The fp32-accumulating kernel's mean error may grow with length no faster
# than the same-precision baseline's, within the numerics multiple at every length.
# DESIGN.md measured fp16 accumulation on the H200 at 5.3x (3782) and 11.6x (32768) the
# fp32 kernel's mean error: the detector flags a kernel whose mean-error ratio to the
# baseline exceeds DRIFT_RATIO_LIMIT at any length.
DRIFT_RATIO_LIMIT = MEAN_ERR_MULTIPLE
DRIFT_LENGTHS = (1024, 2048, 3782, 8192, 16384, 32768)
# Under a sliding window every row attends to at most window + 1 keys, whatever the length: the
# kernel's mean error is flat, its largest across the lengths within this factor of its smallest
# (only the first window rows see fewer keys: 12% of the rows at 1024 tokens with a window of 127).
WINDOW_FLAT_SPREAD = 1.25

# Memory tier: a kernel call may allocate at most this much device memory beyond its
# inputs and output (the flash kernels use no workspace; this covers allocator slack).
WORKSPACE_LIMIT_BYTES = 16 * 2**20
