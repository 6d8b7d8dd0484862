"""The two distributions: the runtime an SGLang deployment installs holds no test code, its plugin
loads without torch, and the test extra brings the gate (harness, fixtures, pytest plugin).

Symptom: the one wheel carried harness/ and fixtures/ (a model trainer among them), and its
``tilelang-harness`` entry point imported torch in every SGLang process that loads plugins
(2.5 s). Fix: the runtime is ../pyproject.toml, the gate testing/pyproject.toml, and both plugins
import their backends only when SGLang builds one.
"""

from __future__ import annotations

import ast
import email
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from kernel_package import gate_build_lock
from packaging.requirements import Requirement

from tilegate.gate.paths import REPO_ROOT
from tilegate.harness.sglang import protocol as proto

HEAVY = ("torch", "tilelang", "tvm", "numpy", "transformers")
# The two SGLang modules the production plugin's register() calls into, as one-line stand-ins: the
# fresh venv has no SGLang and no torch, so any heavy import on the register path raises there.
SGLANG_STANDINS = {
    "sglang/srt/arg_groups/choices.py": "ATTENTION_BACKEND_CHOICES = []\n"
    "def add_attention_backend_choices(names): ATTENTION_BACKEND_CHOICES.extend(names)\n",
    "sglang/srt/layers/attention/attention_registry.py": "REGISTRY = {}\n"
    "def register_attention_backend(name):\n"
    "    def put(factory): REGISTRY[name] = factory; return factory\n"
    "    return put\n",
}
PROBE = """
import json, os, sys
from importlib.metadata import entry_points
eps = {e.name: e for e in entry_points(group="sglang.srt.plugins")}
loaded = {}
for name in sys.argv[1:]:
    before = set(sys.modules)
    eps[name].load()()
    loaded[name] = sorted(set(sys.modules) - before)
from sglang.srt.layers.attention.attention_registry import REGISTRY
files = {m: sys.modules[m].__file__ for m in sys.modules if m.startswith("tilegate")}
print(json.dumps({"plugins": sorted(eps), "registered": sorted(REGISTRY), "loaded": loaded,
                  "modules": sorted(sys.modules), "files": files}))
"""

pytestmark = pytest.mark.nested  # fresh venvs and wheel builds: minutes of CPU


def _build(source: Path, out: Path) -> Path:
    with gate_build_lock():  # the package tests of suite/families build the gate too
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out),
                str(source),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheels")
    return {
        "runtime": _build(REPO_ROOT, root / "runtime"),
        "testing": _build(REPO_ROOT / "testing", root / "testing"),
    }


