"""The kernels' dtype names and torch's dtypes, both ways: the one map every layer uses."""

import torch

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_name(dtype: torch.dtype) -> str | None:
    """ "float16" for torch.float16, and so on; None for a dtype no kernel is built for."""
    return next((name for name, d in TORCH_DTYPES.items() if d == dtype), None)
