"""What an engine's backend served: the markers the instrumented plugin writes in every SGLang
process (``marker``: tilegate.harness.sglang.registration and .instrumented), read back by the child
per phase (``read_markers``, ``served``)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tilegate.harness.sglang.protocol import MARKER_DIR_ENV


def marker(kind: str, record: dict | None = None) -> None:
    """One line in this process's ``kind`` file of the marker folder; nothing outside the
    harness."""
    folder = os.environ.get(MARKER_DIR_ENV)
    if folder:
        line = {**(record or {}), "pid": os.getpid(), "ppid": os.getppid(), "time": time.time()}
        with open(os.path.join(folder, f"{kind}-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")


def read_markers(folder: Path) -> dict:
    """In the child: each SGLang process's records in ``folder``
    (tilegate.harness.sglang.registration, .instrumented): where the plugin registered, and each
    backend built and the batches it served."""
    out: dict = {"registered_pids": [], "backend": []}
    for path in sorted(folder.iterdir()):
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        if path.name.startswith("registered-"):
            out["registered_pids"] += [r["pid"] for r in records]
        elif path.name.startswith("backend-"):
            out["backend"] += records
    return out


def use_marker_dir(folder: Path) -> Path:
    """In the child: SGLang processes started from now on (they inherit the environment) record into
    ``folder``, and so does the plugin here: a later phase's markers stay apart from the earlier
    ones."""
    folder.mkdir(exist_ok=True)
    os.environ[MARKER_DIR_ENV] = str(folder)
    return folder


@dataclass(frozen=True)
class Served:
    """One engine's backend: where it was built, in which mode, and the batches its ops were
    given (``batch`` markers at the first layer; graph replays counted with their real rows)."""

    served_as: str
    mode: str
    pid: int
    ppid: int
    extend_tokens: int  # query tokens of eager extend batches
    decode_tokens: int  # requests of decode batches, eager and replayed (padding excluded)
    extend_batches: int
    prefixed_extends: int  # extend batches with at least one request over a cached prefix
    replays: int
    captures: int
    # extends whose next decode batch carries more requests than it: continuous batching
    joined_while_decoding: int
    entry_points: frozenset[str]  # "first-extend", "first-decode" as seen


def served(markers: dict, served_as: str) -> Served:
    """The one backend built as ``served_as`` in this phase's markers; raises if none or several."""
    built = [
        m for m in markers["backend"] if m["event"] == "constructed" and m["served_as"] == served_as
    ]
    if len(built) != 1:
        raise AssertionError(
            f"{len(built)} backends built as {served_as!r} (one expected): {built}"
        )
    b = built[0]
    mine = [m for m in markers["backend"] if m["pid"] == b["pid"]]
    batches = [m for m in mine if m["event"] == "batch" and m["graph"] != "capture"]
    extends = [m for m in batches if m["kind"] == "extend"]
    joined = sum(
        1
        for m, nxt in zip(batches, batches[1:])
        if m["kind"] == "extend" and nxt["kind"] == "decode" and nxt["requests"] > m["requests"]
    )
    return Served(
        served_as=served_as,
        mode=b["mode"],
        pid=b["pid"],
        ppid=b["ppid"],
        extend_tokens=sum(m["tokens"] for m in extends),
        decode_tokens=sum(m["tokens"] for m in batches if m["kind"] == "decode"),
        extend_batches=len(extends),
        prefixed_extends=sum(1 for m in extends if m.get("prefixed")),
        replays=sum(1 for m in batches if m["graph"] == "replay"),
        captures=sum(1 for m in mine if m["event"] == "batch" and m["graph"] == "capture"),
        joined_while_decoding=joined,
        entry_points=frozenset(m["event"] for m in mine if m["event"].startswith("first-")),
    )
