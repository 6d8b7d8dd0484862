"""An adapted kernel's build is keyed on the code this process runs (tilegate/families/case.py,
provenance.py): a working copy that shadows the installed package is what is hashed, a module
edited after its import is keyed as imported, and of the adapter only what the lowering takes is
in the key. On the CPU: the packages are folders on sys.path, with the dist-info an install writes.
"""

from __future__ import annotations

import dataclasses
import importlib
import secrets
import sys
from pathlib import Path

import pytest

from tilegate.families import (
    Capabilities,
    Config,
    IsaExpectations,
    Kernel,
    Problem,
    Provenance,
    params,
)
from tilegate.families.case import KernelBuild
from tilegate.gate.paths import REPO_ROOT

KERNEL = REPO_ROOT / "suite" / "external_kernel" / "example_kernel" / "kernels.py"
# The edit: a key block four times as tall. LDS goes from 32768 B to 81920 B, over gfx942's 64 KiB;
# the adapter's estimate stays at 32768.
LINE = '    m, n = T.dynamic("m"), T.dynamic("n")\n'
TALLER = "    block_n = 4 * block_n\n" + LINE
CFG = Config("m64n64", kwargs=params(block_m=64, block_n=64, head_dim=128), threads=128)
PROBLEM = Problem("d128", dtype="bfloat16", head_dim=128, mask="full")
ADAPTER = """
from tilegate.families import (
    Capabilities, Config, Finding, Kernel, IsaExpectations, Problem, Provenance, params
)
KERNELS = [Kernel(
    name="key-adapter",
    provenance=Provenance("{module}", path="{path}"),
    factory="scores",
    configs={{"gfx942": (Config("m64n64", kwargs=params(block_m=64, block_n=64, head_dim=128),
                               threads=128),)}},
    problems=(Problem("d128", dtype="bfloat16", head_dim=128, mask="full"),),
    capabilities=Capabilities(dtypes=("bfloat16",), head_dims=(128,), masks=("full",),
                              compile_time=()),
    isa=IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0),
    lds_estimate=lambda p, c: {estimate},
    findings=(Finding(rules=frozenset({{"spill"}}), reason="{reason}"),),
)]
"""


def _lds(problem: Problem, cfg: Config) -> int:
    k = dict(cfg.kwargs)
    return (k["block_m"] + k["block_n"]) * k["head_dim"] * 2


def _kernel(provenance: Provenance) -> Kernel:
    return Kernel(
        name="key-test",
        provenance=provenance,
        factory="scores",
        configs={"gfx942": (CFG,)},
        problems=(PROBLEM,),
        capabilities=Capabilities(
            dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=()
        ),
        isa=IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0),
        lds_estimate=_lds,
    )


def _case(kernel: Kernel) -> KernelBuild:
    return KernelBuild.of(kernel, kernel.problems[0], kernel.configs["gfx942"][0], "gfx942")


@pytest.fixture
def module_name():
    """A module name no other test imports; its modules leave sys.modules afterwards."""
    name = f"tilegate_key_{secrets.token_hex(4)}"
    yield name
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]


