"""Import-only stand-in for ``sgl_kernel`` (sglang-kernel) on a CPU-only machine. Not a kernel.

Why it exists: SGLang 0.5.23's CPU engine (``SGLANG_USE_CPU_ENGINE=1``) imports a few
``sgl_kernel`` names at module import time without a guard, e.g.

    sglang/srt/mem_cache/allocation.py            from sgl_kernel import
    assign_req_to_token_pool_cpu
    sglang/srt/kernels/ops/kvcache/cache_move.py  from sgl_kernel import copy_all_layer_kv_cache_cpu
    sglang/srt/kernels/ops/speculative/*.py       fill_accept_out_cache_loc_cpu, ...

and, for the dense Llama that tilegate's end-to-end tests serve, calls none of them. PyPI has
no CPU build of sglang-kernel, so without this package SGLang cannot even be imported on the
gate's CPU machines.

What it guarantees:
- it exports only the names listed in ``_NAMES`` (no module ``__getattr__``), so a guarded
  ``try: from sgl_kernel import other`` still fails with ImportError and SGLang keeps its
  fallback; it registers no ``torch.ops.sgl_kernel`` op, so SGLang's Intel AMX probe
  (``hasattr(torch.ops.sgl_kernel, "convert_weight_packed")``) stays False;
- every exported function raises ``RuntimeError`` when called: a test can never pass on a
  silently skipped kernel;
- it refuses to import where torch sees a GPU: there the real sglang-kernel must be used.

Installed by scripts/install-sglang-cpu.sh into .venv-sglang only.
"""

import torch as _torch

if _torch.cuda.is_available():
    raise ImportError(
        "tilegate's sgl_kernel stand-in refuses to load on a machine with a GPU "
        f"({_torch.cuda.get_device_name(0)}): install the real sglang-kernel there"
    )

__version__ = "0.0.0+tilegate.cpu.stub"
IS_TILEGATE_STUB = True

# The names SGLang 0.5.23's CPU path imports at import time, unguarded.
_NAMES = (
    "assign_req_to_token_pool_cpu",  # mem_cache/allocation.py
    "copy_all_layer_kv_cache_cpu",  # kernels/ops/kvcache/cache_move.py
    "assign_draft_cache_locs_contiguous_cpu",  # kernels/ops/speculative/cache_locs.py
    "assign_extend_cache_locs_cpu",
    "build_tree_kernel_efficient_cpu",  # kernels/ops/speculative/spec_tree.py
    "verify_tree_greedy_cpu",
    "fill_accept_out_cache_loc_cpu",  # kernels/ops/speculative/eagle.py
    "fill_bonus_tokens_cpu",
    "rotate_input_ids_cpu",  # kernels/ops/speculative/multi_layer_eagle.py
)


def _stand_in(name: str):
    def call(*args, **kwargs):
        raise RuntimeError(
            f"sgl_kernel.{name} was called, but this is tilegate's import-only CPU stand-in for "
            "sglang-kernel (scripts/sgl_kernel_stub): SGLang took a path that needs the real kernel"
        )

    call.__name__ = call.__qualname__ = name
    return call


for _name in _NAMES:
    globals()[_name] = _stand_in(_name)
del _name
