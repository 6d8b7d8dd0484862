"""The adapter's bad input gets a clear error, and its findings judge as they say: the declaration
checks (tilegate/families/spec.py), discovery (discover.py), provenance, the LDS budget (on the
lowered figure) and the known-finding verdict of the tiers (tiers.py), on the CPU without any
package of the kernel's own."""

import dataclasses
import sys

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
from tilegate.families.case import KernelBuild, cases
from tilegate.families.discover import discover, load
from tilegate.families.provenance import SourceChanged
from tilegate.families.verdicts import (
    KnownFinding,
    estimate_off,
    judge_build,
    judge_case,
    lowering_finding,
    over_budget,
)
from tilegate.gate.paths import REPO_ROOT
from tilegate.gfx942.isa_checks import Violation

CAPS = Capabilities(
    dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=("heads",)
)
PROBLEM = Problem(
    "h8", dtype="bfloat16", head_dim=128, mask="full", args=(8,), shape=params(heads=8)
)
CFG = Config("c", kwargs=params(block=64), threads=128)
NO_MATRIX = IsaExpectations(mfma_input=None, wide_global_loads=False, min_waves_per_simd=1.0)
KERNEL = Kernel(
    name="k",
    provenance=Provenance("json", package="no-such-package-here"),
    factory="f",
    configs={"gfx942": (CFG,)},
    problems=(PROBLEM,),
    capabilities=CAPS,
    isa=NO_MATRIX,
    lds_estimate=lambda p, c: 70000,
    findings=(Finding(rules=frozenset({"spill", "mfma"}), reason="known"),),
)
KERNELS = [KERNEL]  # what load() finds in this module
TWIN = [dataclasses.replace(KERNEL)]  # another kernel of the same name


def test_a_problem_outside_the_capabilities_is_refused_by_name():
    with pytest.raises(
        KernelDeclarationError, match="problem h8 has dtype 'float16', outside its capabilities"
    ):
        dataclasses.replace(KERNEL, problems=(dataclasses.replace(PROBLEM, dtype="float16"),))
    with pytest.raises(
        KernelDeclarationError, match=r"fixes \['topk'\], which its capabilities do not declare"
    ):
        dataclasses.replace(
            KERNEL, problems=(dataclasses.replace(PROBLEM, shape=params(topk=2048)),)
        )
    with pytest.raises(KernelDeclarationError, match="a GPU family needs a launcher"):
        dataclasses.replace(KERNEL, family="sparse-mla")


def test_a_problem_may_name_the_configs_it_is_built_with():
    # Symptom: every config was crossed with every problem, so a tile size picked for one head
    # count was built (and judged) for every other. Fix: Problem.configs names its own.
    small, large = (Config(f"b{b}", kwargs=params(block=b), threads=128) for b in (32, 64))
    h16 = dataclasses.replace(PROBLEM, name="h16", args=(16,), configs=("b32",))
    h128 = dataclasses.replace(PROBLEM, name="h128", args=(128,), configs=("b64",))
    crossed = dataclasses.replace(KERNEL, configs={"gfx942": (small, large)}, problems=(h16, h128))
    builds = [(p.name, c.name) for p, c in crossed.builds("gfx942")]
    assert builds == [("h16", "b32"), ("h128", "b64")]
    assert [c.name for c in cases(crossed, "gfx942")] == ["k-h16-b32", "k-h128-b64"]
    every = dataclasses.replace(crossed, problems=(h16, PROBLEM))  # None: the cross product
    assert [(p.name, c.name) for p, c in every.builds("gfx942")] == [
        ("h16", "b32"),
        ("h8", "b32"),
        ("h8", "b64"),
    ]
    with pytest.raises(KernelDeclarationError) as info:
        dataclasses.replace(crossed, problems=(dataclasses.replace(h16, configs=("b16",)), h128))
    assert str(info.value).endswith(
        "Kernel 'k': problem h16 names configs ['b16'], and its configs are ['b32', "
        "'b64']: name some of those, or leave configs out for every one"
    )
    with pytest.raises(KernelDeclarationError, match=r"configs \['b64'\] are named by no problem"):
        dataclasses.replace(crossed, problems=(h16,))


def test_the_records_take_keywords_so_an_adapter_says_what_each_value_is():
    with pytest.raises(TypeError, match="positional"):
        IsaExpectations("bfloat16", True, 1.0)
    with pytest.raises(TypeError, match="positional"):
        Capabilities(("bfloat16",), (128,), ("full",), ("heads",))
    with pytest.raises(TypeError, match="positional"):
        Finding(frozenset({"spill"}), "known")
    with pytest.raises(TypeError, match="positional"):
        Kernel("k", KERNEL.provenance, "f")
    with pytest.raises(TypeError, match="positional"):  # a problem's and a config's name only
        Problem("h8", "bfloat16", 128, "full")
    with pytest.raises(TypeError, match="positional"):
        Config("c", params(block=64), 128)
    assert dataclasses.replace(PROBLEM, dtype="float16").name == "h8"


