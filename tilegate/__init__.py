"""tilegate: a CI gate for TileLang attention kernels on AMD gfx942 (MI300X) served by SGLang.

The card's top-level folders are subpackages of this one: ``kernels/`` is
``tilegate.kernels``, ``references/`` is ``tilegate.references``, ``fixtures/`` is
``tilegate.fixtures``. An install maps them with setuptools' package-dir (pyproject.toml); in a
checkout, the links ``tilegate/kernels`` -> ``../kernels`` (and the other two) do the same for
editable installs and plain ``PYTHONPATH`` runs. The folders carry no ``__init__.py`` on purpose:
a checkout on ``sys.path`` then never shadows Hugging Face's ``kernels``, which SGLang imports.

Layers, each importing only those before it (suite/library/test_import_layers.py enforces it):
  tilegate.kernels, tilegate.references   TileLang factories and configs; pure torch
  tilegate (this folder)                  toolchain, lowering, code objects, ISA, runtime, reports
  tilegate.serving                        launchers, SGLang backend and plugin, transformers
  attention
  tilegate.fixtures                       cases, inputs, tiny Llama-3, prompts
  tilegate.harness                        the tiers that run outside pytest, one package each
                                          (perf, counters, sanitize, sglang: driver, child,
                                          protocol)
  tilegate.testing                        the pytest plugin: options, skips, deadlines, precompile

The runtime distribution (pyproject.toml) is the first three rows and tilegate.serving: what an
SGLang deployment installs. tilegate-testing (testing/pyproject.toml) is fixtures, harness, testing.
"""
