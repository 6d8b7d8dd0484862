"""The foreign-kernel tiers (tilegate/testing/kernel_tiers.py) on the kernels this run names: in the
gate's checkout, SGLang's TileLang kernels (pyproject.toml's tilegate_kernels). They build here
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
