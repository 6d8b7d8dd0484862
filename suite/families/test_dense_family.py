"""The dense family (tilegate/families/dense.py) on the CPU: its cases are the gate's own, its
inputs are what they say (NaN past each sequence), its reference, baseline and judge are the gate's
own and tell a tail-mask bug at 129 keys from none at 128, its records join the gate's numerics
table, and an adapter that declares what no dense case exercises is refused at its line. The example
adapter (suite/dense_kernel) is the kernel; its launch is the GPU tiers'."""

import dataclasses

import pytest
import torch

from tilegate.artifacts.records import NumericsRecord, load
from tilegate.artifacts.render import numerics_by_dtype
from tilegate.artifacts.writer import record_numerics
from tilegate.families import Finding, KernelDeclarationError, dense, gpu, params
from tilegate.families.child import child_cases
from tilegate.families.verdicts import KnownFinding, judge_case
from tilegate.fixtures.inputs import NAN_PAD_ROWS, random_qkv
from tilegate.fixtures.shapes import (
    adversarial_cases,
    determinism_cases,
    nan_padding_cases,
    numerics_cases,
)
from tilegate.gate.paths import REPO_ROOT
from tilegate.references.attention import ref_attention
from tilegate.references.metrics import judge


@pytest.fixture(scope="module")
def adapter():
    """The worked example's adapter module, imported from the checkout as a PYTHONPATH would."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(REPO_ROOT / "suite" / "dense_kernel"))
        import dense_example.adapter

        yield dense_example.adapter


def _case(kernel, name: str) -> dense.Case:
    (case,) = [c for c in gpu.family_cases(kernel) if c.name == name]
    return case


def test_the_cases_are_the_gates_own_numerics_cases(adapter):
    names = [c.name for c in gpu.family_cases(adapter.KERNELS[0])]
    assert len(names) == len(set(names)), "two cases share a test id"
    assert {f"{r.name}-random" for r in numerics_cases()} <= set(names)
    assert {f"{r.name}-nan-padded" for r in nan_padding_cases()} <= set(names)
    adversarial = {f"{r.name}-{kind}" for r in adversarial_cases() for kind in dense.ADVERSARIAL}
    # 3 kinds x 18 runs: 2 dtypes x 3 masks (causal, full, a sliding window) x 3 lengths
    assert len(adversarial) == 54 and adversarial <= set(names)
    lengths = {c.run.seq_k for c in gpu.family_cases(adapter.KERNELS[0])}
    assert {1, 17, 127, 3782, 8192, 32768, 3840} <= lengths
    # every twin stands beside the case it is the twin of
    for twin in (c for c in gpu.family_cases(adapter.KERNELS[0]) if c.run.seq_k == 3840):
        assert twin.name.replace("s3840", "s3782") in names
    # what the determinism and sanitizer tiers pick is in the set: a renamed case is an error here
    wanted = {*dense.DETERMINISM_CASES, *(n for ns in dense.SANITIZED_CASES.values() for n in ns)}
    assert wanted <= set(names)
    # the gate's own determinism cases are its fp16 d128 ones; the other builds' are numerics
    # cases too (test_case_choice.py: each build gets some)
    own = {n for n in dense.DETERMINISM_CASES if "-d128-fp16-" in n}
    assert {f"{r.name}-random" for r in determinism_cases()} == own


def test_cases_outside_the_capabilities_are_named_skips(adapter):
    fp16, bf16 = adapter.KERNELS
    case = _case(fp16, "full-gqa32x8-d128-bf16-s3782-random")
    assert gpu.feature_missing(fp16, case) == (
        "dense-example-fp16: its capabilities leave out dtype 'bfloat16' (declared: float16)"
    )
    assert gpu.feature_missing(bf16, case) is None
    d64 = _case(fp16, "causal-gqa32x8-d64-fp16-s129-random")
    assert "leave out dtype 'float16'" in str(gpu.feature_missing(bf16, d64))


def test_nan_padded_inputs_hold_the_random_values_and_nan_past_each_sequence(adapter):
    kernel = adapter.KERNELS[0]
    case = _case(kernel, "full-gqa32x8-d128-fp16-s129-nan-padded")
    x = gpu.prepare(kernel, case, "cpu")
    q, k, v = random_qkv(case.run, "cpu")
    assert torch.equal(x.q, q) and torch.equal(x.k, k) and torch.equal(x.v, v)
    for view in (x.q, x.k, x.v):
        assert view.is_contiguous() and view._base is not None
        assert torch.isnan(view._base[:, view.shape[1] :]).all()
        assert view._base.shape[1] == view.shape[1] + NAN_PAD_ROWS
    assert torch.isnan(x.out_buffer).all() and x.out.data_ptr() == x.out_buffer.data_ptr()
    assert gpu.stray_writes(kernel, x) is None
    x.out_buffer[0, 129 + 3, 5, 7] = 1.0  # one element past seq_q, as a tile that writes past it
    assert gpu.stray_writes(kernel, x) == (
        "the kernel wrote 1 elements past seq_q (129) in the output buffer"
    )


def _tail_unmasked(x: dense.Inputs, block: int) -> torch.Tensor:
    """What a kernel with flash.py's planted tail-mask bug computes, here in FP32 and rounded to
    the inputs' dtype: the zeros a bounded copy leaves past seq_k join a full mask's softmax."""
    n = x.k.shape[1]
    pad = -n % block
    zeros = x.k.new_zeros(x.k.shape[0], pad, *x.k.shape[2:])
    k, v = torch.cat([x.k, zeros], dim=1), torch.cat([x.v, zeros], dim=1)
    return ref_attention(x.q, k, v, causal=False, scale=x.sm_scale).to(x.q.dtype)


@pytest.mark.parametrize(
    "name, caught",
    [("full-gqa32x8-d128-fp16-s129-random", True), ("full-gqa32x8-d128-fp16-s128-random", False)],
    ids=["s129-caught", "s128-passes"],
)
def test_the_judge_tells_a_tail_mask_bug_at_129_keys_from_none_at_128(adapter, name, caught):
    # The family's reference, baseline and judge, on the CPU, against the bug's math; on a GPU the
    # numerics tier judges the planted kernel itself, at 3782 and 3840 (docs/kernel-families.md).
    kernel = adapter.KERNELS[0]
    x = gpu.prepare(kernel, _case(kernel, name), "cpu")
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    verdict = judge(_tail_unmasked(x, block=32), ref, base)
    assert verdict.passed is not caught, verdict.explain()
    assert judge(ref.to(x.q.dtype), ref, base).passed, "the reference, rounded, must pass"


def _softmax_without_its_max(x: dense.Inputs) -> torch.Tensor:
    """What a kernel that exponentiates its scores without subtracting the running max computes,
    here in FP32 and rounded to the inputs' dtype (causal, bottom-right, as the reference)."""
    groups = x.q.shape[2] // x.k.shape[2]
    k = x.k.float().repeat_interleave(groups, dim=2)
    v = x.v.float().repeat_interleave(groups, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", x.q.float(), k) * x.sm_scale
    sq, sk = s.shape[-2:]
    hidden = torch.ones(sq, sk, dtype=torch.bool).triu(sk - sq + 1)
    p = s.exp().masked_fill(hidden, 0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdim=True), v).to(x.q.dtype)


