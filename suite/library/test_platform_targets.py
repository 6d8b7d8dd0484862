"""Which config tables a GPU runs (tilegate.platform), and the skip a case of another table gets."""

from types import SimpleNamespace

import pytest

from tilegate.platform import Platform
from tilegate.testing import skips

H200 = Platform("cuda", "sm_90", "NVIDIA H200")
MI300X = Platform("rocm", "gfx942", "AMD Instinct MI300X")
A100 = Platform("cuda", "sm_80", "NVIDIA A100")  # a GPU with no table of its own
CPU = Platform("cpu", None, None)


def test_every_gpu_with_a_table_also_runs_the_shipping_programs():
    assert H200.executed_targets == ("sm90", "gfx942")  # gfx942's programs lowered for sm90
    assert MI300X.executed_targets == ("gfx942",)  # natively, once
    assert A100.executed_targets == () and CPU.executed_targets == ()


def _item(target: str):
    markers = {"config_target": SimpleNamespace(args=(target,))}
    return SimpleNamespace(
        get_closest_marker=markers.get, config=SimpleNamespace(getoption=lambda name: "")
    )


@pytest.mark.parametrize(
    "platform, target, runs",
    [
        (H200, "gfx942", True),
        (H200, "sm90", True),
        (MI300X, "gfx942", True),
        (MI300X, "sm90", False),
        (A100, "gfx942", False),
    ],
)
def test_a_case_runs_where_its_table_does_and_skips_in_one_line_elsewhere(
    monkeypatch, platform, target, runs
):
    monkeypatch.setattr(skips, "detect", lambda: platform)
    reason = skips.skip_reason(_item(target))
    if runs:
        assert reason is None
    else:
        assert reason.startswith(f"{target} tile config: this GPU ({platform.describe()}) runs ")
        assert "\n" not in reason
