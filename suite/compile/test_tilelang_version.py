"""The TileLang this run lowers with is one the gate supports: the compile tier of any run checks
it, under 0.1.15 (tox -e cpu) and 0.1.12 (tox -e cpu-tl012) alike."""

from tilegate.gate import tilelang_versions as tv


def test_running_tilelang_is_a_supported_version():
    assert tv.RUNNING in tv.SUPPORTED, (
        f"TileLang {tv.RUNNING} is not one the gate supports ({', '.join(tv.SUPPORTED)}): "
        "its lowering and ISA are unchecked; install a supported one"
    )
