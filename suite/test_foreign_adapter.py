"""The adapter's bad input gets a clear error, and its findings judge as they say: the declaration
checks (tilegate/foreign/spec.py), discovery (discover.py), provenance, the LDS filter and the
known-finding verdict of the tiers (tiers.py), on the CPU without any foreign package."""

import dataclasses

import pytest

from tilegate.foreign import Capabilities, Config, Finding, ForeignKernel, ForeignKernelError, IsaExpectations, Problem, Provenance, params
from tilegate.foreign.case import ForeignCase
from tilegate.foreign.discover import discover, load
from tilegate.foreign.tiers import KnownFinding, _over_budget, _verdict
from tilegate.isa_checks import Violation

CAPS = Capabilities(("bfloat16",), (128,), ("full",), ("heads",))
PROBLEM = Problem("h8", "bfloat16", 128, "full", (8,), params(heads=8))
CFG = Config("c", params(block=64), 128)
KERNEL = ForeignKernel("k", Provenance("json", package="no-such-package-here"), "f", {"gfx942": (CFG,)}, (PROBLEM,),
                       CAPS, IsaExpectations(None, False, 1.0), lambda p, c: 70000,
                       findings=(Finding(frozenset({"spill", "mfma"}), "known"),))
KERNELS = [KERNEL]  # what load() finds in this module
TWIN = [dataclasses.replace(KERNEL)]  # another kernel of the same name


def test_a_problem_outside_the_capabilities_is_refused_by_name():
    with pytest.raises(ForeignKernelError, match="problem h8 has dtype 'float16', outside its capabilities"):
        dataclasses.replace(KERNEL, problems=(dataclasses.replace(PROBLEM, dtype="float16"),))
    with pytest.raises(ForeignKernelError, match=r"fixes \['topk'\], which its capabilities do not declare"):
        dataclasses.replace(KERNEL, problems=(dataclasses.replace(PROBLEM, shape=params(topk=2048)),))
    with pytest.raises(ForeignKernelError, match="a GPU family needs a launcher"):
        dataclasses.replace(KERNEL, family="sparse-mla")


def test_discovery_names_what_it_could_not_load():
    with pytest.raises(ForeignKernelError, match="--tilegate-kernels 'no_such_adapter': ModuleNotFoundError"):
        discover(["no_such_adapter"])
    with pytest.raises(ForeignKernelError, match="holds str, not tilegate.foreign.ForeignKernel"):
        load("tilegate.foreign.sglang_dsa:__doc__", "test")
    assert load(__name__, "test") == [KERNEL]
    with pytest.raises(ForeignKernelError, match="kernel 'k' is declared twice"):
        discover([__name__, f"{__name__}:TWIN"])


def test_provenance_says_what_is_missing_in_one_line():
    assert KERNEL.provenance.missing_reason().startswith("no-such-package-here is not installed in this environment")
    wrong = Provenance("pytest", package="pytest", version="0.0.1")
    assert " is installed, the adapter is for 0.0.1" in wrong.missing_reason()
    assert Provenance("x", path="/no/such/kernel.py").missing_reason() == "kernel source /no/such/kernel.py not found"
    with pytest.raises(ValueError, match="name a package or a path"):
        Provenance("x")


def test_a_config_over_the_lds_budget_is_not_compiled():
    (over,) = _over_budget(ForeignCase.of(KERNEL, PROBLEM, CFG, "gfx942"))
    assert over.rule == "lds-budget" and "estimate 70000 bytes > 65536" in over.detail


def test_a_known_finding_must_break_exactly_its_rules():
    findings = KERNEL.findings_for(PROBLEM, CFG)
    spill, mfma, lds = Violation("spill", "x"), Violation("mfma", "y"), Violation("lds-budget", "z")
    with pytest.raises(KnownFinding):
        _verdict(KERNEL, findings, [spill, mfma])
    for broken in ([spill], [spill, mfma, lds]):  # partly fixed, or something more broke: a plain failure
        with pytest.raises(AssertionError, match="the known finding broke") as info:
            _verdict(KERNEL, findings, broken)
        assert not isinstance(info.value, KnownFinding)
    _verdict(KERNEL, [], [])  # nothing known, nothing broken


def test_findings_are_scoped_to_their_builds_cases_versions_and_gpus():
    scoped = Finding(frozenset({"numerics"}), "r", cases=frozenset({"t1-dense"}))
    assert scoped.covers_case("t1-dense", "numerics") and not scoped.covers_case("t1-dense", "determinism")
    assert not scoped.covers("h8", "c"), "a GPU case's finding is not an ISA one"
    assert not dataclasses.replace(scoped, tilelang="0.0.1").covers_case("t1-dense", "numerics")
    lowering = Finding(frozenset({"lowering"}), "r", cases=frozenset({"t1-dense"}), gpu="no-such-gpu")
    assert not lowering.covers_case("t1-dense", "numerics")
    assert Finding(frozenset({"lowering"}), "r", cases=frozenset({"t1-dense"})).covers_case("t1-dense", "determinism")
