"""The MI300X counters read from rocprofv3's own formats (suite/library/rocprofv3_output/, whose
README cites the writers): figures per dispatch, a missing counter, a kernel the gate did not
launch, and the file the driver looks for."""

import re
import sys
from pathlib import Path

import pytest

from tilegate.harness.counters import driver as counters
from tilegate.harness.counters import protocol, rocprofv3
from tilegate.harness.counters.dispatches import name_launches

OUTPUT = Path(__file__).parent / "rocprofv3_output"
PREFILL = [("flash_fwd", c) for c in ("m128n32w4", "m64n32w2", "m128n64w4")]
EXTEND = [("paged_extend", c) for c in ("m128n32w4", "m64n32w2", "m128n64w4")]
DECODE = [("paged_decode_split", c) for c in ("n32w2s16", "n64w4s8", "n16w1s32")]


def _text(name: str) -> str:
    return (OUTPUT / name).read_text()


def _launches(names, dispatches):
    return name_launches(names, dispatches, counters.rocprof_figures, "rocprofv3 (test)")


def _figure(launches, name):
    return [launch.figures[name] for launch in launches]


def test_the_csv_gives_each_dispatch_its_figures():
    dispatches = rocprofv3.parse_csv(_text("prefill_counter_collection.csv"))
    assert [d.ident for d in dispatches] == [4, 6, 8]  # the regex's gaps stay gaps
    launches = _launches(PREFILL, dispatches)
    assert [launch.key for launch in launches] == [f"flash_fwd-{c}" for _, c in PREFILL]
    # 425984 / 1703936; a zero printed as 0.00000000e+00; 589824 / 1179648
    lds = _figure(launches, "lds_conflict_cycles_per_instruction")
    assert lds == pytest.approx([0.25, 0.0, 0.5])
    assert _figure(launches, "waves") == [4096.0] * 3
    # FETCH_SIZE is in KiB (its gfx942 expression ends in /1024)
    assert _figure(launches, "fetch_bytes")[0] == pytest.approx(50331.5 * 1024)


def test_the_json_gives_the_csv_figures():
    from_csv = rocprofv3.parse_csv(_text("prefill_counter_collection.csv"))
    from_json = rocprofv3.parse_json(_text("prefill_results.json"))
    # the JSON keeps one record per dimension instance: summed, they are the CSV's values
    assert [(d.ident, d.kernel) for d in from_json] == [(d.ident, d.kernel) for d in from_csv]
    for j, c in zip(from_json, from_csv):
        assert j.counters == pytest.approx(c.counters)


def test_the_older_csv_header_reads_the_same():
    launches = _launches(EXTEND, rocprofv3.parse_csv(_text("extend_counter_collection.csv")))
    lds = _figure(launches, "lds_conflict_cycles_per_instruction")
    assert lds == pytest.approx([0.125, 0.25, 0.4])


def test_a_missing_counter_gives_none_and_the_judge_flags_it():
    # Symptom: a counter absent from the output summed to 0: "no conflicts", a pass.
    # Fix: the figure is None; the judge counts None as a regression; no baseline records it.
    dispatches = rocprofv3.parse_csv(_text("decode_counter_collection.csv"))
    assert all("SQ_LDS_BANK_CONFLICT" not in d.counters for d in dispatches)
    launches = _launches(DECODE, dispatches)
    assert _figure(launches, "lds_conflict_cycles_per_instruction") == [None] * 3
    assert _figure(launches, "waves") == [2048.0, 4096.0, 1024.0]
    base = {"lds_conflict_cycles_per_instruction": 0.125}
    found = counters.regressions(launches[0], base)
    assert [(r.figure, r.value) for r in found] == [("lds_conflict_cycles_per_instruction", None)]
    with pytest.raises(counters.ProfilerError, match="a counter is missing"):
        counters.update_baseline("mi300x-test", launches)


def test_a_value_that_is_no_number_is_none_not_zero():
    text = _text("prefill_counter_collection.csv").replace("589824.000000", "-nan")
    launches = _launches(PREFILL, rocprofv3.parse_csv(text))
    lds = _figure(launches, "lds_conflict_cycles_per_instruction")
    assert lds[2] is None and lds[0] == pytest.approx(0.25)


