"""A bad adapter gets one clear error naming its line and what to change (issue 37, item 6): an
unknown case family, a capability its family cannot exercise, an adapter or a kernel module that
raises at import, a factory that refuses the declared arguments. Each adapter is a small file
written here and found as --tilegate-kernels finds one."""

import pytest

from tilegate.families import KernelDeclarationError
from tilegate.families.case import KernelBuild, load_module
from tilegate.families.discover import discover
from tilegate.gate.paths import REPO_ROOT

KERNEL_SOURCE = REPO_ROOT / "suite" / "external_kernel" / "example_kernel" / "kernels.py"
HEAD = """from tilegate.families import (
    Capabilities, Config, Kernel, IsaExpectations, Problem, Provenance, params)
FIELDS = dict(
    name="bad", factory="scores",
    provenance=Provenance("{module}_kernel", path={source!r}),
    configs={{"gfx942": (Config("c", kwargs=params({kwargs}), threads=128),)}},
    problems=(Problem("d128", dtype="bfloat16", head_dim=128, mask="full"),),
    isa=IsaExpectations(mfma_input="bfloat16", wide_global_loads=True, min_waves_per_simd=1.0),
    lds_estimate=lambda p, c: 32768)
CAPS = dict(dtypes=("bfloat16",), head_dims=(128,), masks=("full",), compile_time=())
GPU = dict(launcher=lambda module, x, stored: None, gpu_shape=(16, 2048, 576, 512))
"""
GOOD_KWARGS = "block_m=64, block_n=64, head_dim=128"


@pytest.fixture
def adapter(tmp_path, monkeypatch, request):
    """adapter(body, kwargs=..., source=...) -> (module name, path, line of body's last line)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(body: str, kwargs: str = GOOD_KWARGS, source=KERNEL_SOURCE):
        module = f"bad_adapter_{request.node.name[5:40]}"
        text = HEAD.format(module=module, source=str(source), kwargs=kwargs) + body + "\n"
        path = tmp_path / f"{module}.py"
        path.write_text(text)
        return module, path, len(text.splitlines())

    return write


def test_an_unknown_family_is_refused_naming_the_families_and_the_line(adapter):
    # Symptom: family="paged-mla" was accepted; its GPU tests skipped "no adapted kernel named".
    # Fix: refused at declaration, naming the gate's families (only sparse-mla has GPU cases).
    module, path, line = adapter(
        'KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**CAPS), family="paged-mla", **GPU)]'
    )
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert str(info.value) == (
        f"--tilegate-kernels {module!r}: {path}:{line}: Kernel 'bad': family 'paged-mla' "
        "has no GPU case set in the gate (families: sparse-mla, dense, paged); declare one of "
        "those, or leave family, launcher and gpu_shape out for the CPU tiers only"
    )


def test_a_feature_the_family_cannot_exercise_is_refused_naming_the_line(adapter):
    module, path, line = adapter(
        'KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**CAPS, features=("sink", '
        '"dual-cache")), family="sparse-mla", **GPU)]'
    )
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert str(info.value).endswith(
        f"{path}:{line}: Kernel 'bad': capabilities.features declares ['dual-cache'], "
        "which no case of family 'sparse-mla' exercises (its features: sink, topk-length); leave "
        "them out"
    )
    module, path, line = adapter(
        'KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**CAPS, features=("sink",)))]'
    )
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert str(info.value).endswith(
        f"{path}:{line}: Kernel 'bad': capabilities.features ('sink',) are inputs of GPU "
        "cases, and it declares no family; declare one (sparse-mla, dense, paged) or leave the "
        "features out"
    )


def test_a_mask_no_dense_case_exercises_is_refused_naming_the_line(adapter):
    module, path, line = adapter(
        'DENSE = dict(CAPS, masks=("full", "sparse-topk"))\n'
        "KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**DENSE), "
        'family="dense", launcher=lambda module, x: x.out)]'
    )
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert str(info.value).endswith(
        f"{path}:{line}: Kernel 'bad': capabilities declare mask ['sparse-topk'], which no "
        "case of family 'dense' exercises (its masks: causal, full, sliding-window); leave them "
        "out, or leave family and launcher out for the CPU tiers only"
    )


def test_a_problem_no_dense_case_runs_is_refused_naming_the_line(adapter):
    # Symptom: bf16, head_dim 64 and the full mask are each in some dense case, never together;
    # the build's every GPU case skipped, and the run was green with no GPU check of it.
    module, path, line = adapter(
        "D64 = dict(FIELDS, problems=(Problem('d64', dtype='bfloat16', head_dim=64, mask='full'),"
        "), isa=IsaExpectations(mfma_input='bfloat16', wide_global_loads=True, "
        "min_waves_per_simd=2.0))\n"
        "KERNELS = [Kernel(**D64, capabilities=Capabilities(**dict(CAPS, head_dims=(64,))),"
        ' family="dense", launcher=lambda module, x: x.out)]'
    )
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert f"{path}:{line}: Kernel 'bad': problems ['d64'] have a dtype, head_dim and " in (
        str(info.value)
    )
    assert "no case of family 'dense' runs together" in str(info.value)


def test_an_adapter_that_raises_at_import_names_its_line(adapter):
    module, path, line = adapter('raise RuntimeError("is_hip() read at import")')
    with pytest.raises(KernelDeclarationError) as info:
        discover([module])
    assert str(info.value) == (
        f"--tilegate-kernels {module!r}: RuntimeError: is_hip() read at import (raised at "
        f"{path}:{line}); the adapter does not import: fix it there, or stop naming it"
    )


def test_a_kernel_module_that_raises_at_import_names_the_adapter_and_the_line(adapter, tmp_path):
    source = tmp_path / "raising_kernel.py"
    source.write_text("import os\nraise ImportError('no sglang.srt.utils here')\n")
    module, path, line = adapter(
        "KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**CAPS))]", source=source
    )
    (kernel,) = discover([module])
    assert kernel.declared_at == f"{path}:{line}"
    for _ in range(2):  # a second load is refused the same way, not handed a half-run module
        with pytest.raises(KernelDeclarationError) as info:
            load_module(kernel)
        assert (
            f"bad: importing its kernel module {module}_kernel ({source}) raised ImportError: no "
            f"sglang.srt.utils here (raised at {source}:2); the adapter at {path}:{line} names it"
        ) in str(info.value)


def test_a_factory_that_refuses_its_arguments_names_the_config_and_the_line(adapter):
    module, path, line = adapter(
        "KERNELS = [Kernel(**FIELDS, capabilities=Capabilities(**CAPS))]",
        kwargs="block=64, head_dim=128",
    )
    (kernel,) = discover([module])
    case = KernelBuild.of(kernel, kernel.problems[0], kernel.configs["gfx942"][0], "gfx942")
    with pytest.raises(KernelDeclarationError) as info:
        case.lowering_input()
    message = str(info.value)
    assert message.startswith(f"bad-d128-c: {module}_kernel.scores(*(), **{{'block': 64, ")
    assert "raised TypeError: scores() got an unexpected keyword argument 'block'" in message
    assert message.endswith(
        f"the adapter at {path}:{line} gives problem d128's args and config c's kwargs: fix them "
        "there where the factory does not take them"
    )
