"""A pull request's records, zipped by the actions/upload-artifact release gate-mi300x.yml's shard
jobs pin and unpacked by the actions/download-artifact release its summary job pins, stay inside
the download folder.

Symptom: code under test names a record x\\..\\..\\..\\..\\scripts\\step_summary.py (one file name
on Linux). upload-artifact v4.6.2's archiver turns every `\\` of an entry name into `/`, so the zip
holds x/../../../../scripts/step_summary.py, and download-artifact v4.3.0 (unzip-stream 0.3.1,
which strips only a leading ../) wrote it over the summary job's own scripts. Fix: the download
pin moved to a release whose unzip-stream (0.3.4) turns every `..` part into `.`. Each side runs
its release's own library, locked as the release locks it (scripts/artifact-unpack/, installed by
scripts/install-artifact-unpack.sh): pack.cjs zips as the upload does (upload-v4.6.2/), unpack.cjs
downloads as the download does (the pinned release's here, v4.3.0's in v4.3.0/, which shows the
archive is a real attack).
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from tilegate.gate.paths import REPO_ROOT
from tilegate.testing.actions_js import INSTALL, PINNED

pytestmark = pytest.mark.actions_js  # skips, naming the install, where node or a folder is absent
OLD = PINNED / "v4.3.0"
UPLOAD = PINNED / "upload-v4.6.2"
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "gate-mi300x.yml"
TARGET = "scripts/step_summary.py"  # the summary job runs it after the download
PLANTED = (TARGET, "scripts/gpu_idle.py")  # ROOT's own files; the download goes to ROOT/download
HOSTILE = (
    "x\\..\\..\\..\\..\\" + TARGET.replace("/", "\\"),  # Windows separators
    "x/../../../../" + TARGET,  # `..` after a first part: 0.3.1 lets it out
    "../../../" + TARGET,  # a leading ../
    "/../../../" + TARGET,  # a leading /
    "ok/./../x/..\\../../../../" + TARGET,  # mixed separators and dots
    "ok/../../../../../above-root.txt",  # past ROOT: the snapshot covers its parent
)
# A shard's records folder as the code under test can leave it (collect_records.py's copy aside):
# the names are real Linux file names, `\` a plain character in them. Path under the folder ->
# the zip entry upload-artifact v4.6.2 makes of it, and where download-artifact v4.3.0 writes that
# entry, from the download folder ROOT/download/shards/x: None for inside it.
RECORDS = {
    "artifacts/junit/cpu.xml": ("artifacts/junit/cpu.xml", None),
    ".test_durations": (".test_durations", None),  # include-hidden-files: true
    "x\\..\\..\\..\\..\\scripts\\step_summary.py": (
        "x/../../../../scripts/step_summary.py",
        "root/scripts/step_summary.py",
    ),
    "ok\\.\\..\\x\\..\\..\\..\\..\\scripts\\gpu_idle.py": (
        "ok/./../x/../../../../scripts/gpu_idle.py",
        "root/scripts/gpu_idle.py",
    ),
    # a folder whose name climbs, holding a plain name
    "y\\..\\..\\..\\..\\../above-root.txt": ("y/../../../../../above-root.txt", "above-root.txt"),
    # archiver strips a leading ../ (and /) itself: this one stays inside under every release
    "..\\..\\..\\scripts\\step_summary.py": ("scripts/step_summary.py", None),
}


def _lock_versions(folder: Path, *names: str) -> dict[str, str]:
    packages = json.loads((folder / "package-lock.json").read_text())["packages"]
    return {name: packages[f"node_modules/{name}"]["version"] for name in names}


def _node(script: str, folder: Path, *args: Path) -> dict:
    """Runs ``script`` (here) on ``folder``'s install; its RESULT line, whose versions must be the
    lock's."""
    run = subprocess.run(
        ["node", str(PINNED / script), *map(str, args), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout + run.stderr
    return json.loads(lines[-1].removeprefix("RESULT "))


def _unpack(archive: Path, dest: Path, folder: Path) -> dict:
    """Unpacks as download-artifact does, through ``folder``'s install."""
    result = _node("unpack.cjs", folder, archive, dest)
    locked = _lock_versions(folder, "@actions/artifact", "unzip-stream")
    assert [result["artifact"], result["unzipStream"]] == list(locked.values()), (
        f"{folder.relative_to(REPO_ROOT)}/node_modules is not its lock's: run `{INSTALL}`"
    )
    assert result["downloadPath"] == str(dest) and result["digestMismatch"] is False
    return result


def _pack(records: Path, archive: Path) -> dict:
    """Zips ``records`` as upload-artifact v4.6.2 does, through UPLOAD's install."""
    result = _node("pack.cjs", UPLOAD, records, archive)
    locked = _lock_versions(UPLOAD, "@actions/artifact", "@actions/glob", "archiver")
    assert [result["artifact"], result["glob"], result["archiver"]] == list(locked.values()), (
        f"{UPLOAD.relative_to(REPO_ROOT)}/node_modules is not its lock's: run `{INSTALL}`"
    )
    return result


def _snapshot(top: Path, leave_out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(top).as_posix(): p.read_bytes()
        for p in top.rglob("*")
        if p.is_file() and leave_out not in p.parents
    }


def _attack(tmp_path: Path, archive: Path, folder: Path) -> tuple[Path, dict, dict]:
    """ROOT with the PLANTED files; ``archive`` unpacked into ROOT/download/shards/x through
    ``folder``. Returns the download folder and the snapshots of everything outside ROOT/download
    (all of tmp_path) before and after."""
    root = tmp_path / "root"
    for name in PLANTED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("the job's own script\n")
    download = root / "download"
    before = _snapshot(tmp_path, download)
    dest = download / "shards" / "x"
    _unpack(archive, dest, folder)
    assert (dest / "artifacts" / "junit" / "cpu.xml").is_file()
    return dest, before, _snapshot(tmp_path, download)


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in after.items() if before.get(path) != data}


def _handmade(tmp_path: Path) -> Path:
    """HOSTILE's entries written into a zip as they are, beside a record."""
    archive = tmp_path / "records.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("artifacts/junit/cpu.xml", "<testsuites/>\n")
        for name in HOSTILE:
            z.writestr(zipfile.ZipInfo(name), f"PAYLOAD {name}\n")
    assert [i.filename for i in zipfile.ZipFile(archive).infolist()][1:] == list(HOSTILE)
    return archive


@pytest.fixture
def uploaded(tmp_path: Path) -> Path:
    """RECORDS as real files, zipped by upload-artifact v4.6.2's code; the zip holds exactly the
    entries RECORDS says."""
    records = tmp_path / "shard" / "records"
    for name in RECORDS:
        (records / name).parent.mkdir(parents=True, exist_ok=True)
        (records / name).write_text(f"PAYLOAD {name}\n")
    archive = tmp_path / "shard" / "records.zip"
    result = _pack(records, archive)
    assert result["rootDirectory"] == str(records)
    with zipfile.ZipFile(archive) as z:
        entries = {i.filename: z.read(i).decode() for i in z.infolist()}
    assert entries == {entry: f"PAYLOAD {name}\n" for name, (entry, _) in RECORDS.items()}
    return archive


def test_pinned_release_keeps_every_entry_inside_the_download_folder(tmp_path):
    _, before, after = _attack(tmp_path, _handmade(tmp_path), PINNED)
    assert after == before


def test_the_archive_escapes_under_v4_3_0(tmp_path):
    """The proof the archive is an attack: v4.3.0's library writes over the planted script."""
    _, before, after = _attack(tmp_path, _handmade(tmp_path), OLD)
    assert after[f"root/{TARGET}"].startswith(b"PAYLOAD ")


def test_the_upload_s_zip_escapes_under_v4_3_0(tmp_path, uploaded):
    """End to end, the attack is real: a backslash name, zipped by the upload, is written by
    v4.3.0 over the summary job's script (and the others RECORDS says, each with its payload)."""
    _, before, after = _attack(tmp_path, uploaded, OLD)
    assert after[f"root/{TARGET}"] == b"PAYLOAD x\\..\\..\\..\\..\\scripts\\step_summary.py\n"
    assert _changed(before, after) == {
        out: f"PAYLOAD {name}\n".encode() for name, (_, out) in RECORDS.items() if out
    }


def test_the_upload_s_zip_stays_inside_under_the_pinned_release(tmp_path, uploaded):
    dest, before, after = _attack(tmp_path, uploaded, PINNED)
    assert after == before
    # every entry is there, each `..` part made `.`
    assert {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} == {
        "/".join(part for part in entry.split("/") if part not in (".", ".."))
        for entry, _ in RECORDS.values()
    }


def _pins(action: str) -> set[str]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return {
        step["uses"].split("@", 1)[1]
        for job in jobs.values()
        for step in job.get("steps", [])
        if step.get("uses", "").startswith(f"actions/{action}@")
    }


@pytest.mark.parametrize(
    ("action", "folder", "field"),
    [
        ("download-artifact", PINNED, "downloadArtifact"),
        ("upload-artifact", UPLOAD, "uploadArtifact"),
    ],
    ids=["download-artifact", "upload-artifact"],
)
def test_the_lock_is_the_pinned_release_s(action, folder, field):
    """Moving a workflow pin without re-locking its scripts/artifact-unpack folder fails here."""
    pins = _pins(action)
    recorded = json.loads((folder / "package.json").read_text())[field]["commit"]
    assert pins == {recorded}, (
        f"gate-mi300x.yml pins actions/{action}@{pins}, {folder.relative_to(REPO_ROOT)} mirrors "
        f"{recorded}'s package-lock.json: copy the new release's lock there"
    )
