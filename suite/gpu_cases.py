"""Pairing runtime cases with the local GPU's tile configs, and grouping them per kernel.

Each (shape, config) pair is one compiled kernel; tests that share one are put in the same
xdist group (run with --dist loadgroup) so each kernel compiles once per run.
"""

from __future__ import annotations

import pytest
from tilegate.kernels.configs import configs_for

from tilegate.platform import detect


def local_config_target() -> str:
    # Collection happens on every machine; without a GPU the tests skip, and the sm90
    # table only names them.
    return detect().config_target or "sm90"


def with_configs(cases, marks=()):
    """pytest params: every case x every local config for its head_dim, grouped per kernel."""
    target = local_config_target()
    params = []
    for case in cases:
        for cfg in configs_for(target, case.shape.head_dim):
            group = pytest.mark.xdist_group(f"{case.shape.name}-{cfg.name}")
            slow = [pytest.mark.slow] if getattr(case, "slow", False) else []
            params.append(pytest.param(case, cfg, id=f"{case.name}-{cfg.name}", marks=[group, *slow, *marks]))
    return params


def first_config(head_dim: int):
    return configs_for(local_config_target(), head_dim)[0]
