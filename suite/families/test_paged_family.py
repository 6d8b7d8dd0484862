"""The paged family (tilegate/families/paged.py) on the CPU: its cases are the gate's own paged
cases; its inputs are SGLang's (req_to_token maps each request onto the dense K/V the reference
attends over, and every slot no request names is NaN); its reference, baseline and judge are the
gate's own, and fail a decode that skips the last slot and an extend placed one late after a
prefix; its records join the gate's numerics table; what no paged case exercises is refused at
the adapter's line. The kernels are the gate's own (tilegate/families/own.py), narrowed to one dtype
where a test needs it; their launches are the GPU tiers'."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from tilegate.artifacts.records import NumericsRecord, load
from tilegate.artifacts.render import numerics_by_dtype
from tilegate.artifacts.writer import record_numerics
from tilegate.families import (
    Finding,
    IsaExpectations,
    KernelDeclarationError,
    Problem,
    gpu,
    own,
    paged,
    params,
)
from tilegate.families.child import child_cases
from tilegate.families.verdicts import KnownFinding, judge_case
from tilegate.fixtures.paged_cases import (
    DECODE_CASES,
    EXTEND_CASES,
    LARGE_LOGIT_CASES,
    paged_batch,
)
from tilegate.references.attention import ref_attention
from tilegate.references.metrics import judge
from tilegate.references.paged import baseline_paged_extend, ref_paged_extend

EXTEND = "causal-gqa32x8-d64-fp16-ctx57_3782-new57_129-random"  # a 3653-token prefix, request 1
DECODE = "causal-gqa32x8-d128-fp16-ctx57-decode-random"
NO_PREFIX = "causal-gqa32x8-d128-fp16-ctx57-new57-random"
PREFIXED = "causal-gqa32x8-d128-fp16-ctx129_8192_57-new64_129_1-random"  # request 0: 64 after 65


def _narrowed(kernel, dtype: str):
    caps = dataclasses.replace(kernel.capabilities, dtypes=(dtype,))
    return dataclasses.replace(kernel, name=f"{kernel.name}-{SHORT[dtype]}", capabilities=caps)


SHORT = {"float16": "fp16", "bfloat16": "bf16"}


@pytest.fixture(scope="module")
def adapter():
    """The gate's own paged kernels, one a dtype, as an adapter module would hold them."""
    return SimpleNamespace(
        KERNELS=[
            *(_narrowed(own.EXTEND, dtype) for dtype in ("float16", "bfloat16")),
            *(_narrowed(own.DECODE, dtype) for dtype in ("float16", "bfloat16")),
        ],
        PREFIX_OFF_BY_ONE=own.PREFIX_OFF_BY_ONE,
    )


def _kernel(adapter, name: str):
    (kernel,) = [k for k in [*adapter.KERNELS, adapter.PREFIX_OFF_BY_ONE] if k.name == name]
    return kernel


def _case(name: str) -> paged.Case:
    (case,) = [c for c in paged.all_cases() if c.name == name]
    return case


def _prepared(adapter, name: str, kernel="gate-extend-fp16") -> paged.Inputs:
    return gpu.prepare(_kernel(adapter, kernel), _case(name), "cpu")


def _request(x: paged.Inputs, i: int) -> paged.Inputs:
    """Request ``i`` of a batch alone, on the same pools and req_to_token: a small judge."""
    new = x.extend_seq_lens if x.extend_seq_lens is not None else torch.ones_like(x.seq_lens)
    start, n = int(new[:i].sum()), int(new[i])
    one = slice(i, i + 1)
    cut = lambda t: None if t is None else t[one]  # noqa: E731
    return dataclasses.replace(
        x,
        q=x.q[start : start + n],
        req_pool_indices=x.req_pool_indices[one],
        seq_lens=x.seq_lens[one],
        extend_seq_lens=cut(x.extend_seq_lens),
        extend_prefix_lens=cut(x.extend_prefix_lens),
        extend_start_loc=None if x.extend_start_loc is None else torch.zeros_like(new[one]),
        out=x.out[start : start + n],
    )