def _names(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


def _metadata(wheel: Path) -> email.message.Message:
    zf = zipfile.ZipFile(wheel)
    (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(zf.read(meta))


def _module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _imported(source: bytes, package: str) -> set[str]:
    """Every module ``source`` imports, at any depth of the file (a function's own imports too),
    relative imports resolved against ``package``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
    return names


def test_the_runtime_wheel_is_what_serving_reaches_and_nothing_else(wheels):
    """Every module of the runtime wheel is reached from its SGLang entry point (imports inside
    functions included: the backend is imported when SGLang builds it), and nothing the gate
    alone uses ships in it: no references, builds, ISA rules, records or planted defects."""
    zf = zipfile.ZipFile(wheels["runtime"])
    modules = {_module_name(n): n for n in zf.namelist() if n.endswith(".py")}
    entry = zf.read(next(n for n in zf.namelist() if n.endswith("entry_points.txt"))).decode()
    starts = [
        line.split("=")[1].split(":")[0].strip() for line in entry.splitlines() if "=" in line
    ]
    assert starts == ["tilegate.serving.sglang_plugin"], entry
    reached, todo = set(), list(starts)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        is_package = modules[name].endswith("__init__.py")
        package = name if is_package else name.rpartition(".")[0]
        found = _imported(zf.read(modules[name]), package)
        todo += [m for m in (*parents, *found) if m in modules]
    assert {
        "tilegate.serving.sglang_backend",
        "tilegate.serving.paged",
        "tilegate.kernels.flash_fwd",
        "tilegate.kernels.paged_decode",
        "tilegate.kernels.hooks",
        "tilegate.runtime",
        "tilegate.platform",
    } <= reached
    assert sorted(set(modules) - reached) == [], "shipped, never reached from the entry point"
    gate = [m for m in modules if m.split(".")[1:2] in (["references"], ["gate"], ["gfx942"])]
    assert not gate and not any("defect" in m or "planted" in m for m in modules), gate


def test_the_testing_wheel_is_the_gate_and_only_the_gate(wheels):
    names = _names(wheels["testing"])
    assert {
        "tilegate/testing/pytest_plugin.py",
        "tilegate/harness/sglang/child.py",
        "tilegate/harness/baseline.py",
        "tilegate/fixtures/tiny_llama_train.py",
    } <= names
    assert {
        "tilegate/gate/planted.py",
        "tilegate/gate/registry.py",
        "tilegate/gfx942/isa_checks.py",
        "tilegate/references/attention.py",
        "tilegate/artifacts/render.py",
    } <= names
    assert not any(
        n.startswith(("tilegate/serving/", "tilegate/kernels/")) or n == "tilegate/__init__.py"
        for n in names
    )


def test_the_test_extra_names_the_gate_by_its_folder(wheels):
    # A direct reference: no package index is asked for "tilegate-testing", a name anyone could take
    # there.
    requires = [Requirement(r) for r in _metadata(wheels["runtime"]).get_all("Requires-Dist")]
    extra = [r for r in requires if r.marker and r.marker.evaluate({"extra": "test"})]
    assert [(r.name, r.url) for r in extra] == [
        ("tilegate-testing", (REPO_ROOT / "testing").as_uri())
    ], extra
    assert not [r for r in requires if r.name == "tilegate-testing" and not r.marker], (
        "the gate in every install"
    )
    runtime = [
        Requirement(r)
        for r in _metadata(wheels["testing"]).get_all("Requires-Dist")
        if r.startswith("tilegate")
    ]
    assert [(r.name, str(r.specifier)) for r in runtime] == [("tilegate", "==0.1.0")], runtime


def _fresh_venv(
    tmp_path: Path, wheels: dict[str, Path], which: tuple[str, ...]
) -> tuple[Path, Path]:
    """A venv with no site-packages of its own (no torch, no SGLang), and a folder holding ``which``
    wheels installed (pip --target), plus the SGLang stand-ins."""
    venv, site = tmp_path / "venv", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            *(str(wheels[w]) for w in which),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    for rel, text in SGLANG_STANDINS.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return venv / "bin" / "python", site


def _probe(python: Path, site: Path, *plugins: str, env: dict | None = None, cwd: Path) -> dict:
    run = subprocess.run(
        [str(python), "-c", PROBE, *plugins],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), **(env or {})},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_the_production_plugin_registers_in_a_fresh_venv_without_torch(tmp_path, wheels):
    python, site = _fresh_venv(tmp_path, wheels, ("runtime",))
    found = _probe(python, site, "tilelang", cwd=tmp_path)
    assert found["plugins"] == ["tilelang"]  # no harness plugin in a deployment
    assert found["registered"] == ["tilelang"]
    assert not [m for m in found["modules"] if m.split(".")[0] in HEAVY]
    assert [m for m in found["loaded"]["tilelang"] if m.startswith("tilegate")] == [
        "tilegate",
        "tilegate.serving",
        "tilegate.serving.sglang_plugin",
    ]
    assert all(Path(f).is_relative_to(site) for f in found["files"].values()), found["files"]


def test_the_harness_plugin_is_light_inert_or_armed(tmp_path, wheels):
    python, site = _fresh_venv(tmp_path, wheels, ("runtime", "testing"))
    inert = _probe(python, site, "tilelang", "tilelang-harness", cwd=tmp_path)
    assert inert["registered"] == ["tilelang"]  # no marker folder: the harness plugin does nothing
    armed = _probe(
        python, site, "tilelang-harness", cwd=tmp_path, env={proto.MARKER_DIR_ENV: str(tmp_path)}
    )
    assert {"tilelang", "tilelang-reference", "tilelang-planted-stale_kv"} <= set(
        armed["registered"]
    )
    for found in (inert, armed):
        assert not [m for m in found["modules"] if m.split(".")[0] in HEAVY], (
            "the backend loaded at registration"
        )
        assert "tilegate.harness.sglang.instrumented" not in found["modules"]


@pytest.mark.sglang
def test_with_sglang_itself_the_plugin_adds_only_its_own_module(tmp_path, wheels):
    """In SGLang's venv, after SGLang's own registry modules: registering imports only the
    plugin."""
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheels["runtime"]),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import json, sys\n"
        "import sglang.srt.arg_groups.choices as c, "
        "sglang.srt.layers.attention.attention_registry\n"
        "before = set(sys.modules)\n"
        "from tilegate.serving.sglang_plugin import register\n"
        "register()\n"
        "print(json.dumps({'new': sorted(set(sys.modules) - before), 'choice': 'tilelang' in "
        "c.ATTENTION_BACKEND_CHOICES}))"
    )
    run = subprocess.run(
        [str(proto.venv_python()), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["choice"]
    assert found["new"] == ["tilegate", "tilegate.serving", "tilegate.serving.sglang_plugin"], (
        found["new"]
    )


@pytest.mark.slow
def test_pip_install_with_the_test_extra_brings_the_gate(tmp_path):
    """``pip install ".[test]"``, not editable, in a venv over this interpreter's packages (torch,
    pip,
    setuptools and the rest come from there: no index, no build environment): both distributions
    land in the venv, the pytest plugin with them."""
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--no-build-isolation",
            f"{REPO_ROOT}[test]",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    probe = (
        "import json, tilegate.harness.sglang.child as c, tilegate.testing.pytest_plugin as p, "
        "tilegate.fixtures.shapes as f\n"
        "from importlib.metadata import entry_points\n"
        "print(json.dumps({'files': [c.__file__, p.__file__, f.__file__],\n"
        "                  'pytest11': [e.value for e in entry_points(group='pytest11') if "
        "e.name.startswith('tilegate')]}))"
    )
    run = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert all(Path(f).is_relative_to(venv) for f in found["files"]), found["files"]
    assert found["pytest11"] == ["tilegate.testing.pytest_plugin"]
