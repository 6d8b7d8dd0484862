"""Which GPU cases the determinism and sanitizer tiers pick, on the CPU (no launch): a kernel
without fp16 or head_dim 128 gets cases in each dtype and head_dim it builds, not a tier of
capability skips; a case name that no case of the family carries is an error naming it, the
kernel and the nearest cases, not a tier that skips or a child that runs nothing. The kernels are
the dense worked example's (suite/dense_kernel) and the gate's own paged ones
(tilegate/families/own.py)."""

import dataclasses
from types import SimpleNamespace

import pytest

from tilegate.families import dense, gpu, own, paged
from tilegate.families.child import child_cases, chosen_cases
from tilegate.families.child import main as child_main
from tilegate.gate.paths import REPO_ROOT
from tilegate.testing import kernel_tiers as tiers

TYPO = "full-mha16-d128-fp16-s129-randon"  # full-mha16-d128-fp16-s129-random, mistyped


@pytest.fixture(scope="module")
def kernels():
    """The dense example's kernels and the gate's own paged kernels, by name."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(REPO_ROOT / "suite" / "dense_kernel"))
        import dense_example.adapter

        found = [*dense_example.adapter.KERNELS, own.EXTEND, own.DECODE]
        yield {k.name: k for k in found}


def _only(kernel, dtype: str, head_dim: int):
    """``kernel`` narrowed to one build's dtype and head_dim: what a kernel written for just that
    one declares (a d64-only kernel, say)."""
    problems = tuple(p for p in kernel.problems if (p.dtype, p.head_dim) == (dtype, head_dim))
    caps = dataclasses.replace(kernel.capabilities, dtypes=(dtype,), head_dims=(head_dim,))
    isa = kernel.isa
    if isa is not None:
        floors = isa.min_waves_per_simd
        isa = dataclasses.replace(isa, min_waves_per_simd={head_dim: floors[head_dim]})
    name = f"{kernel.name}-{SHORT[dtype]}-d{head_dim}"
    return dataclasses.replace(kernel, name=name, problems=problems, capabilities=caps, isa=isa)


SHORT = {"float16": "fp16", "bfloat16": "bf16"}


# Each kernel's builds; none but the first two fp16 ones is fp16 at head_dim 128.
BUILDS = {
    "dense-example-fp16": None,  # fp16 d128 and d64
    "dense-example-bf16": None,  # bf16 only: the example of the gap
    "dense-example-fp16-d64": ("dense-example-fp16", "float16", 64),
    "gate-extend-fp16-d128": ("gate-extend", "float16", 128),
    "gate-extend-bf16-d128": ("gate-extend", "bfloat16", 128),
    "gate-decode-bf16-d128": ("gate-decode", "bfloat16", 128),
    "gate-extend-fp16-d64": ("gate-extend", "float16", 64),
    "gate-decode-fp16-d64": ("gate-decode", "float16", 64),
}


def _kernel(kernels, name: str):
    narrowed = BUILDS[name]
    return kernels[name] if narrowed is None else _only(kernels[narrowed[0]], *narrowed[1:])


def _dtype_head_dim(case) -> tuple[str, int]:
    shape = case.run.shape if isinstance(case, dense.Case) else case.paged.shape
    return shape.dtype, shape.head_dim


def _builds(kernel) -> set[tuple[str, int]]:
    """Its problems' dtype and head_dim; without problems (the gate's own), its capabilities'."""
    if kernel.problems:
        return {(p.dtype, p.head_dim) for p in kernel.problems}
    caps = kernel.capabilities
    return {(d, h) for d in caps.dtypes for h in caps.head_dims}


def _generated(kernel_list, test: str, fixture: str) -> list:
    """The params the tiers' pytest_generate_tests gives ``fixture`` of ``test``, for these
    kernels (as --tilegate-kernels would select them)."""
    got: list = []
    metafunc = SimpleNamespace(
        config=SimpleNamespace(stash={tiers._KERNELS: kernel_list}),
        fixturenames=[fixture],
        function=SimpleNamespace(__name__=test),
        parametrize=lambda name, params: got.extend(params),
    )
    tiers.pytest_generate_tests(metafunc)
    return got


def _determinism_runs(kernel) -> list:
    """The determinism tier's cases of ``kernel`` that run: not a capability skip."""
    params = _generated([kernel], "test_kernel_determinism", "kernel_gpu_case")
    return [
        case
        for p in params
        if p.values[0] is not None
        for k, case, _ in [p.values[0]]
        if gpu.feature_missing(k, case) is None
    ]


@pytest.mark.parametrize("name", BUILDS)
def test_each_build_gets_determinism_cases_in_its_own_dtype_and_head_dim(kernels, name):
    # Symptom: the dense and paged determinism cases were fp16 d128 only, so a bf16-only or a
    # d64-only kernel had every one skipped for its capabilities. Fix: cases in each dtype and
    # head_dim the family judges, picked by the kernel's capabilities.
    kernel = _kernel(kernels, name)
    runs = _determinism_runs(kernel)
    assert {_dtype_head_dim(c) for c in runs} >= _builds(kernel), [c.name for c in runs]