def _modelled(x: paged.Inputs, *, prefix_shift: int = 0, skip_last: bool = False):
    """What a paged kernel computes, modelled in FP32 on CPU tensors and rounded to q's dtype: each
    request's context gathered through req_to_token, its new tokens at the end. Planted bugs:
    ``prefix_shift`` places the tokens after a cached prefix that much late, as
    ExtendDefect.PREFIX_OFF_BY_ONE does (kernels/paged_extend.py:90-95); ``skip_last`` leaves
    each context's last slot out."""
    new = x.extend_seq_lens if x.extend_seq_lens is not None else torch.ones_like(x.seq_lens)
    out, start = [], 0
    for i, (ctx, n) in enumerate(zip(x.seq_lens.tolist(), new.tolist())):
        slots = x.req_to_token[int(x.req_pool_indices[i]), :ctx]
        groups = x.q.shape[1] // x.k_buffer.shape[1]
        k, v = (b[slots].float().repeat_interleave(groups, dim=1) for b in (x.k_buffer, x.v_buffer))
        first = ctx - n + (prefix_shift if ctx > n else 0)
        seen = torch.arange(ctx)[None] <= (first + torch.arange(n))[:, None]  # [n, ctx]
        if skip_last:
            seen[:, ctx - 1] = False
        scores = torch.einsum("nhd,chd->hnc", x.q[start : start + n].float(), k) * x.sm_scale
        probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
        out.append(torch.einsum("hnc,chd->nhd", probs, v))
        start += n
    return torch.cat(out).to(x.q.dtype)


def test_the_cases_are_the_gates_own_paged_cases():
    cases = paged.all_cases()
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "two cases share a test id"
    random = [c.paged for c in cases if c.kind == "random"]
    gates = len(EXTEND_CASES) + len(DECODE_CASES)
    assert random[:gates] == [*EXTEND_CASES, *DECODE_CASES]
    # then the sanitizer cases of the other builds (bf16 d128, fp16 d64) that are not the gate's
    derived = {c.name for c in cases[gates + len(LARGE_LOGIT_CASES) :]}
    assert derived and derived <= set(paged.SANITIZED_CASES["memcheck"])
    assert not any("-d128-fp16-" in n for n in derived)
    assert [c.paged for c in cases if c.kind == "large-logits"] == LARGE_LOGIT_CASES
    assert {c.phase for c in cases if c.paged in EXTEND_CASES} == {"extend"}
    assert {c.phase for c in cases if c.paged in DECODE_CASES} == {"decode"}
    # what the determinism and sanitizer tiers pick is in the set: a renamed case is an error here
    picked = {*paged.DETERMINISM_CASES, *(n for ns in paged.SANITIZED_CASES.values() for n in ns)}
    assert picked <= set(names)
    assert {_case(n).phase for n in paged.DETERMINISM_CASES} == {"extend", "decode"}


def test_phases_and_values_outside_the_kernel_are_named_skips(adapter):
    fp16, bf16 = (_kernel(adapter, f"gate-extend-{d}") for d in ("fp16", "bf16"))
    decode = _case(DECODE)
    assert gpu.feature_missing(fp16, decode) == (
        "gate-extend-fp16: its Launchers leave out decode (given: extend)"
    )
    assert gpu.feature_missing(_kernel(adapter, "gate-decode-fp16"), decode) is None
    assert gpu.feature_missing(bf16, _case(NO_PREFIX)) == (
        "gate-extend-bf16: its capabilities leave out dtype 'float16' (declared: bfloat16)"
    )
    assert "leave out head_dim 64" in str(
        gpu.feature_missing(adapter.PREFIX_OFF_BY_ONE, _case(EXTEND))
    )