@pytest.mark.parametrize("kind, caught", [("large-logits", True), ("random", False)])
def test_the_judge_fails_a_softmax_without_its_max_on_large_logits(adapter, kind, caught):
    # the adversarial kinds are there for bugs random inputs do not show: this one passes them
    kernel = adapter.KERNELS[0]
    x = gpu.prepare(kernel, _case(kernel, f"causal-gqa32x8-d128-fp16-s127-{kind}"), "cpu")
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    verdict = judge(_softmax_without_its_max(x), ref, base)
    assert verdict.passed is not caught, verdict.explain()
    assert judge(ref.to(x.q.dtype), ref, base).passed, "the reference, rounded, must pass"


def test_a_dense_record_joins_the_gates_own_numerics_table(adapter, tmp_path):
    kernel = adapter.KERNELS[0]
    case = _case(kernel, "causal-gqa32x8-d128-fp16-s17-random")
    x = gpu.prepare(kernel, case, "cpu")
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    verdict = judge(ref.to(torch.float16), ref, base)
    failing = dataclasses.replace(verdict, passed=False, max_ratio=3.5)
    record_numerics(tmp_path, f"{kernel.name}-{case.name}", gpu.record_dtype(kernel, case), failing)
    # a record as suite_helpers.judged writes for the gate's own prefill kernel
    record_numerics(tmp_path, "causal-gqa32x8-d128-fp16-s17-m128n32w4-random", "float16", verdict)
    (row,) = numerics_by_dtype(load(tmp_path, NumericsRecord))
    assert (row.dtype, row.checks, row.within_bound) == ("float16", 2, 1)
    assert row.worst_max.name == f"{kernel.name}-{case.name}"


def test_the_sanitizer_child_runs_the_familys_named_cases(adapter):
    kernel = adapter.KERNELS[0]  # fp16, d128 and d64: the bf16 cases are not its
    racecheck = dense.SANITIZED_CASES["racecheck"]
    assert [c.name for c in child_cases(kernel, racecheck)] == [
        n for n in racecheck if "-fp16-" in n
    ]
    memcheck = {n for n in dense.SANITIZED_CASES["memcheck"] if "-fp16-" in n}
    assert {c.name for c in child_cases(kernel)} == memcheck


@pytest.mark.parametrize(
    "change, refused",
    [
        (
            {"masks": ("causal", "full", "sparse-topk")},
            "capabilities declare mask ['sparse-topk'], which no case of family 'dense' exercises"
            " (its masks: causal, full, sliding-window); leave them out, or leave family and "
            "launcher out for the CPU tiers only",
        ),
        ({"head_dims": (64, 128, 256)}, "declare head_dim [256], which no case of family 'dense'"),
        ({"features": ("sink",)}, "which no case of family 'dense' exercises (its features: none)"),
    ],
    ids=["mask", "head-dim", "feature"],
)
def test_what_no_dense_case_exercises_is_refused_at_the_adapters_line(adapter, change, refused):
    kernel = adapter.KERNELS[0]
    caps = dataclasses.replace(kernel.capabilities, **change)
    with pytest.raises(KernelDeclarationError) as info:
        dataclasses.replace(kernel, capabilities=caps)
    assert f"{__file__}:" in str(info.value) and refused in str(info.value)