def test_discovery_names_what_it_could_not_load():
    with pytest.raises(
        KernelDeclarationError, match="--tilegate-kernels 'no_such_adapter': ModuleNotFoundError"
    ):
        discover(["no_such_adapter"])
    with pytest.raises(KernelDeclarationError, match="holds str, not tilegate.families.Kernel"):
        load("tilegate.families.sglang_dsa:__doc__", "test")
    assert load(__name__, "test") == [KERNEL]
    with pytest.raises(KernelDeclarationError, match="kernel 'k' is declared twice"):
        discover([__name__, f"{__name__}:TWIN"])


def test_provenance_says_what_is_missing_in_one_line():
    assert KERNEL.provenance.missing_reason().startswith(
        "no-such-package-here is not installed in this environment"
    )
    wrong = Provenance("pytest", package="pytest", version="0.0.1")
    assert " is installed, the adapter is for 0.0.1" in wrong.missing_reason()
    assert (
        Provenance("x", path="/no/such/kernel.py").missing_reason()
        == "kernel source /no/such/kernel.py not found"
    )
    with pytest.raises(ValueError, match="name a package or a path"):
        Provenance("x")


def test_the_lowered_lds_figure_judges_the_budget_and_the_estimate_is_checked_against_it():
    case = KernelBuild.of(KERNEL, PROBLEM, CFG, "gfx942")  # estimated 70000 B
    assert over_budget(case, 65536) == [] and estimate_off(case, 66000) == []
    (over,) = over_budget(case, 70000)
    assert over.rule == "lds-budget" and over.detail.startswith(
        "k-h8-c: lowered 70000 B of LDS > 65536 per workgroup (the adapter estimates 70000)"
    )
    (off,) = estimate_off(case, 32768)
    assert off.rule == "lds-estimate" and "estimates 70000 B of LDS, lowered 32768 B" in off.detail


def test_a_known_finding_must_break_exactly_its_rules_and_be_no_worse():
    findings = KERNEL.findings_for(PROBLEM, CFG)
    spill, mfma, lds = Violation("spill", "x"), Violation("mfma", "y"), Violation("lds-budget", "z")
    with pytest.raises(KnownFinding):
        judge_build(KERNEL, findings, [spill, mfma], {})
    # partly fixed, or something more broke: a plain failure
    for broken in ([spill], [spill, mfma, lds]):
        with pytest.raises(AssertionError, match="the known finding broke") as info:
            judge_build(KERNEL, findings, broken, {})
        assert not isinstance(info.value, KnownFinding)
    judge_build(KERNEL, [], [], {})  # nothing known, nothing broken
    bounded = [
        dataclasses.replace(findings[0], worst=params(vgpr_spill_count=395, waves_per_simd=0.5))
    ]
    with pytest.raises(KnownFinding):
        judge_build(
            KERNEL, bounded, [spill, mfma], {"vgpr_spill_count": 395, "waves_per_simd": 0.5}
        )
    for worse in (
        {"vgpr_spill_count": 396, "waves_per_simd": 0.5},
        {"vgpr_spill_count": 10, "waves_per_simd": 0.25},
    ):
        with pytest.raises(AssertionError, match="worse than its known finding") as info:
            judge_build(KERNEL, bounded, [spill, mfma], worse)
        assert not isinstance(info.value, KnownFinding)


def test_a_gpu_finding_stands_only_for_its_own_failure():
    nan = Finding(
        rules=frozenset({"numerics"}), reason="r", cases=frozenset({"t1-x"}), nonfinite=True
    )
    big = Finding(
        rules=frozenset({"numerics"}),
        reason="r",
        cases=frozenset({"t1-x"}),
        worst=params(max_ratio=100),
    )
    for finding, args, stands in (
        (nan, {"nonfinite": True}, True),
        (nan, {"max_ratio": 3.0}, False),
        (big, {"max_ratio": 45.0}, True),
        (big, {"max_ratio": 1e4}, False),
    ):
        kernel = dataclasses.replace(KERNEL, findings=(finding,))
        with pytest.raises(AssertionError) as info:
            judge_case(kernel, "t1-x", "numerics", "msg", **args)
        assert isinstance(info.value, KnownFinding) == stands, (finding, args)
    lowering = Finding(
        rules=frozenset({"lowering"}),
        reason="r",
        cases=frozenset({"t1-x"}),
        error="cannot be reordered",
    )
    kernel = dataclasses.replace(KERNEL, findings=(lowering,))
    assert lowering_finding(kernel, "t1-x", "numerics", RuntimeError("... cannot be reordered ..."))
    assert (
        lowering_finding(
            kernel, "t1-x", "numerics", TypeError("launch() got an unexpected keyword")
        )
        is None
    )


