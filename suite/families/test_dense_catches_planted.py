"""The dense family fails the dense example's planted tail-mask variant (suite/dense_kernel,
TAIL_MASK_BUG: keys at or past seq_k in a partial last key block join a full mask's softmax) where
its bug shows, and passes it where the bug cannot show: the tier's check on a GPU, through the
same family functions the numerics tier calls (tilegate.families.gpu), so a family that cannot fail
this kernel fails here."""

import pytest

from tilegate.families import gpu
from tilegate.references.metrics import judge

# 3782 = 59 x 64 + 6 keys: a partial last key block for the example's tiles (block_n 32 on gfx942,
# 64 on sm90). 3840 = 60 x 64: none, so the bug cannot show there.
CAUGHT, HIDDEN = "full-gqa32x8-d128-fp16-s3782-random", "full-gqa32x8-d128-fp16-s3840-random"

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("dense-example-planted")]


@pytest.fixture(scope="module")
def planted():
    with pytest.MonkeyPatch.context() as mp:  # importable as the checkout's pytest finds it
        from tilegate.gate.paths import REPO_ROOT

        mp.syspath_prepend(str(REPO_ROOT / "suite" / "dense_kernel"))
        from dense_example.adapter import KERNELS, TAIL_MASK_BUG

        yield TAIL_MASK_BUG, KERNELS[0]


def _verdict(kernel, name: str):
    (case,) = [c for c in gpu.family_cases(kernel) if c.name == name]
    prepared = gpu.prepare(kernel, case)
    ref, base = gpu.reference(kernel, prepared), gpu.baseline(kernel, prepared)
    return judge(gpu.run(kernel, prepared), ref, base)


def test_the_tail_mask_bug_fails_where_the_last_key_block_is_partial(planted):
    bug, healthy = planted
    caught = _verdict(bug, CAUGHT)
    assert not caught.passed, f"the planted tail-mask bug passed at 3782: {caught.explain()}"
    assert _verdict(healthy, CAUGHT).passed, "the healthy kernel fails the same case"


def test_the_tail_mask_bug_passes_where_no_key_block_is_partial(planted):
    bug, _ = planted
    hidden = _verdict(bug, HIDDEN)
    assert hidden.passed, f"at 3840 the planted kernel should equal the healthy: {hidden.explain()}"
