"""SGLang plugin: makes ``attention_backend="tilelang"`` a choice and registers its factory.

SGLang 0.5.23 calls ``load_plugins()`` in every process it starts (the engine, the spawned
scheduler, the detokenizer): it loads each entry point of the group ``sglang.srt.plugins``
(pyproject.toml: ``tilelang = "tilegate.kernels.sglang_plugin:register"``) and calls it.
``SGLANG_PLUGINS``, when set, is an allow-list of entry-point names: it must then contain
``tilelang``. SGLang logs and swallows a plugin's exception, so a failure here shows as
"invalid choice: 'tilelang'" at ServerArgs, never as a silent fallback to another backend.

Nothing heavy is imported here: the backend module loads only when SGLang builds a model
runner with this backend.
"""

from __future__ import annotations

import os

BACKEND_NAME = "tilelang"
MARKER_DIR_ENV = "TILEGATE_SGLANG_MARKER_DIR"  # tests: each process that registers writes a marker


def create_backend(model_runner):
    from tilegate.kernels.sglang_backend import TileLangAttnBackend

    return TileLangAttnBackend(model_runner)


def register() -> None:
    from sglang.srt.arg_groups.choices import ATTENTION_BACKEND_CHOICES, add_attention_backend_choices
    from sglang.srt.layers.attention.attention_registry import register_attention_backend

    if BACKEND_NAME not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([BACKEND_NAME])
    register_attention_backend(BACKEND_NAME)(create_backend)
    marker_dir = os.environ.get(MARKER_DIR_ENV)
    if marker_dir:
        with open(os.path.join(marker_dir, f"registered-{os.getpid()}"), "w") as f:
            f.write(BACKEND_NAME)
