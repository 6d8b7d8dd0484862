"""Latency proxies as an adapted kernel's ISA expectations (issue 37, item 4): a floor on load
overlap and a ceiling on barriers per iteration, measured as the gate's own kernels' are
(tilegate/gfx942/latency.py), judged by the ISA tier, and known as findings with worst figures.
The key-loop kernel of suite/families/latency/key_loop.py (loaded by path), built for gfx942 on the
CPU: with K loaded in the loop (waited for before its MFMAs), hoisted out of it, and with one key
block and no loop at all."""

import pytest

from tilegate.families import (
    Capabilities,
    Config,
    Finding,
    IsaExpectations,
    Kernel,
    KernelDeclarationError,
    Problem,
    Provenance,
    params,
)
from tilegate.families.case import KernelBuild
from tilegate.families.verdicts import KnownFinding
from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.isa_checks import OWN_MAX_BARRIERS, OWN_MIN_LOAD_OVERLAP
from tilegate.testing.kernel_tiers import _build_param
from tilegate.testing.kernel_tiers import test_kernel_isa as isa_tier

pytestmark = pytest.mark.isa

SOURCE = REPO_ROOT / "suite" / "families" / "latency" / "key_loop.py"
PROBLEM = Problem("d128", dtype="bfloat16", head_dim=128, mask="full", args=(128,))


def _config(name: str, k_in_loop: bool, **loop) -> Config:
    kwargs = params(block_n=64, threads=128, k_in_loop=k_in_loop, **loop)
    return Config(name, kwargs=kwargs, threads=128)


IN_LOOP, HOISTED = _config("k-in-loop", True), _config("k-hoisted", False)
ONE_BLOCK = _config("one-block", False, loop=False)


def _case(
    cfg: Config,
    *findings: Finding,
    overlap: float | None = OWN_MIN_LOAD_OVERLAP,
    barriers: int | None = OWN_MAX_BARRIERS,
    without_loop: frozenset = frozenset(),
) -> KernelBuild:
    kernel = Kernel(
        name="loop-scores",
        provenance=Provenance("tilegate_test_loop_scores", path=str(SOURCE)),
        factory="scores",
        configs={"gfx942": (IN_LOOP, HOISTED, ONE_BLOCK)},
        problems=(PROBLEM,),
        capabilities=Capabilities(
            dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=()
        ),
        isa=IsaExpectations(
            mfma_input="bfloat16",
            wide_global_loads=True,
            min_waves_per_simd=1.0,
            min_load_overlap=overlap,
            max_barriers_per_iteration=barriers,
            without_loop=without_loop,
        ),
        lds_estimate=lambda p, c: (64 + 64) * 128 * 2,
        findings=findings,
    )
    return KernelBuild.of(kernel, PROBLEM, cfg, "gfx942")


@pytest.fixture
def in_loop(builder):
    """The in-loop build's proxies: each load of its loop waited for, and barriers around the LDS
    tile (the shape the tests plant misses against)."""
    proxies = builder.isa_reading(_case(IN_LOOP)).latency
    assert proxies.loads and proxies.loads_not_overlapped == proxies.loads and proxies.barriers
    return proxies


def test_a_kernel_that_misses_a_latency_expectation_fails_naming_figure_and_expectation(
    builder, artifacts_dir, in_loop
):
    # Symptom: load overlap, the README's headline latency proxy, was shown for adapted kernels
    # and never judged. Fix: IsaExpectations' floor and ceiling, judged by the ISA tier.
    n, name = in_loop.loads, "loop-scores-d128-k-in-loop"
    with pytest.raises(AssertionError) as info:
        isa_tier(builder, artifacts_dir, _case(IN_LOOP))
    assert not isinstance(info.value, KnownFinding)
    assert (
        f"load-overlap: 0.0 at {name}, want >= 1.0: {n} of the inner loop's {n} loads (global "
        "and scratch) are waited for (s_waitcnt vmcnt) before any MFMA issues after them"
    ) in str(info.value)
    ceiling = in_loop.barriers - 1
    with pytest.raises(AssertionError) as info:
        isa_tier(builder, artifacts_dir, _case(IN_LOOP, overlap=0.0, barriers=ceiling))
    assert not isinstance(info.value, KnownFinding)
    message = str(info.value)
    assert (
        f"barriers: {in_loop.barriers} s_barrier per iteration of the inner loop at {name}, "
        f"want <= {ceiling}"
    ) in message
    assert "load-overlap" not in message, "a floor of 0 is met by any loop"
    # met: the same build at its own figures, and the hoisted one at the gate's standard
    isa_tier(builder, artifacts_dir, _case(IN_LOOP, overlap=0.0, barriers=in_loop.barriers))
    isa_tier(builder, artifacts_dir, _case(HOISTED))