def test_a_kernel_the_gate_does_not_launch_is_named():
    # Symptom: a dispatch that slipped past the regex took the next launch's name, and every
    # later figure was filed one config off. Fix: dispatches are checked by kernel name.
    dispatches = rocprofv3.parse_csv(_text("decode-stray_counter_collection.csv"))
    with pytest.raises(counters.ProfilerError) as err:
        _launches(DECODE[:3], dispatches)
    assert "at::native::elementwise_kernel<128, 4" in str(err.value)
    assert "(dispatch 13)" in str(err.value)


def test_a_renamed_kernel_is_refused_by_name():
    renamed = "flash_fwd_kernel_v2_kernel"
    assert re.search(protocol.PROFILED, renamed)  # the regex still profiles it
    text = _text("prefill_counter_collection.csv").replace("flash_fwd_kernel_kernel", renamed)
    with pytest.raises(counters.ProfilerError, match=renamed):
        _launches(PREFILL, rocprofv3.parse_csv(text))


def test_a_dispatch_of_another_gate_kernel_is_not_paired():
    dispatches = rocprofv3.parse_csv(_text("extend_counter_collection.csv"))
    with pytest.raises(counters.ProfilerError, match="ran 'paged_extend_kernel_kernel' where"):
        _launches(PREFILL, dispatches)


def test_each_symbol_is_one_the_regex_profiles():
    for symbol in protocol.SYMBOLS.values():
        assert re.search(protocol.PROFILED, symbol), symbol
    assert not re.search(protocol.PROFILED, "paged_decode_combine_kernel_kernel")


def test_a_csv_without_the_columns_read_is_refused():
    text = _text("prefill_counter_collection.csv").replace('"Counter_Name"', '"Counter"', 1)
    with pytest.raises(counters.ProfilerError, match="Counter_Name"):
        rocprofv3.parse_csv(text)


FAKE_ROCPROFV3 = """#!{python}
# Writes {source} where rocprofv3 would for this command line; prints what the child prints.
import shutil, sys
args = sys.argv[1:]
split = args.index("--")
ours = args[:split]
assert ours[:{n} + 1] == ["--pmc", *{pmc!r}], ours
assert ours[ours.index("--kernel-include-regex") + 1] == {regex!r}
assert ours[ours.index("--output-format") + 1] == "csv"
out, name = ours[ours.index("-d") + 1], ours[ours.index("-o") + 1]
shutil.copy({source!r}, f"{{out}}/{{name}}_counter_collection.csv")
for kernel, config in {names!r}:
    print("{mark}" + kernel + " " + config)
print("{done}")
"""


def _fake_rocprofv3(tmp_path, monkeypatch, source: Path, names) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rocprofv3"
    fake.write_text(
        FAKE_ROCPROFV3.format(
            python=sys.executable,
            n=len(counters.ROCPROF_COUNTERS),
            pmc=list(counters.ROCPROF_COUNTERS),
            regex=protocol.PROFILED,
            source=str(source),
            names=names,
            mark=protocol.LAUNCH_MARK,
            done=protocol.DONE,
        )
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_run_rocprof_reads_the_file_d_and_o_name(tmp_path, monkeypatch):
    out_dir = tmp_path / "rocprof-prefill"
    stale = out_dir / "pmc_1" / "prefill_counter_collection.csv"  # a previous run's
    stale.parent.mkdir(parents=True)
    stale.write_text(_text("decode-stray_counter_collection.csv"))
    _fake_rocprofv3(tmp_path, monkeypatch, OUTPUT / "prefill_counter_collection.csv", PREFILL)
    launches = counters.run_rocprof("prefill", out_dir)
    assert [launch.config for launch in launches] == [c for _, c in PREFILL]
    assert not stale.exists()
    assert (out_dir / "prefill.log").read_text().startswith(str(tmp_path / "bin" / "rocprofv3"))


def test_no_output_file_says_no_dispatch_matched(tmp_path):
    with pytest.raises(counters.ProfilerError, match="no dispatch matched"):
        rocprofv3.read(tmp_path, "decode", "csv")
