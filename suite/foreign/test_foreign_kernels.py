"""The kernel tiers (tilegate/testing/kernel_tiers.py) on the kernels this run names: in the gate's
checkout (pyproject.toml's tilegate_kernels) the gate's own (tilegate/foreign/own.py: their GPU
numerics and determinism, every config of every table) and SGLang's TileLang kernels, which build
only where SGLang 0.5.23 is installed: in .venv-sglang, which
suite/foreign/test_foreign_kernels_venv.py runs them in."""

from tilegate.testing.kernel_tiers import (  # noqa: F401  (pytest collects the tests, and the hook, from here)
    pytest_generate_tests,
    test_foreign_capabilities,
    test_foreign_compile,
    test_foreign_determinism,
    test_foreign_isa,
    test_foreign_numerics,
    test_foreign_provenance,
    test_foreign_sanitizer,
)
