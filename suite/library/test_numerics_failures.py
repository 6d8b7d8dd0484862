"""A numerics failure a kernel engineer can act on: the worst element's position, the rows with
NaN/Inf, the element's site in the kernel's tiling, the seed, and one command that reruns the
test. Judged here on CPU tensors with a planted error; the GPU tiers print the same."""

import shlex
import subprocess
import sys

import pytest
import torch

from tilegate.gate.paths import REPO_ROOT
from tilegate.gate.tile_site import dense_site, paged_site
from tilegate.references.metrics import judge
from tilegate.testing.reproduce import command, current_test_id

AXES = ("batch", "row", "head", "col")


def _outputs(seq=70, heads=3, dim=8):
    ref = torch.randn(2, seq, heads, dim, generator=torch.Generator().manual_seed(0))
    return ref, ref.half(), ref.half()


def test_the_verdict_names_the_worst_element_and_its_values():
    ref, out, base = _outputs()
    out[1, 67, 2, 5] += 0.25
    verdict = judge(out, ref, base, AXES)
    assert not verdict.passed and verdict.worst.index == (1, 67, 2, 5)
    assert verdict.worst.want == pytest.approx(ref[1, 67, 2, 5].item())
    assert "worst at batch 1, row 67, head 2, col 5" in verdict.explain()


def test_the_verdict_lists_the_rows_holding_nan_first_in_order():
    ref, out, base = _outputs()
    out[0, 69, 1, :3] = float("nan")
    out[1, 4, 0, 7] = float("inf")
    verdict = judge(out, ref, base, AXES)
    assert not verdict.passed and verdict.nonfinite.rows == 2
    assert verdict.nonfinite.first == ((0, 69, 1), (1, 4, 0))
    assert "NaN/Inf in 2 rows, first (batch 0, row 69, head 1); (batch 1, row 4, head 0)" in (
        verdict.explain()
    )


def test_a_passing_verdict_still_knows_where_its_worst_element_is():
    ref, out, base = _outputs()
    verdict = judge(out, ref, base, AXES)
    assert verdict.passed and verdict.nonfinite is None
    diff = (out.float() - ref).abs()
    assert diff[verdict.worst.index] == diff.max()


def test_the_site_says_whether_a_row_lies_in_the_partial_last_tiles():
    # 3782 = 59 x 64 + 6: the last query and key tiles hold 6 rows
    assert dense_site(3781, 3782, 3782, True, 64, 64) == (
        "row 3781 of 3782: query tile 59 of 60 (block 64, partial: 6 of 64); its last key 3781 "
        "of 3782: key tile 59 of 60 (block 64, partial: 6 of 64)"
    )
    # a causal row early in the sequence sees only whole key tiles
    assert "key tile 1 of 60 (block 64)" in dense_site(100, 3782, 3782, True, 64, 64)
    assert "query tile 1 of 60 (block 64);" in dense_site(100, 3782, 3782, True, 64, 64)
    # without the mask every row sees the last, partial key tile
    assert "key tile 59 of 60 (block 64, partial: 6 of 64)" in dense_site(
        0, 3782, 3782, False, 64, 64
    )
    # bottom-right alignment: 127 queries over 32768 keys, the first row sees key 32641
    assert "its last key 32641 of 32768" in dense_site(0, 127, 32768, True, 128, 64)


def test_the_paged_site_finds_the_request_a_token_belongs_to():
    # new tokens 1, 1000, 17 over contexts 1, 3782, 17: token 1000 is request 1's 999th new one
    site = paged_site(1000, (1, 3782, 17), (1, 1000, 17), 64, 64)
    assert site.startswith("request 1 (prefix 2782, new 1000): new token 999 of 1000:")
    assert "its last key 3781 of 3782: key tile 59 of 60 (block 64, partial: 6 of 64)" in site
    # decode: one token a request
    assert paged_site(2, (57, 3782, 17), None, 1, 64).startswith("request 2 (prefix 16, new 1)")


def test_the_reproduce_command_runs_exactly_the_failing_test():
    test_id = current_test_id()
    assert test_id.endswith("::test_the_reproduce_command_runs_exactly_the_failing_test")
    line = command(test_id)
    assert "\n" not in line and shlex.split(line)[:3] == ["python3", "-m", "pytest"]
    collected = subprocess.run(
        [sys.executable, *shlex.split(line)[1:], "--collect-only", "-q"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert [ln for ln in collected.stdout.splitlines() if "::" in ln] == [test_id]


def test_a_test_id_with_shell_characters_stays_one_argument():
    test_id = "suite/x.py::test_y[a b;rm -rf $HOME`id`]"
    assert shlex.split(command(test_id))[-1] == test_id
