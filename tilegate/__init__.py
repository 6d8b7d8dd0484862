"""tilegate: a CI gate for TileLang attention kernels on AMD gfx942 (MI300X) served by SGLang.

The card's top-level folders are subpackages of this one: ``kernels/`` is
``tilegate.kernels``, ``references/`` is ``tilegate.references``, ``fixtures/`` is
``tilegate.fixtures``. An install maps them with setuptools' package-dir (pyproject.toml); in a
checkout, the links ``tilegate/kernels`` -> ``../kernels`` (and the other two) do the same for
editable installs and plain ``PYTHONPATH`` runs. The folders carry no ``__init__.py`` on purpose:
a checkout on ``sys.path`` then never shadows Hugging Face's ``kernels``, which SGLang imports.

The runtime, what an SGLang deployment installs (pyproject.toml) and nothing else:
  tilegate.kernels                        TileLang factories, configs, hooks with healthy defaults
  tilegate (this folder's modules)        platform detection, compiling and launching
  tilegate.serving                        paged launchers, the SGLang backend and plugin
The gate (testing/pyproject.toml), which the runtime never imports:
  tilegate.references                     FP32/FP64 references, metrics, tolerances; pure torch
  tilegate.gate, .gfx942, .artifacts      registry, planted defects, builds, ISA, records
  tilegate.fixtures                       cases, inputs, tiny Llama-3, prompts
  tilegate.harness                        the tiers that run outside pytest, one package each
  tilegate.families                        kernels from other packages, through an adapter
  tilegate.testing                        the pytest plugin: options, skips, deadlines, precompile
suite/library/test_import_layers.py holds the layers to their order.
"""
