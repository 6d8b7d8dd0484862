"""rocprofv3's counter-collection output read into dispatches: the CSV it writes by default and
the JSON of --output-format json. Formats as ROCm's rocprofiler-sdk writes them (cited below);
test files in that form: suite/library/rocprofv3_output/.

Where the files go: ``-d DIR -o NAME`` gives DIR/NAME_counter_collection.csv and
DIR/NAME_results.json (output_stream.cpp get_output_filename: "{prefix}_{name}{ext}"). The docs'
input-file runs put each pass in a pmc_N/ or pass_N/ folder below DIR, so the file is looked
for below DIR too.

Sources (ROCm/rocm-systems@1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992, Aug 2025, under
projects/rocprofiler-sdk/; ROCm/rocprofiler-sdk@8ab1ed78d8c2afb25fedddb7684aff08d1233c5c, Oct 2024,
for the older CSV header):
  - CSV: source/lib/output/generateCSV.cpp, generate_csv for tool_counter_record_t: one row per
    counter per dispatch, the counter's dimension instances already summed (``counter_id_value[
    count.id] += count.value``); header Correlation_Id, Dispatch_Id, Agent_Id, Queue_Id,
    Process_Id, Thread_Id, Grid_Size, Kernel_Id, Kernel_Name, Workgroup_Size, LDS_Block_Size,
    Scratch_Size, VGPR_Count, Accum_VGPR_Count, SGPR_Count, Counter_Name, Counter_Value,
    Start_Timestamp, End_Timestamp. The Oct 2024 header lacks Accum_VGPR_Count and the
    timestamps, and writes Agent_Id as a number ("Agent 1" now); only the columns below are read.
  - JSON: source/lib/output/generateJSON.cpp and counter_info.hpp: {"rocprofiler-sdk-tool":
    [one object per process]}, each with "counters" (id.handle -> name), "kernel_symbols"
    (kernel_id -> formatted_kernel_name) and callback_records.counter_collection: per dispatch,
    dispatch_data.dispatch_info.{dispatch_id, kernel_id} and "records": [{counter_id: {handle},
    value}], one per dimension instance (tool.cpp counter_record_callback), so summed here.
  - Kernel_Name is the kernel symbol's formatted_kernel_name: demangled, ".kd" dropped
    (rocprofiler-sdk-tool/config.cpp format_name); the --kernel-include-regex filter searches
    that same name (tool.cpp, std::regex_search).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from tilegate.harness.counters.dispatches import Dispatch, ProfilerError

# the file each --output-format writes, after "<-o>_"
OUTPUTS = {"csv": "counter_collection.csv", "json": "results.json"}
CSV_COLUMNS = ("Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value")


def _value(text: str) -> float | None:
    """A counter value; None where it is not a finite number (C++ streams print "nan", "-nan",
    "inf"), so that the figure needing it is None, never 0 and never a NaN that compares false."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _add(counters: dict, name: str, value: float | None) -> None:
    """Sum ``value`` into ``counters[name]``; one value that is no number makes the sum None."""
    before = counters.get(name, 0.0)
    counters[name] = None if before is None or value is None else before + value


def parse_csv(text: str) -> list[Dispatch]:
    """*_counter_collection.csv -> one Dispatch per Dispatch_Id, in dispatch order."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ProfilerError(
            f"rocprofv3's counter CSV has no {missing} column: header {reader.fieldnames}"
        )
    kernels: dict[int, str] = {}
    counters: dict[int, dict] = {}
    for row in reader:
        ident = int(row["Dispatch_Id"])
        if kernels.setdefault(ident, row["Kernel_Name"]) != row["Kernel_Name"]:
            raise ProfilerError(
                f"rocprofv3's dispatch {ident} names two kernels: {kernels[ident]!r} and "
                f"{row['Kernel_Name']!r}"
            )
        _add(counters.setdefault(ident, {}), row["Counter_Name"], _value(row["Counter_Value"]))
    return [Dispatch(i, kernels[i], counters[i]) for i in sorted(kernels)]


def _kernel_name(symbol: dict) -> str:
    if symbol.get("formatted_kernel_name"):
        return symbol["formatted_kernel_name"]
    return symbol["kernel_name"].removesuffix(".kd")


def parse_json(text: str) -> list[Dispatch]:
    """*_results.json -> one Dispatch per dispatch, in dispatch order (one process only: dispatch
    ids count per process)."""
    processes = [
        p
        for p in json.loads(text)["rocprofiler-sdk-tool"]
        if p["callback_records"].get("counter_collection")
    ]
    if len(processes) > 1:
        pids = [p["metadata"]["pid"] for p in processes]
        raise ProfilerError(f"rocprofv3 counted dispatches of {len(processes)} processes: {pids}")
    dispatches = []
    for process in processes:
        names = {c["id"]["handle"]: c["name"] for c in process["counters"]}
        kernels = {k["kernel_id"]: _kernel_name(k) for k in process["kernel_symbols"]}
        for record in process["callback_records"]["counter_collection"]:
            info = record["dispatch_data"]["dispatch_info"]
            counters: dict = {}
            for value in record["records"]:
                handle = value["counter_id"]["handle"]
                if handle not in names:
                    raise ProfilerError(f"rocprofv3's JSON has no counter with id {handle}")
                _add(counters, names[handle], _value(str(value["value"])))
            dispatches.append(Dispatch(info["dispatch_id"], kernels[info["kernel_id"]], counters))
    return sorted(dispatches, key=lambda d: d.ident)


PARSERS = {"csv": parse_csv, "json": parse_json}


def output_file(out_dir: Path, name: str, fmt: str) -> Path:
    """The one file rocprofv3 wrote for ``-d out_dir -o name --output-format fmt``."""
    found = sorted(out_dir.rglob(f"{name}_{OUTPUTS[fmt]}"))
    if not found:
        raise ProfilerError(
            f"rocprofv3 wrote no {name}_{OUTPUTS[fmt]} under {out_dir}: it writes none when no "
            "dispatch matched --kernel-include-regex"
        )
    if len(found) > 1:
        raise ProfilerError(f"rocprofv3 wrote more than one {OUTPUTS[fmt]}: {found}")
    return found[0]


def read(out_dir: Path, name: str, fmt: str) -> list[Dispatch]:
    return PARSERS[fmt](output_file(out_dir, name, fmt).read_text())
