"""SGLang plugin: makes ``attention_backend="tilelang"`` a choice and registers its factory.

SGLang 0.5.23 calls ``load_plugins()`` in every process it starts (the engine, the spawned
scheduler, the detokenizer): it loads each entry point of the group ``sglang.srt.plugins``
(pyproject.toml: ``tilelang = "tilegate.serving.sglang_plugin:register"``) and calls it.
``SGLANG_PLUGINS``, when set, is an allow-list of entry-point names: it must then contain
``tilelang``. SGLang logs and swallows a plugin's exception, so a failure here shows as
"invalid choice: 'tilelang'" at ServerArgs, never as a silent fallback to another backend.

Nothing heavy is imported here: the backend module loads only when SGLang builds a model
runner with this backend.
"""

from __future__ import annotations

BACKEND_NAME = "tilelang"


def create_backend(model_runner):
    from tilegate.serving.sglang_backend import TileLangAttnBackend

    return TileLangAttnBackend(model_runner)


def register_backend(name: str, factory) -> None:
    """Make ``name`` an attention_backend choice served by ``factory(model_runner)``."""
    from sglang.srt.arg_groups.choices import (
        ATTENTION_BACKEND_CHOICES,
        add_attention_backend_choices,
    )
    from sglang.srt.layers.attention.attention_registry import register_attention_backend

    if name not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([name])
    register_attention_backend(name)(factory)


def register() -> None:
    register_backend(BACKEND_NAME, create_backend)
