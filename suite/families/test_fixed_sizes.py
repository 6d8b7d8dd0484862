"""A dense kernel that fixes its lengths and batch at compile time (the dense example built as
TileLang's AMD example builds, suite/dense_kernel: FIXED_SIZES) goes through the dense family as
it is: the family builds it for each case (tilegate.families.per_case), skips by name the cases its
one length cannot hold, and judges the rest as any dense kernel's (GPU)."""

import dataclasses

import pytest

from tilegate.families import KernelDeclarationError, dense, gpu, per_case
from tilegate.gate import lowering
from tilegate.references.metrics import judge

# one length for Q and K (3782: a partial last key block of the example's tiles), and a prefix case
ONE_LENGTH = "full-gqa32x8-d128-fp16-s3782-random"
TWO_LENGTHS = "causal-gqa32x8-d128-fp16-q3782-k8192-random"


@pytest.fixture(scope="module")
def example():
    with pytest.MonkeyPatch.context() as mp:  # importable as the checkout's pytest finds it
        from tilegate.gate.paths import REPO_ROOT

        mp.syspath_prepend(str(REPO_ROOT / "suite" / "dense_kernel"))
        from dense_example import adapter

        yield adapter


def _case(kernel, name: str):
    (case,) = [c for c in gpu.family_cases(kernel) if c.name == name]
    return case


def test_a_case_of_two_lengths_is_a_named_skip_for_a_kernel_of_one(example):
    kernel = example.FIXED_SIZES
    assert gpu.feature_missing(kernel, _case(kernel, ONE_LENGTH)) is None
    assert gpu.feature_missing(kernel, _case(kernel, TWO_LENGTHS)) == (
        "dense-example-fixed-sizes: its compile-time sizes hold one length for Q and K "
        "(compile_time 'seq'); the case has seq_q 3782, seq_k 8192"
    )


def test_fixed_sizes_and_case_args_must_come_together(example):
    kernel = example.FIXED_SIZES
    with pytest.raises(
        KernelDeclarationError, match=r"compile_time fixes \['batch', 'seq'\]: give"
    ):
        dataclasses.replace(kernel, case_args=None)
    dynamic = dataclasses.replace(kernel.capabilities, compile_time=())
    with pytest.raises(KernelDeclarationError, match="case_args builds per case, and capabilities"):
        problems = tuple(dataclasses.replace(p, shape=()) for p in kernel.problems)
        dataclasses.replace(kernel, capabilities=dynamic, problems=problems)


def test_the_family_builds_each_case_with_its_sizes_fixed(example):
    """Lowered for gfx942 on the CPU: the case's length and batch are literals in the program (the
    head counts stay dynamic)."""
    kernel = example.FIXED_SIZES
    build = per_case.case_build(kernel, dense.case_shape(_case(kernel, ONE_LENGTH)), "gfx942")
    assert build.problem.args == (128, "float16", False, 3782, 1)
    prim, passes = build.lowering_input()
    assert [str(d) for d in prim.buffer_map[prim.params[0]].shape] == ["1", "3782", "heads", "128"]
    source = lowering.lower(prim, "gfx942", passes)[0]
    assert "seq_q" not in source and "seq_k" not in source


@pytest.mark.gpu
@pytest.mark.xdist_group("dense-example-fixed-sizes")
def test_the_family_judges_the_per_case_builds_and_fails_the_planted_one(example):
    def verdict(kernel, name):
        prepared = gpu.prepare(kernel, _case(kernel, name))
        assert prepared.compiled is not None
        ref, base = gpu.reference(kernel, prepared), gpu.baseline(kernel, prepared)
        return judge(gpu.run(kernel, prepared), ref, base)

    for name in (ONE_LENGTH, "causal-gqa32x8-d128-fp16-s129-random"):
        healthy = verdict(example.FIXED_SIZES, name)
        assert healthy.passed, f"{name}: {healthy.explain()}"
    planted = verdict(example.FIXED_SIZES_TAIL_MASK_BUG, ONE_LENGTH)
    assert not planted.passed, f"the tail-mask bug passed at 3782: {planted.explain()}"