def _package(root: Path, name: str, dist: str | None = None) -> Path:
    """``root/name``, the example kernel as ``name.kernels``; with ``dist``, the dist-info that
    installing the distribution writes beside it."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(KERNEL.read_text())
    if dist is not None:
        info = root / f"{name}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}/kernels.py,,\n")
    return package


def _edit(source: Path) -> None:
    text = source.read_text()
    assert LINE in text
    source.write_text(text.replace(LINE, TALLER))


def _next_run(module: str) -> None:
    """What a new process would do: import the module again."""
    del sys.modules[module]
    importlib.invalidate_caches()


@pytest.mark.compile
def test_the_working_copy_that_shadows_the_install_is_what_is_built(
    fresh_builder, tmp_path, module_name, monkeypatch
):
    # Symptom: a kernel edit that raised its LDS stayed green with the old figure until the package
    # was reinstalled: the key hashed the installed copy, pytest imported the working copy. Fix: the
    # key hashes each module's file as this process imports it (Provenance.source_file).
    from tilegate.families.verdicts import estimate_off, over_budget
    from tilegate.gate.builder import KernelBuilder

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    dist = module_name.replace("_", "-")
    installed = _package(tmp_path / "site", module_name, dist=dist)
    working = _package(tmp_path / "repo", module_name)
    monkeypatch.syspath_prepend(str(installed.parent))
    # the kernel's repository first, as pytest's rootdir (or an editable install) puts it
    monkeypatch.syspath_prepend(str(working.parent))
    kernel = _kernel(Provenance(f"{module_name}.kernels", package=dist, version="0.1.0"))
    case = _case(kernel)
    assert kernel.provenance.missing_reason() is None

    first = case.cache_key()
    assert fresh_builder.lowered(case).lds_bytes == 32768
    assert estimate_off(case, 32768) == [] and over_budget(case, 32768) == []
    _edit(working / "kernels.py")  # the installed copy is not reinstalled
    _next_run(f"{module_name}.kernels")
    lds = KernelBuilder(fresh_builder.cache_dir).lowered(case).lds_bytes
    assert lds == 81920, "the edited working copy's LDS"
    assert "lowered 81920 B: off by 60%" in str(estimate_off(case, lds))
    assert "lowered 81920 B of LDS > 65536" in str(over_budget(case, lds))
    assert case.cache_key() != first
    assert kernel.provenance.source_file() == working / "kernels.py"


@pytest.mark.compile
def test_a_module_edited_after_its_import_is_not_built_in_that_process(
    fresh_builder, tmp_path, module_name
):
    # Symptom: the key read the kernel's file at each build, the build ran the module imported
    # before (and TileLang reparsed its prim_func from the edited file): an edit during a session
    # wrote that mix under the new source's key, and the next run read it. Fix: a loaded module's
    # file must still hold what was imported, else SourceChanged; the next process builds the edit.
    from tilegate.families.provenance import SourceChanged
    from tilegate.gate.builder import KernelBuilder

    source = tmp_path / f"{module_name}.py"
    source.write_text(KERNEL.read_text())
    kernel = _kernel(Provenance(module_name, path=str(source)))
    case = _case(kernel)
    first = case.cache_key()
    assert fresh_builder.lowered(case).lds_bytes == 32768
    _edit(source)
    with pytest.raises(SourceChanged, match=f"{source.name} changed after this process imported"):
        KernelBuilder(fresh_builder.cache_dir).lowered(case)
    _next_run(module_name)
    assert KernelBuilder(fresh_builder.cache_dir).lowered(case).lds_bytes == 81920
    assert case.cache_key() != first


def test_only_what_the_lowering_takes_is_in_the_key(tmp_path, module_name, monkeypatch):
    # Symptom: the key hashed the whole adapter module, so an edit of a finding's text rebuilt every
    # build of its kernels (21 s -> 95 s). Fix: of the adapter, the key holds the factory, its
    # arguments (the problem's args, the config's keywords) and the target globals.
    source = tmp_path / f"{module_name}_kernels.py"
    source.write_text(KERNEL.read_text())
    adapter = tmp_path / f"{module_name}.py"
    monkeypatch.syspath_prepend(str(tmp_path))

    def declared(estimate: int, reason: str) -> Kernel:
        adapter.write_text(
            ADAPTER.format(module=source.stem, path=source, estimate=estimate, reason=reason)
        )
        sys.modules.pop(module_name, None)
        importlib.invalidate_caches()
        return importlib.import_module(module_name).KERNELS[0]

    kernel = declared(32768, "spills 386 VGPRs")
    key = _case(kernel).cache_key()
    reworded = declared(36000, "spills 394 VGPRs (1532 B of scratch)")
    assert _case(reworded).cache_key() == key
    unlowered = dataclasses.replace(
        reworded,
        name="renamed",
        findings=(),
        isa=dataclasses.replace(reworded.isa, min_waves_per_simd=0.5),
        problems=(dataclasses.replace(PROBLEM, name="renamed"),),
        configs={"gfx942": (dataclasses.replace(CFG, name="renamed", threads=256),)},
    )
    assert _case(unlowered).cache_key() == key
    lowered_otherwise = [
        dataclasses.replace(
            kernel,
            configs={
                "gfx942": (
                    Config("c", kwargs=params(block_m=64, block_n=32, head_dim=128), threads=128),
                )
            },
        ),
        dataclasses.replace(kernel, problems=(dataclasses.replace(PROBLEM, args=(1,)),)),
        dataclasses.replace(kernel, target_globals={"gfx942": {"_is_hip": True}}),
        dataclasses.replace(kernel, factory="other"),
    ]
    assert all(_case(k).cache_key() != key for k in lowered_otherwise)
    _edit(source)  # the factory, not imported yet: the key reads what an import would
    assert _case(kernel).cache_key() != key


def test_a_module_this_process_cannot_import_has_no_key():
    missing = Provenance("tilegate_no_such_kernel.kernels", package="pytest")
    with pytest.raises(ModuleNotFoundError, match="tilegate_no_such_kernel.kernels: not found"):
        missing.sha256()


def test_the_also_modules_are_hashed_where_this_process_finds_them(
    tmp_path, module_name, monkeypatch
):
    dist = module_name.replace("_", "-")
    installed = _package(tmp_path / "site", module_name, dist=dist)
    working = _package(tmp_path / "repo", module_name)
    for package in (installed, working):
        (package / "dtypes.py").write_text('KV = "bfloat16"\n')
    monkeypatch.syspath_prepend(str(installed.parent))
    monkeypatch.syspath_prepend(str(working.parent))
    source = Provenance(f"{module_name}.kernels", package=dist, also=(f"{module_name}.dtypes",))
    key = _case(_kernel(source)).cache_key()
    (installed / "dtypes.py").write_text('KV = "float8_e4m3fnuz"\n')
    assert _case(_kernel(source)).cache_key() == key, "the installed copy is not imported here"
    (working / "dtypes.py").write_text('KV = "float8_e4m3fnuz"\n')
    assert _case(_kernel(source)).cache_key() != key
    assert source.source_file(f"{module_name}.dtypes") == working / "dtypes.py"