def test_inputs_map_each_request_onto_the_dense_kv_the_reference_attends_over(adapter):
    x = _prepared(adapter, EXTEND)
    batch = paged_batch(_case(EXTEND).paged, "cpu")  # the gate's own builder, the same seed
    assert torch.equal(x.q, batch.q) and torch.equal(x.req_to_token, batch.req_to_token)
    assert torch.equal(x.extend_prefix_lens, torch.tensor([0, 3653]))
    assert torch.equal(x.extend_start_loc, torch.tensor([0, 57]))
    assert x.out.shape == x.q.shape and torch.isnan(x.out_buffer).all()
    assert x.sm_scale == 64**-0.5
    # request 1 alone: 129 queries after a 3653-token prefix, its context gathered into dense K/V
    one = _request(x, 1)
    slots = x.req_to_token[int(x.req_pool_indices[1]), :3782]
    k, v = x.k_buffer[slots][None], x.v_buffer[slots][None]
    dense = ref_attention(one.q[None], k, v, causal=True, scale=x.sm_scale)[0]
    assert torch.equal(gpu.reference(adapter.KERNELS[0], one), dense)
    assert torch.isfinite(dense).all()


def test_every_pool_slot_no_request_names_is_nan(adapter):
    x = _prepared(adapter, EXTEND)
    named = torch.cat(
        [x.req_to_token[r, :n] for r, n in zip(x.req_pool_indices.tolist(), x.seq_lens.tolist())]
    )
    assert named.unique().numel() == named.numel(), "two requests share a pool slot"
    unused = torch.ones(x.k_buffer.shape[0], dtype=torch.bool)
    unused[named] = False
    assert unused[0] and unused.sum() > named.numel()  # slot 0, where unused entries point
    for pool in (x.k_buffer, x.v_buffer):
        assert torch.isnan(pool[unused]).all() and torch.isfinite(pool[named]).all()


def test_the_reference_and_baseline_are_the_gates_own(adapter):
    kernel = _kernel(adapter, "gate-decode-fp16")
    x = gpu.prepare(kernel, _case(DECODE), "cpu")
    args = paged_batch(_case(DECODE).paged, "cpu").args(False)  # decode: one new token each
    assert torch.equal(gpu.reference(kernel, x), ref_paged_extend(*args))
    assert torch.equal(gpu.baseline(kernel, x), baseline_paged_extend(*args))
    assert gpu.reference(kernel, x).dtype == torch.float32


@pytest.mark.parametrize(
    "name, caught",
    [(DECODE, True), ("causal-gqa32x8-d128-fp16-ctx1-decode-random", True)],
    ids=["ctx57", "ctx1-nan"],
)
def test_the_judge_fails_a_decode_that_skips_the_last_slot(adapter, name, caught):
    kernel = _kernel(adapter, "gate-decode-fp16")
    x = gpu.prepare(kernel, _case(name), "cpu")
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    healthy = judge(_modelled(x), ref, base)
    assert healthy.passed, healthy.explain()
    planted = judge(_modelled(x, skip_last=True), ref, base)
    assert planted.passed is not caught, planted.explain()


@pytest.mark.parametrize(
    "name, request_index, caught",
    [(PREFIXED, 0, True), (NO_PREFIX, 0, False)],
    ids=["prefix65-caught", "no-prefix-passes"],
)
def test_the_judge_fails_an_extend_placed_one_late_after_a_prefix(
    adapter, name, request_index, caught
):
    # On the CPU the bug's arithmetic, judged on one request of the case (the whole of PREFIXED
    # holds 8192-token attention: the GPU tier judges it, planted in the gate's kernel).
    x = _request(_prepared(adapter, name), request_index)
    ref, base = gpu.reference(adapter.KERNELS[0], x), gpu.baseline(adapter.KERNELS[0], x)
    assert judge(_modelled(x), ref, base).passed
    planted = judge(_modelled(x, prefix_shift=1), ref, base)
    assert planted.passed is not caught, planted.explain()