def test_a_latency_expectation_on_a_build_without_a_loop_fails_naming_the_build(
    builder, artifacts_dir
):
    # Symptom: an adapter's min_load_overlap and max_barriers_per_iteration passed on a build
    # with no inner loop: nothing was measured, so nothing could miss. Fix: the ISA tier fails
    # the build, saying the expectation cannot be judged, as a golden figure that is gone fails.
    name = "loop-scores-d128-one-block"
    assert builder.isa_reading(_case(ONE_BLOCK)).inner_loop_cycles is None  # no loop found
    with pytest.raises(AssertionError) as info:
        isa_tier(builder, artifacts_dir, _case(ONE_BLOCK))
    assert not isinstance(info.value, KnownFinding)
    message = str(info.value)
    for expectation in (
        f"min_load_overlap {OWN_MIN_LOAD_OVERLAP}",
        f"max_barriers_per_iteration {OWN_MAX_BARRIERS}",
    ):
        assert (
            f"inner-loop: {expectation} cannot be judged at {name}: its gfx942 code object has "
            "no inner loop (no backward branch"
        ) in message
    # one expectation declared is one violation; none declared, nothing to judge
    with pytest.raises(AssertionError, match="inner-loop: min_load_overlap 0.5 cannot") as info:
        isa_tier(builder, artifacts_dir, _case(ONE_BLOCK, overlap=0.5, barriers=None))
    assert "max_barriers_per_iteration" not in str(info.value)
    isa_tier(builder, artifacts_dir, _case(ONE_BLOCK, overlap=None, barriers=None))


def test_a_build_declared_without_a_loop_is_spared_and_must_have_none(builder, artifacts_dir):
    # a key loop of one trip the compiler unrolled (SGLang's partials at inner_iter 1): declared,
    # the build is not judged on the loop's proxies; declared of a build with a loop, it fails
    isa_tier(builder, artifacts_dir, _case(ONE_BLOCK, without_loop=_built(ONE_BLOCK)))
    with pytest.raises(AssertionError) as info:
        isa_tier(builder, artifacts_dir, _case(HOISTED, without_loop=_built(HOISTED)))
    assert (
        "inner-loop: loop-scores-d128-k-hoisted is declared without an inner loop "
        "(IsaExpectations.without_loop), and its gfx942 code object has one"
    ) in str(info.value)


def _built(cfg: Config) -> frozenset:
    return frozenset({(PROBLEM.name, cfg.name)})


def test_without_loop_names_builds_of_the_kernel_and_spares_declared_expectations():
    where = r"test_latency_proxies.py:\d+: "
    with pytest.raises(KernelDeclarationError, match=where) as info:
        _case(ONE_BLOCK, without_loop=frozenset({("d128", "one-blok")}))
    assert "isa.without_loop names [('d128', 'one-blok')], which are not (problem, config)" in str(
        info.value
    )
    with pytest.raises(
        KernelDeclarationError, match=where + "IsaExpectations: without_loop spares"
    ):
        _case(ONE_BLOCK, overlap=None, barriers=None, without_loop=_built(ONE_BLOCK))


def _finding(not_overlapped: int, barriers: int) -> Finding:
    return Finding(
        rules=frozenset({"load-overlap", "barriers"}),
        reason="K is waited for before its MFMAs",
        worst=params(loads_not_overlapped=not_overlapped, barriers_per_iteration=barriers),
    )


def test_a_latency_finding_stands_within_its_worst_and_turns_red_when_fixed(
    builder, artifacts_dir, in_loop
):
    n, barriers = in_loop.loads_not_overlapped, in_loop.barriers
    known = _finding(n, barriers)
    with pytest.raises(KnownFinding, match="load-overlap: 0.0 at"):
        isa_tier(builder, artifacts_dir, _case(IN_LOOP, known, barriers=barriers - 1))
    worse = f"worse than its known finding: loads_not_overlapped = {n}, the finding admits {n - 1}"
    with pytest.raises(AssertionError, match=worse) as info:
        isa_tier(builder, artifacts_dir, _case(IN_LOOP, _finding(n - 1, barriers), barriers=0))
    assert not isinstance(info.value, KnownFinding)
    # fixed (K hoisted: no load, no barrier in the loop): the tier passes, and the strict xfail
    # the finding puts on the test, which only KnownFinding satisfies, makes that pass red
    fixed = _case(HOISTED, known, barriers=barriers - 1)
    isa_tier(builder, artifacts_dir, fixed)
    (mark,) = _build_param(fixed, compiling=False).marks[1:]
    assert mark.name == "xfail" and mark.kwargs["strict"] and mark.kwargs["raises"] is KnownFinding


def test_a_latency_expectation_out_of_range_is_refused_naming_the_adapters_line():
    where = r"test_latency_proxies.py:\d+: IsaExpectations: "
    for floor in (-0.5, 1.5):
        with pytest.raises(KernelDeclarationError, match=where) as info:
            _case(IN_LOOP, overlap=floor)
        assert f"min_load_overlap {floor} is a share of the inner loop's loads" in str(info.value)
    for ceiling in (-1, 2.5):
        with pytest.raises(KernelDeclarationError, match=where) as info:
            _case(IN_LOOP, barriers=ceiling)  # type: ignore[arg-type]
        assert f"max_barriers_per_iteration {ceiling} is a count" in str(info.value)
