"""The kernel tiers (tilegate/testing/kernel_tiers.py) on the kernels this run names: in the gate's
checkout (pyproject.toml's tilegate_kernels) the gate's own (tilegate/families/own.py: their GPU
numerics and determinism, every config of every table) and SGLang's TileLang kernels, which build
only where SGLang 0.5.23 is installed: in .venv-sglang, which
suite/families/test_kernels_venv.py runs them in."""

from tilegate.testing.kernel_tiers import (  # noqa: F401  (pytest collects the tests, and the hook, from here)
    pytest_generate_tests,
    test_kernel_capabilities,
    test_kernel_compile,
    test_kernel_determinism,
    test_kernel_isa,
    test_kernel_numerics,
    test_kernel_provenance,
    test_kernel_sanitizer,
)