def test_a_paged_record_joins_the_gates_own_numerics_table(adapter, tmp_path):
    kernel = _kernel(adapter, "gate-decode-fp16")
    case = _case(DECODE)
    x = gpu.prepare(kernel, case, "cpu")
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    verdict = judge(ref.to(torch.float16), ref, base)
    failing = dataclasses.replace(verdict, passed=False, max_ratio=3.5)
    record_numerics(tmp_path, f"{kernel.name}-{case.name}", gpu.record_dtype(kernel, case), failing)
    # a record as the gate's own decode kernel writes it (gate-decode, one split count)
    record_numerics(tmp_path, f"{case.paged.name}-n16w1s32-splits1", "float16", verdict)
    (row,) = numerics_by_dtype(load(tmp_path, NumericsRecord))
    assert (row.dtype, row.checks, row.within_bound) == ("float16", 2, 1)
    assert row.worst_max.name == f"{kernel.name}-{case.name}"


def test_writes_past_the_output_are_stray(adapter):
    x = _prepared(adapter, DECODE, "gate-decode-fp16")
    assert gpu.stray_writes(adapter.KERNELS[0], x) is None
    x.out_buffer[x.out.shape[0] + 2, 3, 5] = 0.0  # a tile that stores past the batch's last token
    assert gpu.stray_writes(adapter.KERNELS[0], x) == (
        "the kernel wrote 1 elements past the batch's 1 tokens of output"
    )


def test_the_sanitizer_child_runs_the_phases_the_kernel_launches(adapter):
    extend, decode = (_kernel(adapter, f"gate-{p}-fp16") for p in ("extend", "decode"))
    racecheck = paged.SANITIZED_CASES["racecheck"]
    # fp16 at d128 and d64: a case of each
    assert [c.phase for c in child_cases(extend, racecheck)] == ["extend", "extend"]
    assert [c.phase for c in child_cases(decode, racecheck)] == ["decode", "decode"]
    memcheck = {c.name for c in child_cases(extend)} | {c.name for c in child_cases(decode)}
    assert memcheck == {n for n in paged.SANITIZED_CASES["memcheck"] if "-fp16-" in n}


def _launch(module, x):  # a stand-in for the launch protocol, not for a kernel
    return x.out.copy_(x.q)


@pytest.mark.parametrize(
    "change, refused",
    [
        ({"launcher": _launch}, "family 'paged' takes launcher=tilegate.families.paged.Launchers("),
        ({"launcher": paged.Launchers()}, "its Launchers name no phase: give extend=, decode="),
        ({"launcher": paged.Launchers(decode=3)}, "Launchers(decode=...) is not callable"),
        ({"gpu_shape": (32, 8, 128, 128)}, "family 'paged' takes its shapes from the gate's own"),
        (
            {"masks": ("causal", "full")},
            "capabilities declare mask ['full'], which no extend case of family 'paged' "
            "exercises (its masks: causal); leave them out",
        ),
        ({"head_dims": (64, 128, 256)}, "declare head_dim [256], which no extend case"),
        ({"features": ("sink",)}, "no case of family 'paged' exercises (its features: none)"),
    ],
    ids=["plain-function", "no-phase", "not-callable", "gpu-shape", "mask", "head-dim", "feature"],
)
def test_what_no_paged_case_exercises_is_refused_at_the_adapters_line(adapter, change, refused):
    kernel = _kernel(adapter, "gate-extend-fp16")
    caps = {k: v for k, v in change.items() if k in ("masks", "head_dims", "features")}
    rest = {k: v for k, v in change.items() if k not in caps}
    with pytest.raises(KernelDeclarationError) as info:
        dataclasses.replace(
            kernel, capabilities=dataclasses.replace(kernel.capabilities, **caps), **rest
        )
    assert f"{__file__}:" in str(info.value) and refused in str(info.value)