def test_findings_are_scoped_to_their_builds_cases_versions_and_gpus():
    scoped = Finding(rules=frozenset({"numerics"}), reason="r", cases=frozenset({"t1-dense"}))
    assert scoped.covers_case("t1-dense", "numerics") and not scoped.covers_case(
        "t1-dense", "determinism"
    )
    assert not scoped.covers("h8", "c"), "a GPU case's finding is not an ISA one"
    assert not dataclasses.replace(scoped, tilelang="0.0.1").covers_case("t1-dense", "numerics")
    lowering = Finding(
        rules=frozenset({"lowering"}), reason="r", cases=frozenset({"t1-dense"}), gpu="no-such-gpu"
    )
    assert not lowering.covers_case("t1-dense", "numerics")
    anywhere = dataclasses.replace(lowering, gpu=None)
    assert anywhere.covers_case("t1-dense", "determinism")


def _scores_by_path(tmp_path, name: str, threads: int) -> Kernel:
    """The external example's ``scores`` factory from a copy of its file under ``tmp_path``,
    declared by path (no package) as module ``tilegate_test_scores_<name>``, one m64n64 config
    with ``threads``."""
    source = tmp_path / f"scores_{name}.py"
    source.write_text(
        (REPO_ROOT / "suite" / "external_kernel" / "example_kernel" / "kernels.py").read_text()
    )
    caps = Capabilities(dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=())
    config = Config("m64n64", kwargs=params(block_m=64, block_n=64, head_dim=128), threads=threads)
    return Kernel(
        name=name.replace("_", "-"),
        provenance=Provenance(f"tilegate_test_scores_{name}", path=str(source)),
        factory="scores",
        configs={"gfx942": (config,)},
        problems=(Problem("d128", dtype="bfloat16", head_dim=128, mask="full"),),
        capabilities=caps,
        isa=IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0),
        lds_estimate=lambda p, c: 32768,
    )


def _gfx942_case(kernel: Kernel) -> KernelBuild:
    return KernelBuild.of(kernel, kernel.problems[0], kernel.configs["gfx942"][0], "gfx942")


@pytest.mark.compile
def test_a_kernel_from_a_file_path_builds_and_its_source_keys_the_cache(
    builder, tmp_path, monkeypatch
):
    """Provenance by path (no package): the file is loaded as a module, built for gfx942, and an
    edit to it changes the cache key once the module is imported again (suite/families/
    test_build_key.py: while it is loaded, the edit is SourceChanged)."""
    kernel = _scores_by_path(tmp_path, "by_path", threads=128)
    source = tmp_path / "scores_by_path.py"
    case = _gfx942_case(kernel)
    assert kernel.provenance.missing_reason() is None
    assert builder.isa_reading(case).histogram("v_mfma")
    kernel.provenance.load()  # as the provenance tier does: the build may come from the cache
    key = case.cache_key()
    source.write_text(source.read_text() + "\n# edited\n")
    with pytest.raises(SourceChanged):
        case.cache_key()
    monkeypatch.delitem(sys.modules, "tilegate_test_scores_by_path")
    assert case.cache_key() != key


@pytest.mark.compile
def test_a_config_whose_threads_are_not_the_kernels_is_refused(builder, tmp_path):
    """Symptom: Config(threads=256) over a factory that launches 128 (its threads keyword left at
    its default) passed the ISA tier at 2.00 waves per SIMD, twice the kernel's 1.00: the tier
    counts waves from the adapter's threads. Fix: the compile and ISA tiers hold them to the code
    object's .max_flat_workgroup_size, naming the adapter's line."""
    from tilegate.testing.kernel_tiers import check_threads

    case = _gfx942_case(_scores_by_path(tmp_path, "threads", threads=256))
    obj = builder.code_object(case)
    with pytest.raises(
        KernelDeclarationError,
        match=r"config m64n64 declares threads=256, and its code object launches 128 .*"
        r"test_adapter\.py:\d+",
    ):
        check_threads(case, obj)
    config = dataclasses.replace(case.cfg, threads=128)
    check_threads(dataclasses.replace(case, cfg=config), obj)


def test_every_family_module_holds_what_the_tiers_call():
    # a new family (paged, next) is one module: what it lacks is named here, not at a GPU launch
    import importlib

    from tilegate.families.gpu import Family
    from tilegate.families.spec import FAMILIES

    wanted = {n for n in vars(Family) if not n.startswith("_")} | set(Family.__annotations__)
    for name, module in FAMILIES.items():
        lacks = sorted(n for n in wanted if not hasattr(importlib.import_module(module), n))
        assert not lacks, f"family {name!r} ({module}) lacks {lacks}"
    assert {"refusal", "family_cases", "launch", "SANITIZED_CASES"} <= wanted
