"""Which GPU cases the determinism and sanitizer tiers pick, on the CPU (no launch): a case name
that no case of the family carries is an error naming it, the kernel and the nearest cases, not a
tier that skips or a child that runs nothing. The kernels are the worked examples'
(suite/dense_kernel, suite/paged_self)."""

from types import SimpleNamespace

import pytest

from tilegate.foreign import dense, paged, tiers
from tilegate.foreign.child import chosen_cases
from tilegate.foreign.child import main as child_main
from tilegate.paths import REPO_ROOT

TYPO = "full-mha16-d128-fp16-s129-randon"  # full-mha16-d128-fp16-s129-random, mistyped


@pytest.fixture(scope="module")
def kernels():
    """The dense example's kernels and the gate's own paged kernels as adapters, by name."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(REPO_ROOT / "suite" / "dense_kernel"))
        import dense_example.adapter
        import paged_self.adapter  # suite/ is on pytest's pythonpath

        found = [*dense_example.adapter.KERNELS, *paged_self.adapter.KERNELS]
        yield {k.name: k for k in found}


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
        lambda: tiers.test_foreign_sanitizer(kernel, "racecheck", tmp_path, monkeypatch)
    )
    assert isinstance(raised, ValueError), f"the tier ended in {type(raised).__name__}: {raised}"
    message = str(raised)
    assert "tilegate.foreign.dense.SANITIZED_CASES['racecheck']" in message
    assert f"['{TYPO}']" in message and "dense-example-fp16" in message
    assert "full-mha16-d128-fp16-s129-random" in message, "the nearest case is named"
    # one known name beside it does not hide it
    with pytest.raises(ValueError, match=TYPO):
        chosen_cases(kernel, ("full-mha16-d128-fp16-s129-random", TYPO))


def test_a_determinism_case_no_case_carries_is_an_error_at_collection(kernels, monkeypatch):
    # Symptom: a determinism case named with a typo was left out of the parametrisation, without
    # a word. Fix: collecting the tier is an error naming it.
    kernel = kernels["paged-self-decode-fp16"]
    typo = "causal-gqa32x8-d128-fp16-ctx3782-decod-random"
    monkeypatch.setattr(paged, "DETERMINISM_CASES", (*paged.DETERMINISM_CASES, typo))
    with pytest.raises(ValueError) as info:
        _generated([kernel], "test_foreign_determinism", "foreign_gpu_case")
    message = str(info.value)
    assert "tilegate.foreign.paged.DETERMINISM_CASES" in message and f"['{typo}']" in message
    assert "paged-self-decode-fp16" in message
    assert "causal-gqa32x8-d128-fp16-ctx3782-decode-random" in message


def test_a_case_the_user_names_to_the_child_and_no_case_carries_is_an_error(kernels, capsys):
    # Symptom: `python -m tilegate.foreign.child MODULE KERNEL CASE` with a mistyped CASE ran
    # nothing and printed DONE: a sanitizer watching it found 0 errors. Fix: an error naming it.
    assert "dense-example-fp16" in kernels
    with pytest.raises(ValueError) as info:
        child_main(["dense_example.adapter", "dense-example-fp16", TYPO])
    assert f"['{TYPO}']" in str(info.value) and "the child's arguments" in str(info.value)
    assert "DONE" not in capsys.readouterr().out