def test_a_problem_no_paged_case_runs_is_refused_at_the_adapters_line(adapter):
    # Symptom: a bf16 d64 problem passed each axis's check (bf16 and d64 are both exercised),
    # and no case runs the pair: its build skipped every GPU case. Fix: refused, as in dense.
    kernel = _kernel(adapter, "gate-extend-fp16")
    fp16_d64 = Problem("d64-fp16", dtype="float16", head_dim=64, mask="causal")
    bf16_d64 = dataclasses.replace(fp16_d64, name="d64-bf16", dtype="bfloat16")
    caps = dataclasses.replace(kernel.capabilities, dtypes=("bfloat16", "float16"))
    isa = IsaExpectations(mfma_input="float16", wide_global_loads=True, min_waves_per_simd=1.0)
    with pytest.raises(KernelDeclarationError) as info:
        dataclasses.replace(
            kernel,
            problems=(fp16_d64, bf16_d64),
            capabilities=caps,
            isa=isa,
            lds_estimate=lambda problem, config: 0,
        )
    assert f"{__file__}:" in str(info.value)
    assert "problems ['d64-bf16'] have a dtype and head_dim that no extend case of family " in str(
        info.value
    )


def test_launchers_take_keywords_and_refuse_a_phase_they_lack(adapter):
    with pytest.raises(TypeError):
        paged.Launchers(_launch)
    x = _prepared(adapter, DECODE, "gate-decode-fp16")
    with pytest.raises(ValueError, match="no decode launcher: Launchers gives extend"):
        paged.Launchers(extend=_launch)(None, x)


def test_each_launch_writes_a_fresh_nan_output_and_is_kept_apart(adapter):
    # as the dense family's: a launcher that writes inputs.out returns the same tensor each time
    seen = []

    def launcher(module, x):
        seen.append(bool(torch.isnan(x.out).all()))
        return x.out.copy_(x.q * len(seen))

    kernel = dataclasses.replace(adapter.KERNELS[0], launcher=paged.Launchers(extend=launcher))
    x = gpu.prepare(kernel, _case(NO_PREFIX), "cpu")
    first, second = gpu.run(kernel, x), gpu.run(kernel, x)
    assert seen == [True, True]
    assert torch.equal(first, x.q) and torch.equal(second, 2 * x.q)


def test_a_launcher_that_returns_its_own_tensor_is_refused_naming_the_adapter(adapter):
    # as the dense family's: the family judges inputs.out, which the NaN fill and the padded
    # buffer's stray-write check watch, not a tensor of the launcher's own
    kernel = dataclasses.replace(
        adapter.KERNELS[0], launcher=paged.Launchers(extend=lambda module, x: x.q.clone())
    )
    x = gpu.prepare(kernel, _case(NO_PREFIX), "cpu")
    with pytest.raises(KernelDeclarationError, match=r"\.py:\d+: Kernel .*not inputs\.out"):
        paged.launch(kernel, None, x)


def test_a_paged_finding_is_a_strict_expected_failure_no_worse_than_its_figures(adapter):
    # as the planted kernel's would read, were its bug a finding in someone else's package
    found = Finding(
        rules=frozenset({"numerics"}),
        cases=frozenset({PREFIXED}),
        reason="new tokens after a cached prefix sit one position late",
        worst=params(max_ratio=200.0),
    )
    kernel = dataclasses.replace(adapter.PREFIX_OFF_BY_ONE, findings=(found,))
    assert kernel.findings_for_case(PREFIXED, "numerics") == [found]
    assert not kernel.findings_for_case(NO_PREFIX, "numerics")
    with pytest.raises(KnownFinding):
        judge_case(kernel, PREFIXED, "numerics", "max err ...", max_ratio=172.4)
    with pytest.raises(AssertionError) as worse:
        judge_case(kernel, PREFIXED, "numerics", "max err ...", max_ratio=250.0)
    assert not isinstance(worse.value, KnownFinding)