@pytest.mark.parametrize("tool", tiers.SANITIZERS)
@pytest.mark.parametrize("name", BUILDS)
def test_each_build_gets_sanitizer_cases_in_its_own_dtype_and_head_dim(kernels, name, tool):
    # Symptom: as the determinism cases: a bf16-only dense kernel skipped memcheck, racecheck and
    # initcheck ("its capabilities leave out every case"). Fix: the family's sanitizer cases in
    # each dtype and head_dim it judges, the shapes of the fp16 d128 ones.
    kernel = _kernel(kernels, name)
    wanted = kernel.family_module().SANITIZED_CASES[tool]
    runs = child_cases(kernel, wanted)
    assert {_dtype_head_dim(c) for c in runs} >= _builds(kernel), [c.name for c in runs]


def test_the_fp16_d128_cases_keep_their_names(kernels):
    # GPU results were recorded under these: derived cases are added beside them, never renamed
    assert set(dense.DETERMINISM_CASES) >= {
        f"{m}-gqa32x8-d128-fp16-s{n}-random" for m in ("causal", "full") for n in (3782, 32768)
    }
    assert dense.SANITIZED_CASES["initcheck"][0] == "full-mha16-d128-fp16-s129-random"
    assert paged.SANITIZED_CASES["racecheck"][:2] == (
        "causal-gqa32x8-d128-fp16-ctx57-new57-random",
        "causal-gqa32x8-d128-fp16-ctx57-decode-random",
    )


def test_the_bf16_only_dense_example_is_determinism_and_sanitizer_gated(kernels):
    bf16 = kernels["dense-example-bf16"]
    runs = _determinism_runs(bf16)
    assert runs and {_dtype_head_dim(c) for c in runs} == {("bfloat16", 128)}
    for tool in tiers.SANITIZERS:
        wanted = dense.SANITIZED_CASES[tool]
        # what test_kernel_sanitizer skips on: no case the capabilities take
        assert any(gpu.feature_missing(bf16, c) is None for c in chosen_cases(bf16, wanted))
        assert {c.run.shape.dtype for c in child_cases(bf16, wanted)} == {"bfloat16"}


def _raised(call) -> BaseException:
    """What ``call`` raised: a skip is an exception too, and the tier must not end in one."""
    try:
        call()
    except BaseException as exc:
        return exc
    pytest.fail("it raised nothing")


def test_a_sanitizer_case_no_case_carries_is_an_error_naming_it_the_kernel_and_the_cases(
    kernels, monkeypatch, tmp_path
):
    # Symptom: a family's sanitizer case named with a typo matched nothing, and the tier skipped
    # ("its capabilities leave out every case racecheck runs"). Fix: an error naming the name.
    kernel = kernels["dense-example-fp16"]
    monkeypatch.setitem(dense.SANITIZED_CASES, "racecheck", (TYPO,))
    raised = _raised(
        lambda: tiers.test_kernel_sanitizer(kernel, "racecheck", tmp_path, monkeypatch)
    )
    assert isinstance(raised, ValueError), f"the tier ended in {type(raised).__name__}: {raised}"
    message = str(raised)
    assert "tilegate.families.dense.SANITIZED_CASES['racecheck']" in message
    assert f"['{TYPO}']" in message and "dense-example-fp16" in message
    assert "full-mha16-d128-fp16-s129-random" in message, "the nearest case is named"
    # one known name beside it does not hide it
    with pytest.raises(ValueError, match=TYPO):
        chosen_cases(kernel, ("full-mha16-d128-fp16-s129-random", TYPO))


def test_a_determinism_case_no_case_carries_is_an_error_at_collection(kernels, monkeypatch):
    # Symptom: a determinism case named with a typo was left out of the parametrisation, without
    # a word. Fix: collecting the tier is an error naming it.
    kernel = kernels["gate-decode"]
    typo = "causal-gqa32x8-d128-fp16-ctx3782-decod-random"
    monkeypatch.setattr(paged, "DETERMINISM_CASES", (*paged.DETERMINISM_CASES, typo))
    with pytest.raises(ValueError) as info:
        _generated([kernel], "test_kernel_determinism", "kernel_gpu_case")
    message = str(info.value)
    assert "tilegate.families.paged.DETERMINISM_CASES" in message and f"['{typo}']" in message
    assert "gate-decode" in message
    assert "causal-gqa32x8-d128-fp16-ctx3782-decode-random" in message


def test_a_case_the_user_names_to_the_child_and_no_case_carries_is_an_error(kernels, capsys):
    # Symptom: `python -m tilegate.families.child MODULE KERNEL CASE` with a mistyped CASE ran
    # nothing and printed DONE: a sanitizer watching it found 0 errors. Fix: an error naming it.
    assert "dense-example-fp16" in kernels
    with pytest.raises(ValueError) as info:
        child_main(["dense_example.adapter", "dense-example-fp16", TYPO])
    assert f"['{TYPO}']" in str(info.value) and "the child's arguments" in str(info.value)
    assert "DONE" not in capsys.readouterr().out


def test_a_case_the_user_names_to_the_child_and_the_kernel_does_not_run_is_an_error(
    kernels, capsys
):
    # Symptom: a real case name the kernel's capabilities leave out (bf16 for an fp16 kernel) was
    # dropped without a word: the child ran nothing and printed DONE. Fix: exit 2 naming it.
    left_out = "full-mha16-d128-bf16-s129-random"
    kernel = kernels["dense-example-fp16"]
    (case,) = chosen_cases(kernel, (left_out,))
    assert gpu.feature_missing(kernel, case), "the case should be one the fp16 kernel leaves out"
    code = child_main(["dense_example.adapter", "dense-example-fp16", left_out])
    out, err = capsys.readouterr()
    assert code == 2 and "DONE" not in out
    assert f"dense-example-fp16 does not run ['{left_out}']" in err