def test_a_dense_kernel_takes_no_gpu_shape_and_needs_a_launcher(adapter):
    kernel = adapter.KERNELS[0]
    with pytest.raises(KernelDeclarationError, match="leave gpu_shape out"):
        dataclasses.replace(kernel, gpu_shape=(16, 2048, 576, 512))
    with pytest.raises(KernelDeclarationError, match="family 'dense' needs a launcher"):
        dataclasses.replace(kernel, launcher=None)


def test_a_dense_finding_is_a_strict_expected_failure_no_worse_than_its_figures(adapter):
    # as the planted kernel's would read, were its bug a finding in someone else's package
    name = "full-gqa32x8-d128-fp16-s3782-random"
    found = Finding(
        rules=frozenset({"numerics"}),
        cases=frozenset({name}),
        reason="keys past seq_k join a full mask's softmax",
        worst=params(max_ratio=4.0),
    )
    kernel = dataclasses.replace(adapter.TAIL_MASK_BUG, findings=(found,))
    assert kernel.findings_for_case(name, "numerics") == [found]
    assert not kernel.findings_for_case(name.replace("s3782", "s3840"), "numerics")
    with pytest.raises(KnownFinding):
        judge_case(kernel, name, "numerics", "max err ...", max_ratio=3.2)
    with pytest.raises(AssertionError) as worse:
        judge_case(kernel, name, "numerics", "max err ...", max_ratio=5.0)
    assert not isinstance(worse.value, KnownFinding)


def test_each_launch_writes_a_fresh_nan_output_and_is_kept_apart(adapter):
    # Symptom: a launcher that writes inputs.out returned the same tensor for every launch, so
    # "two launches agree bit for bit" compared a tensor with itself. Fix: dense.launch refills
    # out with NaN, and gpu.run copies each launch's output out (for every family).
    seen = []

    def launcher(module, x):  # a stand-in for the launch protocol, not for a kernel
        seen.append(bool(torch.isnan(x.out).all()))
        return x.out.copy_(x.q * len(seen))

    kernel = dataclasses.replace(adapter.KERNELS[0], launcher=launcher)
    x = gpu.prepare(kernel, _case(kernel, "causal-gqa32x8-d128-fp16-s17-random"), "cpu")
    first, second = gpu.run(kernel, x), gpu.run(kernel, x)
    assert seen == [True, True]
    assert torch.equal(first, x.q) and torch.equal(second, 2 * x.q)


def test_a_launcher_that_returns_its_own_tensor_is_refused_naming_the_adapter(adapter):
    # Symptom: the family judged whatever the launcher returned, so a launcher with an output of
    # its own passed the NaN-padded cases with inputs.out (the buffer the fill and the stray-write
    # check watch) never written. Fix: dense judges inputs.out; another tensor is an error.
    def launcher(module, x):
        return x.q.clone()  # the right values, in a tensor of the launcher's own

    kernel = dataclasses.replace(adapter.KERNELS[0], launcher=launcher)
    x = gpu.prepare(kernel, _case(kernel, "causal-gqa32x8-d128-fp16-s17-random"), "cpu")
    with pytest.raises(
        KernelDeclarationError, match=r"test_dense_family\.py:\d+: Kernel .*not inputs\.out"
    ):
        dense.launch(kernel, None, x)
    assert dense.launch(dataclasses.replace(kernel, launcher=lambda m, x: None), None, x) is x.out


def test_a_mask_declared_and_built_by_no_problem_fails_the_capabilities_tier(adapter):
    # Symptom (review of the one-pipeline change): the capability check counted the family's GPU
    # cases for every kernel, so a declared mask that no gfx942 build compiles passed on the CPU.
    # Fix: a kernel with problems is held to its problems; only one without (the gate's own,
    # built by the registry's tiers) is held to its family's cases.
    from tilegate.families import own
    from tilegate.testing.kernel_tiers import test_kernel_capabilities

    kernel = adapter.KERNELS[0]
    causal_only = tuple(p for p in kernel.problems if p.mask == "causal")
    assert causal_only and "full" in kernel.capabilities.masks
    isa = dataclasses.replace(kernel.isa, min_waves_per_simd=1.0)  # one floor for what is left
    narrowed = dataclasses.replace(kernel, problems=causal_only, isa=isa)
    with pytest.raises(AssertionError, match="declares mask 'full', and no problem or case"):
        test_kernel_capabilities((narrowed, "mask", "full"))
    test_kernel_capabilities((narrowed, "mask", "causal"))
    test_kernel_capabilities((own.PREFILL, "mask", "sliding-window"))
