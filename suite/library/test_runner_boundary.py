"""The self-hosted MI300X runner's boundary, attacked as a stranger would (issue 34). Each test
plays one attack and fails if it works:

- git on the host runs a `.git/config` or hook the code under test wrote (the commit reaches the
  runner as an export with no .git: scripts/mi300x-export.sh);
- a fork approved by label runs some other commit than the labelled one, or its later push runs;
- a symlink, device or FIFO among the records carries a runner file into the upload or the summary
  (scripts/collect_records.py takes plain files only; the summary reads no link);
- a forged test name or table prints a verdict of its own in the step summary;
- a workflow that is not main's gate-mi300x.yml gets the runner (scripts/runner-job-started.sh);
- the container runs as root, with the host's IPC, the network, no limits
  (scripts/mi300x-container.sh,
  its command line, and a real docker run of it with an attacker's probe inside).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tilegate.gate.paths import REPO_ROOT
from tilegate.testing.container import TEST_IMAGE
from tilegate.testing.git_plumbing import git
from tilegate.testing.workflow_log import forged, step_commands

SCRIPTS = REPO_ROOT / "scripts"
EVENTS = REPO_ROOT / "suite" / "workflow_events"
NOBODY = 65534  # the runner's user in these tests: never root
SECRET = "runner-credential-0123456789"


def _run(
    *cmd, env=None, cwd=None, user: int | None = None, groups: tuple[int, ...] = (), timeout=120
):
    argv = [str(c) for c in cmd]
    if user is not None:  # as an unprivileged runner user would run it
        argv = [
            "setpriv",
            f"--reuid={user}",
            f"--regid={user}",
            f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
            *argv,
        ]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, body in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(body)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


class ForkShapedRepository:
    """The base repository as GitHub keeps a fork's pull request: main, and refs/pull/7/head,
    moved by every push to the fork (and kept when the fork is deleted). Served over file:// as
    GitHub serves a commit by its SHA."""

    def __init__(self, root: Path) -> None:
        self.work, self.server = root / "fork-work", root / "base.git"
        self.work.mkdir()
        git(self.work, "init", "-q", "-b", "main")
        self.main = _commit(self.work, {"README.md": "the base repository\n"}, "main")
        git(root, "init", "-q", "--bare", str(self.server))
        git(self.work, "push", "-q", str(self.server), "main:refs/heads/main")

    @property
    def url(self) -> str:
        return self.server.as_uri()

    def fork_push(self, files: dict[str, str], message: str) -> str:
        sha = _commit(self.work, files, message)
        git(self.work, "push", "-q", "-f", str(self.server), f"{sha}:refs/pull/7/head")
        return sha

    def push_tree(self, tree_entries: str, message: str) -> str:
        """A commit of a hand-made tree (git itself never makes a `.git` entry; an attacker's
        client can)."""
        tree = git(self.work, "mktree", stdin=tree_entries)
        sha = git(self.work, "commit-tree", tree, "-p", "HEAD", "-m", message)
        git(self.work, "push", "-q", "-f", str(self.server), f"{sha}:refs/pull/8/head")
        return sha


def _export(url: str, sha: str, tree: Path):
    return _run("bash", SCRIPTS / "mi300x-export.sh", url, sha, tree)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gh = _load("gh_expressions")
WORKFLOW = yaml.safe_load((REPO_ROOT / ".github/workflows/gate-mi300x.yml").read_text())


def _step(job: str, name_starts: str) -> dict:
    return next(
        s for s in WORKFLOW["jobs"][job]["steps"] if s.get("name", "").startswith(name_starts)
    )


def _event(name: str, head_sha: str) -> dict:
    event = json.loads((EVENTS / f"{name}.json").read_text())
    event["event"]["pull_request"]["head"]["sha"] = head_sha
    return event


def _context_of(event: dict) -> dict:
    return {
        "github": {
            "event_name": event["event_name"],
            "ref": event["ref"],
            "repository": event["repository"],
            "event": event["event"],
            "sha": "0" * 40,
        },
        "inputs": event["inputs"],
        "env": WORKFLOW.get("env", {}),
    }


def _evaluate(expression: str, event: dict):
    """A `${{ }}` value of the workflow, as GitHub would expand it for ``event``."""
    return gh.evaluate(
        expression.strip().removeprefix("${{").removesuffix("}}"), _context_of(event)
    )


# --- the commit under test reaches the runner as data ---------------------------------------------


def test_a_labelled_fork_runs_the_commit_the_label_was_put_on_and_a_later_push_runs_nothing(
    tmp_path,
):
    repo = ForkShapedRepository(tmp_path)
    labelled = repo.fork_push({"kernel.py": "reviewed\n"}, "what the maintainer read")
    later = repo.fork_push({"kernel.py": "pushed after the label\n"}, "after the label")
    # the label event names the head at the time of labelling; the job's export step takes that SHA
    approved = _event("pr-fork-labeled-approved", labelled)
    sha = _evaluate(_step("gate", "Export the commit under test")["env"]["SHA"], approved)
    assert sha == labelled
    assert gh.truthy(gh.evaluate(WORKFLOW["jobs"]["gate"]["if"], _context_of(approved)))
    out = _export(repo.url, sha, tmp_path / "tree")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "tree" / "kernel.py").read_text() == "reviewed\n"
    assert not (tmp_path / "tree" / ".git").exists()
    # the push after it: its synchronize event starts no job, labelled or not
    for name in (
        "pr-fork-synchronize-after-approval",
        "pr-fork-synchronize",
        "pr-deleted-fork-synchronize",
    ):
        pushed = _event(name, later)
        assert not gh.truthy(gh.evaluate(WORKFLOW["jobs"]["gate"]["if"], _context_of(pushed))), name


def test_a_deleted_forks_labelled_commit_exports_from_the_base_repository(tmp_path):
    repo = ForkShapedRepository(tmp_path)
    labelled = repo.fork_push({"kernel.py": "from a fork since deleted\n"}, "fork")
    event = _event("pr-fork-labeled-approved", labelled)
    event["event"]["pull_request"]["head"]["repo"] = None  # GitHub's payload once the fork is gone
    assert gh.truthy(gh.evaluate(WORKFLOW["jobs"]["gate"]["if"], _context_of(event)))
    out = _export(
        repo.url,
        _evaluate(_step("gate", "Export the commit under test")["env"]["SHA"], event),
        tmp_path / "t",
    )
    assert (
        out.returncode == 0
        and (tmp_path / "t" / "kernel.py").read_text() == "from a fork since deleted\n"
    ), out.stderr


def test_a_git_config_or_hook_planted_in_the_commit_never_reaches_the_host(tmp_path):
    """Symptom: the container mounted the checkout with .git/ read-write; a core.fsmonitor or
    hook written there ran on the host in checkout's post step. Fix: no .git reaches the host; a
    tree that holds one is refused at the fetch."""
    repo = ForkShapedRepository(tmp_path)
    marker = tmp_path / "PWNED"
    config = git(
        repo.work, "hash-object", "-w", "--stdin", stdin=f"[core]\n\tfsmonitor = touch {marker}\n"
    )
    hook = git(repo.work, "hash-object", "-w", "--stdin", stdin=f"#!/bin/sh\ntouch {marker}\n")
    hooks = git(repo.work, "mktree", stdin=f"100755 blob {hook}\tpost-checkout\n")
    dot_git = git(
        repo.work, "mktree", stdin=f"100644 blob {config}\tconfig\n040000 tree {hooks}\thooks\n"
    )
    readme = git(repo.work, "rev-parse", "HEAD:README.md")
    nested = git(repo.work, "mktree", stdin=f"040000 tree {dot_git}\t.git\n")  # suite/.git
    for entries in (
        f"040000 tree {dot_git}\t.git\n100644 blob {readme}\tREADME.md\n",
        f"040000 tree {nested}\tsuite\n",
    ):
        sha = repo.push_tree(entries, "a .git in the tree")
        out = _export(repo.url, sha, tmp_path / "tree")
        assert out.returncode == 1 and "could not fetch" in out.stderr, out.stdout + out.stderr
        assert not (tmp_path / "tree").exists()
    clean = _export(repo.url, repo.main, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    status = _run(
        "git", "status", cwd=tmp_path / "clean", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert status.returncode != 0 and "not a git repository" in status.stderr
    assert not marker.exists()


@pytest.mark.parametrize("sha", ["main", "1" * 12, "refs/pull/7/head", "-" + "1" * 39])
def test_the_export_takes_a_full_sha_only(tmp_path, sha):
    out = _export((tmp_path / "nowhere.git").as_uri(), sha, tmp_path / "tree")
    assert (
        out.returncode == 2
        and "is not a full commit SHA" in out.stderr
        and not (tmp_path / "tree").exists()
    )


def test_a_git_bomb_is_refused_before_a_byte_is_written(tmp_path):
    """Symptom: a commit of a few kilobytes naming one blob under a million paths passed fsck, and
    the export wrote it out until the runner's disk was full. Fix: the tree's file count and size
    are summed from its listing first, and over the caps nothing is written."""
    repo = ForkShapedRepository(tmp_path)
    blob = git(repo.work, "hash-object", "-w", "--stdin", stdin="x" * 4096)
    tree = git(repo.work, "mktree", stdin="".join(f"100644 blob {blob}\tf{i}\n" for i in range(10)))
    for _ in range(5):  # 10**6 paths
        tree = git(
            repo.work, "mktree", stdin="".join(f"040000 tree {tree}\td{i}\n" for i in range(10))
        )
    sha = repo.push_tree(f"040000 tree {tree}\tbomb\n", "a git bomb")
    out = _export(repo.url, sha, tmp_path / "tree")
    assert out.returncode == 1 and "passes the export's caps" in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "tree").exists()
    # folders count too: a million empty ones are no smaller to write out
    empty = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree
    git(repo.work, "hash-object", "-w", "-t", "tree", "--stdin", stdin="")
    tree = empty
    for _ in range(6):
        tree = git(
            repo.work, "mktree", stdin="".join(f"040000 tree {tree}\td{i}\n" for i in range(10))
        )
    sha = repo.push_tree(f"040000 tree {tree}\tfolders\n", "a bomb of folders")
    out = _export(repo.url, sha, tmp_path / "tree")
    assert out.returncode == 1 and "passes the export's caps" in out.stderr, out.stderr[-2000:]
    # the tree's own .gitattributes expands nothing on the way out: what is written is what the
    # listing summed (export-subst made 21 kB of $Format:%>(16384)%H$ into 16 MB)
    subst = "$Format:%>(16384)%H$ $Id$\n" * 100
    attributes = "* export-subst ident text eol=crlf working-tree-encoding=UTF-32LE\n"
    blobs = {
        name: git(repo.work, "hash-object", "-w", "--stdin", stdin=body)
        for name, body in ((".gitattributes", attributes), ("subst.txt", subst))
    }
    sha = repo.push_tree(
        "".join(f"100644 blob {blob}\t{name}\n" for name, blob in blobs.items()), "expands"
    )
    out = _export(repo.url, sha, tmp_path / "expands")
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "expands" / "subst.txt").read_bytes() == subst.encode()
    small = _run(
        "bash",
        SCRIPTS / "mi300x-export.sh",
        repo.url,
        repo.main,
        tmp_path / "small",
        env={"TILEGATE_EXPORT_MAX_FILES": "1"},
    )
    assert small.returncode == 0, small.stderr  # one file, at the cap
    for cap in ({"TILEGATE_EXPORT_MAX_FILES": "0"}, {"TILEGATE_EXPORT_MAX_BYTES": "5"}):
        over = _run(
            "bash", SCRIPTS / "mi300x-export.sh", repo.url, repo.main, tmp_path / "o", env=cap
        )
        assert over.returncode == 1 and not (tmp_path / "o").exists(), (cap, over.stderr)


# --- only plain files leave the container ---------------------------------------------------------


def _hostile_out(root: Path) -> tuple[Path, Path]:
    """An /out as an attacker leaves it, beside a runner credential file."""
    creds = root / "runner" / ".credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text(SECRET)
    out = root / "out"
    for folder in ("artifacts/junit", "artifacts/perf", "artifacts/isa", "baselines/perf"):
        (out / folder).mkdir(parents=True)
    (out / "artifacts/junit/rocm-1.xml").write_text(
        '<testsuite><testcase classname="m" name="t"/></testsuite>'
    )
    (out / "baselines/perf/mi300x.json").write_text("{}")
    (out / ".test_durations").write_text('{"m::t": 1.5}')
    (out / "artifacts/perf/perf-mi300x.json").symlink_to(creds)
    (out / "artifacts/perf/perf.md").symlink_to(creds)
    (out / "artifacts/linked-folder").symlink_to(creds.parent, target_is_directory=True)
    os.mkfifo(out / "artifacts/isa/fifo.json")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(out / "artifacts/isa/socket.json"))
    sock.close()
    # what /dev/zero is
    os.mknod(out / "artifacts/isa/zero.json", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    (out / "artifacts/junit/linked.xml").write_text("<testsuite/>")
    # both names refused
    os.link(out / "artifacts/junit/linked.xml", out / "artifacts/junit/hardlink.xml")
    (out / "artifacts/.git/hooks").mkdir(parents=True)
    (out / "artifacts/.git/config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    (out / "artifacts/bad\nname.json").write_text("{}")
    with open(out / "artifacts/isa/huge.json", "wb") as f:
        f.truncate(300 * 2**20)  # sparse: over the cap, no disk used
    (out / "artifacts" / Path(*["d"] * 40)).mkdir(parents=True)  # deeper than any record folder
    (out / "runner-files").mkdir()
    return out, creds


def test_only_plain_files_leave_the_container_and_every_other_entry_is_reported(tmp_path):
    out, _creds = _hostile_out(tmp_path)
    dest = tmp_path / "records"
    proc = _run(sys.executable, SCRIPTS / "collect_records.py", out, dest)
    assert proc.returncode == 1, proc.stderr
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert copied == [
        ".test_durations",
        "artifacts/junit/rocm-1.xml",
        "refused.json",
        "suite/baselines/perf/mi300x.json",
    ]
    assert all(not p.is_symlink() for p in dest.rglob("*"))
    record = json.loads((dest / "refused.json").read_text())
    refused = {r["path"]: r["why"] for r in record["first"]}
    assert record["count"] == len(refused)
    assert set(refused) == {
        "artifacts/perf/perf-mi300x.json",
        "artifacts/perf/perf.md",
        "artifacts/linked-folder",
        "artifacts/isa/fifo.json",
        "artifacts/isa/socket.json",
        "artifacts/isa/zero.json",
        "artifacts/junit/hardlink.xml",
        "artifacts/junit/linked.xml",
        "artifacts/.git",
        "artifacts/bad\\x0aname.json",
        "artifacts/isa/huge.json",
        "runner-files",
        "artifacts" + "/d" * 32,
    }
    assert (
        "hard link" in refused["artifacts/junit/hardlink.xml"]
        and "cap" in refused["artifacts/isa/huge.json"]
    )
    assert SECRET not in "".join(
        p.read_text(errors="replace") for p in dest.rglob("*") if p.is_file()
    )
    annotations = [
        ln for ln in proc.stderr.splitlines() if ln.startswith("::error title=record refused::")
    ]
    assert len(annotations) == len(refused) and any("bad\\x0aname.json" in ln for ln in annotations)


# what a pull request's code can name a record: each one a name the upload keeps and an unzip on
# another machine writes (a backslash becomes a separator in the upload's zip)
HOSTILE_NAMES = (
    "x\\..\\..\\..\\..\\scripts\\step_summary.py",
    "esc\x1b]8;;http:x\x07.json",
    "::error title=MI300X gate::all passed.json",
    "bell\x07\r::add-mask::x.json",
    "caf\u00e9.json",
    "a" * 129,
    "%0A::warning::x.json",
    "a ##[error]forged.json",
    "...",
)


def test_a_records_name_is_taken_only_in_its_alphabet_and_shown_escaped(tmp_path):
    out = tmp_path / "out"
    (out / "artifacts/isa").mkdir(parents=True)
    (out / "artifacts/isa/gfx942-ok_v1.2+a.json").write_text("{}")
    for name in HOSTILE_NAMES:
        (out / "artifacts" / name).write_text("pwned")
    deep = out / "artifacts" / "/".join(["n" * 100] * 6)  # every name fine, the path too long
    deep.mkdir(parents=True)
    (deep / "f.json").write_text("{}")
    dest = tmp_path / "records"
    proc = _run(sys.executable, SCRIPTS / "collect_records.py", out, dest)
    assert proc.returncode == 1
    taken = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert taken == ["artifacts/isa/gfx942-ok_v1.2+a.json", "refused.json"]
    record = json.loads((dest / "refused.json").read_text())
    assert record["count"] == len(HOSTILE_NAMES) + 1
    for line in [*proc.stderr.splitlines(), *(r["path"] for r in record["first"])]:
        assert line.isprintable() and line.isascii(), repr(line)
    # the only workflow commands the runner would obey are the script's own, one per refusal
    commands = step_commands(proc.stdout.encode(), proc.stderr.encode())
    assert len(commands) == record["count"]
    assert all(
        c.name == "error" and c.line.startswith("::error title=record refused::collect_records ")
        for c in commands
    ), commands
    assert all(c.line.count("::") == 2 for c in commands), commands


def test_a_million_entries_give_twenty_refusals_and_a_count():
    """Symptom: a million empty files in /out gave 950,005 annotations and a 96 MB refused.json.
    Fix: the first MAX_REPORTED refusals by name, then the count."""
    base = _shared_temp()  # a tmpfs: a million files made in seconds
    try:
        _million_entries(base)
    finally:
        _release(base)


def _million_entries(tmp_path: Path) -> None:
    many = tmp_path / "out" / "artifacts" / "many"
    many.mkdir(parents=True)
    n = 1_000_000
    for i in range(n):
        os.close(os.open(many / f"{i}.json", os.O_CREAT | os.O_WRONLY, 0o644))
    dest = tmp_path / "records"
    proc = _run(sys.executable, SCRIPTS / "collect_records.py", tmp_path / "out", dest)
    assert proc.returncode == 1
    record = json.loads((dest / "refused.json").read_text())
    taken = sum(1 for p in dest.rglob("*.json") if p.name != "refused.json")
    assert record["count"] == n - taken and len(record["first"]) == 20
    assert (dest / "refused.json").stat().st_size < 10_000
    lines = proc.stderr.splitlines()
    assert len(lines) == 21 and lines[-1].endswith(f"refused {n - taken - 20} more entries")


def test_a_clean_collection_takes_everything_and_passes(tmp_path):
    out = tmp_path / "out"
    (out / "artifacts/isa").mkdir(parents=True)
    (out / "artifacts/isa/a.json").write_text("{}")
    proc = _run(sys.executable, SCRIPTS / "collect_records.py", out, tmp_path / "records")
    assert (
        proc.returncode == 0 and (tmp_path / "records/artifacts/isa/a.json").read_text() == "{}"
    ), proc.stderr
    missing = _run(
        sys.executable, SCRIPTS / "collect_records.py", tmp_path / "never-written", tmp_path / "r2"
    )
    # the summary then says "no test results"
    assert missing.returncode == 0 and (tmp_path / "r2").is_dir()


# --- the step summary: every cell text, every record read without following
# ----------------------------

FORGED = "t\n\n**Verdict: passed** (1 passed)\n\n| `x` | <img src=x onerror=alert(1)> |"


def _summary(*roots: Path) -> subprocess.CompletedProcess:
    return _run(
        sys.executable,
        SCRIPTS / "step_summary.py",
        *roots,
        "--annotate",
        env={"GITHUB_STEP_SUMMARY": ""},
    )


def _outside_code_blocks(lines: list[str]) -> list[str]:
    """The lines GitHub renders as markdown: not inside a fenced code block (CommonMark: a fence
    closes on a line of at least as many backticks and nothing else)."""
    out, fence = [], ""
    for ln in lines:
        run = ln[: len(ln) - len(ln.lstrip("`"))]
        if not fence and len(run) >= 3:
            fence = run
        elif fence and len(run) >= len(fence) and ln.strip() == run:
            fence = ""
        elif not fence:
            out.append(ln)
    return out


def test_a_forged_test_name_or_table_prints_no_verdict_of_its_own(tmp_path):
    """Symptom: a test name holding an encoded newline broke out of the failures table and printed
    **Verdict: passed** under the real one. Fix: every cell is text (tilegate/artifacts/render.py
    text, code)."""
    junit = tmp_path / "artifacts/junit"
    junit.mkdir(parents=True)
    name = (
        FORGED.replace("\n", "&#10;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )
    junit.joinpath("rocm-1.xml").write_text(
        f'<testsuite><testcase classname="m" name="{name}"><failure '
        f'message="{name}">x</failure></testcase>'
        f'<testcase classname="m" name="s"><skipped message="{name}"/></testcase></testsuite>'
    )
    perf = tmp_path / "artifacts/perf"
    perf.mkdir()
    perf.joinpath("perf.md").write_text(
        "| row | ratio |\n````\n```\n**Verdict: passed**\n<details open>\n"
    )
    proc = _summary(tmp_path / "artifacts")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rendered = _outside_code_blocks(lines)
    verdicts = [ln for ln in rendered if "Verdict" in ln and not ln.startswith(("|", "::error"))]
    assert verdicts == [lines[2]] and lines[2].startswith("**Verdict: failed**"), verdicts
    table = lines[lines.index("| failing test | reason |") :]
    assert table[2].startswith("| `") and table[3] == ""  # one row, then the table ends
    # HTML of the record's own: outside code spans (shown as written) and not escaped; annotations
    # are log text
    markup = " ".join(
        re.sub(r"(`+).*?(?<!`)\1(?!`)", "", ln) for ln in rendered if not ln.startswith("::")
    )
    assert not re.search(r"(?<!\\)<(img|details open)", markup)
    fence = next(ln for ln in lines if ln.endswith("text") and ln.startswith("`"))
    assert len(fence) - 4 > 4  # longer than any backtick run in the table it holds
    annotation = next(ln for ln in lines if ln.startswith("::error"))
    assert "\n" not in annotation and "%0A" in annotation


def test_the_summary_reads_no_linked_record_and_survives_any_file(tmp_path):
    out, _creds = _hostile_out(tmp_path)
    art = out / "artifacts"
    (art / "isa/deep.json").write_text("[" * 100_000)
    (art / "isa/binary.json").write_bytes(os.urandom(4096))
    (art / "junit/zero.xml").symlink_to("/dev/zero")
    (art / "numerics").symlink_to(tmp_path / "runner", target_is_directory=True)
    (art / "memory").mkdir()
    os.rename(art / "isa/zero.json", art / "memory/zero.json")  # the only record of its section
    (art / "sanitize").mkdir()
    (art / "sanitize/memcheck.log").symlink_to(_creds)
    proc = _summary(art)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout and "Verdict: failed" in proc.stdout
    assert "zero.xml" in proc.stdout and "a symbolic link, not followed" in proc.stdout
    assert "zero.json" in proc.stdout and "not a regular file" in proc.stdout


# --- the runner takes only main's gate-mi300x.yml
# --------------------------------------------------

REPO = "tilegate-dev/tilegate"
MAIN_GATE = f"{REPO}/.github/workflows/gate-mi300x.yml@refs/heads/main"


def _hook(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    installed = tmp_path / "hooks"
    installed.mkdir(exist_ok=True)
    shutil.copy(SCRIPTS / "runner-job-started.sh", installed / "job-started.sh")
    (installed / "job-started.allow").write_text(REPO + "\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        ["bash", "-e", str(installed / "job-started.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        env={**clean, **env},
    )


def _job(
    event: str,
    workflow_ref: str = MAIN_GATE,
    ref: str = "refs/heads/main",
    job: str = "gate",
    repo: str = REPO,
) -> dict[str, str]:
    return {
        "GITHUB_REPOSITORY": repo,
        "GITHUB_WORKFLOW_REF": workflow_ref,
        "GITHUB_EVENT_NAME": event,
        "GITHUB_REF": ref,
        "GITHUB_JOB": job,
    }


@pytest.mark.parametrize(
    "env",
    [
        _job("push"),
        _job("pull_request_target"),
        _job("schedule", job="deep"),
        _job("workflow_dispatch"),
    ],
    ids=["push-main", "pr-target", "schedule", "dispatch"],
)
def test_the_runner_takes_mains_gate_workflow(tmp_path, env):
    proc = _hook(tmp_path, env)
    assert proc.returncode == 0 and "accepted" in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "env, why",
    [
        # a fork's own edited gate-cpu.yml, with runs-on: [self-hosted, linux, rocm, gfx942]
        (
            _job(
                "pull_request",
                f"{REPO}/.github/workflows/gate-cpu.yml@refs/pull/7/merge",
                "refs/pull/7/merge",
                "cpu",
            ),
            "workflow",
        ),
        # the same fork renaming its copy to gate-mi300x.yml
        (
            _job(
                "pull_request",
                f"{REPO}/.github/workflows/gate-mi300x.yml@refs/pull/7/merge",
                "refs/pull/7/merge",
            ),
            "workflow",
        ),
        # a push workflow on another branch of this repository
        (
            _job(
                "push",
                f"{REPO}/.github/workflows/gate-mi300x.yml@refs/heads/topic",
                "refs/heads/topic",
            ),
            "workflow",
        ),
        (_job("push", f"{REPO}/.github/workflows/other.yml@refs/heads/main"), "workflow"),
        # a pull request into another branch runs that branch's copy under pull_request_target
        (
            _job(
                "pull_request_target",
                f"{REPO}/.github/workflows/gate-mi300x.yml@refs/heads/release",
                "refs/heads/release",
            ),
            "workflow",
        ),
        (_job("issue_comment"), "event"),
        (_job("workflow_run"), "event"),
        (_job("push", job="summary"), "job"),
        (
            _job(
                "push",
                repo="stranger/tilegate",
                workflow_ref="stranger/tilegate/.github/workflows/gate-mi300x.yml@refs/heads/main",
            ),
            "repository",
        ),
        ({}, "repository"),
    ],
    ids=[
        "fork-own-cpu-workflow",
        "fork-renamed-copy",
        "push-other-branch",
        "other-workflow-on-main",
        "pr-into-release",
        "issue-comment",
        "workflow-run",
        "hosted-job-name",
        "other-repository",
        "no-context",
    ],
)
def test_the_runner_refuses_any_other_job(tmp_path, env, why):
    proc = _hook(tmp_path, env)
    assert proc.returncode == 1 and f"refused: {why}" in proc.stderr, proc.stdout + proc.stderr


def test_the_runner_refuses_everything_without_its_allow_file(tmp_path):
    (tmp_path / "job-started.sh").write_bytes((SCRIPTS / "runner-job-started.sh").read_bytes())
    proc = subprocess.run(
        ["bash", "-e", str(tmp_path / "job-started.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, **_job("push")},
        timeout=30,
    )
    assert proc.returncode == 1 and "job-started.allow" in proc.stderr


# --- the container: its command line, and a real run of it
# -----------------------------------------


def _trusted_copy(root: Path, image: str) -> Path:
    """main's scripts as the runner checks them out (with what step_summary.py imports), with
    IMAGE pinned."""
    ignore = shutil.ignore_patterns("__pycache__", "node_modules")
    shutil.copytree(SCRIPTS, root / "scripts", ignore=ignore)
    shutil.copytree(REPO_ROOT / "tilegate", root / "tilegate", ignore=ignore)
    (root / ".github").mkdir()
    (root / ".github" / "mi300x-image").write_text(f"# pinned\n{image}\n")
    return root / "scripts" / "mi300x-container.sh"


def _shared_temp(size: str = "1g") -> Path:
    """A folder the unprivileged runner user can enter (pytest's tmp_path is root's alone), a tmpfs
    of its own (a million files are made in seconds there); _release() ends it."""
    # not under /tmp: the container's /tmp is a tmpfs of its own, over the fake GPU node's path
    base = Path(tempfile.mkdtemp(prefix="tilegate-boundary-", dir="/var/tmp"))
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},nr_inodes=2m,mode=0755", "tmpfs", str(base)],
        check=True,
    )
    return base


def _run_name(base: Path) -> str:
    """The run name (the workflow's TILEGATE_RUN) of a test working in ``base``."""
    return f"tilegate-test-{os.getpid()}-{base.name.rsplit('-', 1)[-1]}"


def _release(base: Path) -> None:
    # this test's /out volume and its holder, if it made them
    subprocess.run(["docker", "rm", "-f", f"{_run_name(base)}-out"], capture_output=True)
    subprocess.run(["docker", "volume", "rm", f"{_run_name(base)}-out"], capture_output=True)
    subprocess.run(["chmod", "-R", "u+rwX", str(base)], capture_output=True)
    subprocess.run(["umount", "-l", str(base)], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def _runners(path: Path) -> Path:
    """``path``, made as a new folder of the runner user's."""
    path.mkdir()
    os.chown(path, NOBODY, NOBODY)
    return path


def _give_to_runner(path: Path) -> None:
    """``path`` and all below it, the runner user's (as what it wrote would be)."""
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(path)], check=True)


def _runner_folders(base: Path) -> dict[str, Path]:
    base.mkdir(mode=0o755)
    return {name: _runners(base / name) for name in ("tree", "cache", "wheels")}


def _fake_gpu(base: Path, gid: int) -> Path:
    node = base / "fake-kfd"
    # /dev/null's numbers, owned like /dev/kfd
    os.mknod(node, 0o660 | stat.S_IFCHR, os.makedev(1, 3))
    os.chown(node, 0, gid)
    return node


# a docker that records each call (one JSON list a line); a volume exists if VOLUME_EXISTS is set
RECORDING_DOCKER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["DOCKER_ARGS"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
inspect = sys.argv[1:3] == ["volume", "inspect"]
sys.exit(1 if inspect and not os.environ.get("VOLUME_EXISTS") else 0)
"""


def _calls(log: Path) -> list[list[str]]:
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("")
    return calls


def test_the_container_command_line_is_the_boundary(tmp_path):
    base = _shared_temp()
    try:
        pin = "rocm/sglang@sha256:" + "0" * 64
        script = _trusted_copy(base / "trusted", pin)
        folders = _runner_folders(base / "run")
        bin_dir = base / "bin"
        bin_dir.mkdir()
        (bin_dir / "docker").write_text(RECORDING_DOCKER)
        (bin_dir / "docker").chmod(0o755)
        args = base / "run" / "docker-args"
        args.touch()
        os.chown(args, NOBODY, NOBODY)
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "DOCKER_ARGS": str(args),
            "TILEGATE_GPU_DEVICES": str(_fake_gpu(base, 44)),
        }
        f = folders
        run = "tilegate-101-1-gate-1"
        gate_args = (f["tree"], run, f["cache"], f["wheels"], "--", "tox", "-e", "rocm")
        out = _run("bash", script, "gate", *gate_args, env=env, user=NOBODY)
        assert out.returncode == 0, out.stderr
        inspect, create, holder, call = _calls(args)
        # /out: a new tmpfs volume of a fixed size, kept by a holder that only sleeps
        assert inspect == ["volume", "inspect", f"{run}-out"]
        assert create[:2] == ["volume", "create"] and create[-1] == f"{run}-out"
        opts = f"o=size=8g,nr_inodes=100k,uid={NOBODY},gid={NOBODY},mode=0700,nodev,nosuid,noexec"
        assert opts in create
        assert "type=tmpfs" in create and create[create.index("--label") + 1] == (
            "tilegate.mi300x-out"
        )
        assert holder[:4] == ["run", "-d", "--name", f"{run}-out"] and holder[-2:] == [
            "sleep",
            "infinity",
        ]
        assert holder[holder.index("--label") + 1] == "tilegate.mi300x-out"  # `stop` leaves it
        assert call[:2] == ["run", "--label"] and call[-6:] == [
            pin,
            "bash",
            "/opt/tilegate/inside.sh",
            "tox",
            "-e",
            "rocm",
        ]
        assert call[call.index("--user") + 1] == f"{NOBODY}:{NOBODY}"
        # what `stop` ends after a cancel
        assert call[call.index("--label") + 1] == "tilegate.mi300x-gate"
        # the container's output cannot be a workflow command: they are off behind a fresh token,
        # on one stream, and the resume is a line of its own
        lines = out.stderr.splitlines()
        token = lines[0].removeprefix("::stop-commands::")
        assert lines[0].startswith("::stop-commands::") and len(token) == 32
        assert lines[-2:] == ["", f"::{token}::"] and not out.stdout
        assert {
            "--rm",
            "--read-only",
            "--log-driver=none",
            "--network=none",
            "--ipc=private",
            "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            f"--device={base / 'fake-kfd'}",
        } <= set(call)
        assert call[call.index("--group-add") + 1] == "44"
        assert any(a.startswith("--memory=") for a in call) and any(
            a.startswith("--pids-limit=") for a in call
        )
        assert not [
            a
            for a in call
            if "seccomp" in a or a in ("--privileged", "--ipc=host", "--network=host")
        ]
        mounts = [call[i + 1] for i, a in enumerate(call) if a == "-v"]
        assert mounts == [
            f"{f['tree']}:/gate:ro",
            f"{run}-out:/out",
            f"{f['cache']}:/cache-seed:ro",
            f"{f['wheels']}:/wheels:ro",
            f"{base}/trusted/scripts/mi300x-inside.sh:/opt/tilegate/inside.sh:ro",
            f"{base}/trusted/scripts/mi300x-wheels.txt:/opt/tilegate/wheels.txt:ro",
        ]
        # every other writable place is a tmpfs of a fixed size, gone with the container
        tmpfs = {
            call[i + 1].split(":")[0]: call[i + 1] for i, a in enumerate(call) if a == "--tmpfs"
        }
        assert set(tmpfs) == {"/tmp", "/scratch", "/cache"}
        assert all(",size=" in o and f",uid={NOBODY}," in o for o in tmpfs.values()), tmpfs
        # main's own run writes main's cache; no pull request ever does
        as_main = _run(
            "bash", script, "gate", *gate_args, env={**env, "TRUST": "main"}, user=NOBODY
        )
        assert as_main.returncode == 0, as_main.stderr
        call = _calls(args)[-1]
        assert f"{f['cache']}:/cache" in call and not any(a.startswith("/cache") for a in call)
        # the records: main's collect_records.py in the image, /out read-only, a new folder
        host = _runners(base / "host")  # the runner user's $RUNNER_TEMP/$TILEGATE_RUN
        never = _run("bash", script, "collect", run, host / "none", env=env, user=NOBODY)
        assert never.returncode == 0 and (host / "none").is_dir(), (
            never.stderr
        )  # no /out: no records
        assert [c[:2] for c in _calls(args)] == [["volume", "inspect"]]
        collect = _run(
            "bash",
            script,
            "collect",
            run,
            host / "records",
            env={**env, "VOLUME_EXISTS": "1"},
            user=NOBODY,
        )
        assert collect.returncode == 0, collect.stderr
        call = _calls(args)[-1]
        assert [call[i + 1] for i, a in enumerate(call) if a == "-v"] == [
            f"{run}-out:/out:ro",
            f"{host}:/dest",
            f"{base}/trusted/scripts/collect_records.py:/opt/tilegate/collect_records.py:ro",
        ]
        assert call[-4:] == ["python3", "/opt/tilegate/collect_records.py", "/out", "/dest/records"]
        assert {"--network=none", "--read-only", "--cap-drop=ALL"} <= set(call)
        # a run's name is a docker name and nothing else
        for name in ("x; rm -rf /", "tilegate-a b", "--label=x", "tilegate-" + "a" * 101):
            bad = _run("bash", script, "release", name, env=env, user=NOBODY)
            assert bad.returncode == 2 and "is not a run's name" in bad.stderr, name
        # the networked step mounts no code under test
        wheels = _run("bash", script, "wheels", f["wheels"], env=env, user=NOBODY)
        assert wheels.returncode == 0, wheels.stderr
        call = _calls(args)[-1]
        assert [call[i + 1] for i, a in enumerate(call) if a == "-v"] == [
            f"{base}/trusted/scripts/mi300x-wheels.txt:/opt/tilegate/wheels.txt:ro",
            f"{f['wheels']}:/wheels",
        ]
        assert "--require-hashes" in call and "--only-binary=:all:" in call
    finally:
        _release(base)


def test_the_container_refuses_a_root_runner_an_unpinned_image_and_a_tree_with_git(tmp_path):
    pinned = _trusted_copy(tmp_path / "a", "rocm/sglang@sha256:" + "0" * 64)
    (tmp_path / "tree" / ".git").mkdir(parents=True)
    as_root = _run(
        "bash",
        pinned,
        "gate",
        tmp_path / "tree",
        "tilegate-1-1-gate-1",
        *(tmp_path / n for n in ("c", "w")),
        "--",
        "true",
    )
    assert os.getuid() != 0 or (as_root.returncode == 1 and "runs as root" in as_root.stderr), (
        as_root.stderr
    )
    unpinned = _trusted_copy(tmp_path / "b", "lmsysorg/sglang:v0.5.23-rocm700-mi30x")
    out = _run("bash", unpinned, "wheels", tmp_path / "w")
    assert out.returncode == 1 and "holds no image pinned by digest" in out.stderr
    committed = _run("bash", SCRIPTS / "mi300x-container.sh", "wheels", tmp_path / "w")
    pinned_on_main = "@sha256:" in (REPO_ROOT / ".github" / "mi300x-image").read_text()
    assert pinned_on_main or "holds no image pinned by digest" in committed.stderr
    base = _shared_temp()
    try:
        pinned = _trusted_copy(base / "trusted", "rocm/sglang@sha256:" + "0" * 64)
        folders = _runner_folders(base / "run")
        (folders["tree"] / ".git").mkdir()
        f = folders
        with_git = _run(
            "bash",
            pinned,
            "gate",
            f["tree"],
            "tilegate-1-1-gate-1",
            f["cache"],
            f["wheels"],
            "--",
            "true",
            user=NOBODY,
        )
        assert with_git.returncode == 1 and "no exported tree" in with_git.stderr, with_git.stderr
    finally:
        _release(base)


ATTACK = """
import json, os
r = {"uid": os.getuid(), "net": sorted(os.listdir("/sys/class/net"))}
r["gate_has_git"] = os.path.exists("/gate/.git")
lines = open("/proc/self/status").read().splitlines()
status = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
r.update({k: status[k].strip() for k in ("CapEff", "NoNewPrivs", "Seccomp")})
try:
    os.makedirs("/gate/.git/hooks")
    r["gate_write"] = "written"
except OSError as e:
    r["gate_write"] = e.strerror
r["host_shm_seen"] = os.path.exists("/dev/shm/" + os.environ.get("SHM_MARKER", "none"))
def first(*paths):
    for p in paths:
        if os.path.exists(p):
            return open(p).read().strip()
r["pids_max"] = first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")
r["memory_max"] = first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
r["kfd_opened"] = bool(open(os.environ["GPU_NODE"], "rb"))
os.makedirs("/out/artifacts/.git/hooks")
hook = "touch " + os.environ["MARKER"]
open("/out/artifacts/.git/config", "w").write("[core]\\n\\tfsmonitor = " + hook + "\\n")
os.makedirs("/out/artifacts/perf")
os.symlink(os.environ["CREDS"], "/out/artifacts/perf/perf-mi300x.json")
json.dump(r, open("/out/artifacts/probe.json", "w"))
# a verdict of its own on the log, and no newline after it: the host's resume must not join it
import sys
sys.stdout.write("::error title=MI300X gate::all 1234 tests passed")
"""


class RealRunner:
    """The job's gate step as the runner would run it, with the real docker daemon: main's
    scripts with the test image pinned (an imported image has no registry digest, so a one-line
    shim maps the pinned NAME@<id> to the id), an exported commit, fresh folders, a fake GPU
    node, a non-root user."""

    def __init__(self, base: Path, files: dict[str, str]) -> None:
        from tilegate.testing.container import wheels_folder

        image_id = _run(
            "docker", "image", "inspect", "--format", "{{.Id}}", TEST_IMAGE
        ).stdout.strip()
        self.script = _trusted_copy(base / "trusted", f"tilegate-test@{image_id}")
        shim = base / "bin" / "docker"
        shim.parent.mkdir()
        shim.write_text(
            f'#!/bin/bash\nargs=("${{@/tilegate-test@{image_id}/{image_id}}}")\n'
            f'exec {shutil.which("docker")} "${{args[@]}}"\n'
        )
        shim.chmod(0o755)
        self.repo = ForkShapedRepository(base)
        sha = self.repo.fork_push(files, "a stranger's PR")
        self.folders = _runner_folders(base / "run")
        shutil.rmtree(self.folders["tree"])
        assert _export(self.repo.url, sha, self.folders["tree"]).returncode == 0
        shutil.rmtree(self.folders["wheels"])
        shutil.copytree(wheels_folder(), self.folders["wheels"])
        self.gpu = _fake_gpu(base, 44)
        self.docker_gid = os.stat("/var/run/docker.sock").st_gid
        # a name of this test's own: `release` with it removes only this run's /out
        self.run = _run_name(base)
        self.env = {
            "PATH": f"{shim.parent}:{os.environ['PATH']}",
            "TILEGATE_GPU_DEVICES": str(self.gpu),
            "TILEGATE_CONTAINER_MEMORY": "2g",
            "TILEGATE_CONTAINER_PIDS": "512",
            "TILEGATE_CONTAINER_SHM": "64m",
        }

    def argv(self, *command) -> list[str]:
        f = self.folders
        argv = [
            "bash",
            str(self.script),
            "gate",
            f["tree"],
            self.run,
            f["cache"],
            f["wheels"],
            "--",
        ]
        return [str(a) for a in (*argv, *command)]

    def script_as_runner(self, *args):
        return _run(
            "bash", self.script, *args, env=self.env, user=NOBODY, groups=(self.docker_gid,)
        )

    def collect(self, records: Path):
        """The job's collect step: main's collect_records.py in the image, over this run's /out."""
        return self.script_as_runner("collect", self.run, records)

    def release(self) -> None:
        self.script_as_runner("release", self.run)

    def gate(self, *command):
        return _run(
            *self.argv(*command), env=self.env, user=NOBODY, groups=(self.docker_gid,), timeout=300
        )


def _labelled_containers() -> list[str]:
    return _run("docker", "ps", "-aq", "--filter", "label=tilegate.mi300x-gate").stdout.split()


@pytest.mark.container
@pytest.mark.xdist_group("docker")  # with the test below: its `stop` ends every labelled container
def test_the_gate_container_runs_the_attackers_code_offline_read_only_unprivileged_and_limited(
    tmp_path,
):
    """A real docker run of the job's gate step over an exported attacker's commit, as a non-root
    runner user, then the host's own steps (collect, summary, git in the trusted checkout)."""
    base = _shared_temp()
    try:
        runner = RealRunner(base, {"attack.py": ATTACK, "suite/baselines/perf/mi300x.json": "{}\n"})
        gpu, repo = runner.gpu, runner.repo
        creds = base / "runner" / ".credentials"
        creds.parent.mkdir()
        creds.write_text(SECRET)
        marker = base / "PWNED"
        shm_marker = f"tilegate-host-{os.getpid()}"
        Path("/dev/shm", shm_marker).write_text("host")
        # the attacker's environment is set by the command it runs, as a tox env's would be
        run = runner.gate(
            "env",
            f"MARKER={marker}",
            f"CREDS={creds}",
            f"SHM_MARKER={shm_marker}",
            f"GPU_NODE={gpu}",
            "python3",
            "attack.py",
        )
        Path("/dev/shm", shm_marker).unlink()
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        commands = step_commands(run.stdout.encode(), run.stderr.encode())
        window = commands[0].data
        assert commands[0].name == "stop-commands" and len(window) == 32
        assert forged(commands, window) == [] and commands[-1].resume, commands
        records = _runners(base / "host") / "records"  # in the runner user's $RUNNER_TEMP
        collect = runner.collect(records)
        assert collect.returncode == 1, collect.stderr
        refused = {r["path"] for r in json.loads((records / "refused.json").read_text())["first"]}
        assert refused == {"artifacts/.git", "artifacts/perf/perf-mi300x.json"}
        probe = json.loads((records / "artifacts/probe.json").read_text())
        assert (
            probe["uid"] == NOBODY
            and probe["CapEff"] == "0000000000000000"
            and probe["NoNewPrivs"] == "1"
        )
        assert probe["Seccomp"] == "2"  # the runtime's default profile, filtering
        assert probe["net"] == ["lo"] and probe["host_shm_seen"] is False
        assert probe["gate_write"] == "Read-only file system" and probe["gate_has_git"] is False
        assert probe["pids_max"] == "512" and int(probe["memory_max"]) == 2 * 2**30
        assert probe["kfd_opened"] is True  # the GPU node, through its owning group only
        assert (records / "suite/baselines/perf/mi300x.json").read_text() == "{}\n"
        summary = _summary(records / "artifacts")
        assert summary.returncode == 0 and SECRET not in summary.stdout
        assert SECRET not in "".join(
            p.read_text(errors="replace") for p in records.rglob("*") if p.is_file()
        )
        # what checkout's post step does on the host: git in the trusted checkout
        trusted = base / "trusted-checkout"
        git(base, "clone", "-q", str(repo.server), str(trusted))
        git(trusted, "status")
        assert not marker.exists()
    finally:
        _release(base)


@pytest.mark.container
@pytest.mark.xdist_group("docker")
def test_a_cancelled_job_leaves_no_container_on_the_gpu():
    """Symptom: a cancel or timeout kills the step's shell, but the daemon keeps the container
    (and the code under test on the GPUs) running past the job. Fix: the containers carry a
    label, and an always() step runs `mi300x-container.sh stop`."""
    base = _shared_temp()
    try:
        runner = RealRunner(base, {"slow.py": "import time\ntime.sleep(600)\n"})
        step = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                f"--groups={runner.docker_gid}",
                *runner.argv("python3", "slow.py"),
            ],
            env={**os.environ, **runner.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not _labelled_containers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _labelled_containers(), "the gate's container never started"
        step.kill()  # the runner's last signal to a cancelled step
        step.wait(timeout=30)
        time.sleep(1)
        assert _labelled_containers(), (
            "the container went with the step: the stop step would prove nothing"
        )
        stop = _run(
            "bash", runner.script, "stop", env=runner.env, user=NOBODY, groups=(runner.docker_gid,)
        )
        assert stop.returncode == 0 and not _labelled_containers(), stop.stderr
    finally:
        for container in _labelled_containers():
            _run("docker", "rm", "-f", container)
        _release(base)


# --- nothing of a run survives it, whatever it left ----------------------------------------------


def test_the_run_folders_clean_up_follows_no_link_and_names_nothing():
    """A link among an earlier job's leftovers is removed as itself: chmod -R follows a link named
    on its command line, and would hand the runner user's permissions back to its target."""
    base = _shared_temp()
    try:
        temp, victim = base / "runner-temp", base / "victim"
        (victim / "sub").mkdir(parents=True)
        temp.mkdir()
        (temp / "tilegate-x").symlink_to(victim)
        (temp / "tilegate-old" / "locked::error::x").mkdir(parents=True)
        _give_to_runner(base)
        (victim / "sub").chmod(0o500)
        (temp / "tilegate-old" / "locked::error::x").chmod(0)
        work = temp / "tilegate-101-1-gate-1"
        env = {"RUNNER_TEMP": str(temp)}
        start = _run("bash", SCRIPTS / "mi300x-workdir.sh", "start", work, env=env, user=NOBODY)
        assert start.returncode == 0, start.stderr
        assert [p.name for p in temp.iterdir()] == [work.name]
        assert stat.S_IMODE((victim / "sub").stat().st_mode) == 0o500 and victim.is_dir()
        (work / "out" / "inner").mkdir(parents=True)
        _give_to_runner(work)
        (work / "out" / "inner").chmod(0)
        (work / "out").chmod(0)
        remove = _run("bash", SCRIPTS / "mi300x-workdir.sh", "remove", work, env=env, user=NOBODY)
        assert remove.returncode == 0 and list(temp.iterdir()) == [], remove.stderr
        assert "::" not in start.stdout + start.stderr + remove.stdout + remove.stderr
        # only a run's folder, right under $RUNNER_TEMP, by its name
        for outside in (victim, temp / "tilegate-x" / ".." / ".." / "victim"):
            refused = _run(
                "bash", SCRIPTS / "mi300x-workdir.sh", "remove", outside, env=env, user=NOBODY
            )
            assert refused.returncode == 2 and (victim / "sub").is_dir(), outside
    finally:
        _release(base)


# a pull request's tox.ini: its rocm env runs its own code, as any pull request's can
LEFTOVER_TOX = """[tox]
skipsdist = true
[testenv:rocm]
skip_install = true
allowlist_externals = python3
commands = python3 leftover.py
"""
# non-empty folders without permissions wherever it can write, and a verdict of its own
LEFTOVER = """
import os
for root in ("/out", "/out/artifacts", "/cache", "/scratch", "/tmp"):
    inner = os.path.join(root, "leftover", "inner")
    os.makedirs(inner)
    open(os.path.join(inner, "f"), "w").write("x")
    os.chmod(inner, 0)
    os.chmod(os.path.dirname(inner), 0)
os.makedirs("/out/artifacts/junit", exist_ok=True)
junit = "<testsuite><testcase name='pr-verdict'/></testsuite>"
open("/out/artifacts/junit/rocm-1.xml", "w").write(junit)
"""


class WorkflowJob:
    """One job of gate-mi300x.yml on the runner: its steps' own `run:` text, with its `env:`
    expanded for an event, run as GitHub runs a step (bash -eo pipefail) by the unprivileged
    runner user, from a folder holding main's scripts as trusted/. Only the wheels step (a
    networked pip download) is replaced: its wheels are copied in. The job's first step ends every
    gate container and /out volume on the daemon, as on a runner, which runs one job at a time: one
    test session a docker daemon (the container tests share an xdist group)."""

    def __init__(self, runner: RealRunner, base: Path, event: str, sha: str, run_id: int) -> None:
        self.runner, self.base, self.sha = runner, base, sha
        self.context = {
            "github": {
                "event_name": event,
                "run_id": str(run_id),
                "run_attempt": "1",
                "event": {"pull_request": {"head": {"sha": sha}}} if event != "push" else {},
                "sha": sha,
            },
            "matrix": {"shard": 1},
            "inputs": {},
            "steps": {},
        }
        self.job = WORKFLOW["jobs"]["gate"]
        self.env = {k: self._expand(v) for k, v in self.job["env"].items()}

    def _expand(self, text) -> str:
        return re.sub(
            r"\$\{\{(.*?)\}\}",
            lambda m: str(gh.evaluate(m.group(1), self.context)),
            str(text),
        )

    def step(self, name_starts: str, **extra: str) -> subprocess.CompletedProcess:
        step = _step("gate", name_starts)
        if "if" in step and not gh.truthy(gh.evaluate(step["if"], self.context)):
            return subprocess.CompletedProcess([], 0, "", "skipped")
        env = {
            **self.runner.env,
            **self.env,
            **{k: self._expand(v) for k, v in step.get("env", {}).items()},
            **extra,
        }
        proc = _run(
            "bash",
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            step["run"],
            env=env,
            cwd=self.base,
            user=NOBODY,
            groups=(self.runner.docker_gid,),
            timeout=300,
        )
        if step.get("id"):
            outcome = "success" if proc.returncode == 0 else "failure"
            self.context["steps"][step["id"]] = {"outcome": outcome}
        return proc


def _job_env(base: Path) -> dict[str, str]:
    """What the runner gives every step: its temp folder and home, both the runner user's."""
    for name in ("runner-temp", "home"):
        _runners(base / name)
    return {
        "RUNNER_TEMP": str(base / "runner-temp"),
        "HOME": str(base / "home"),
        "GITHUB_SERVER_URL": base.as_uri(),
        "GITHUB_REPOSITORY": "base.git",
    }


@pytest.mark.container
@pytest.mark.xdist_group("docker")
def test_a_folder_the_clean_up_cannot_remove_never_reaches_mains_next_run():
    """Symptom: a mode-000 folder the pull request left in its /cache copy stopped the clean-up
    (rm -rf under bash -e) before it removed $RUNNER_TEMP/tilegate; main's next run failed at
    export ("tree exists") and uploaded the pull request's records as main's. Fix: the run's
    folder has a fresh name, every entry is given back its permissions and removed, and a job
    starts by removing (or refusing) what earlier jobs left."""
    base = _shared_temp()
    try:
        runner = RealRunner(base, {"tox.ini": LEFTOVER_TOX, "leftover.py": LEFTOVER})
        runner.env.update(_job_env(base))
        # served as GitHub serves it; git refuses a repository its user does not own
        _give_to_runner(runner.repo.server)
        temp = Path(runner.env["RUNNER_TEMP"])
        pr_sha = git(runner.repo.work, "rev-parse", "HEAD")
        pr = WorkflowJob(runner, base, "pull_request_target", pr_sha, run_id=os.getpid() * 10 + 1)
        assert pr.step("This run's folder").returncode == 0
        work = temp / pr.env["TILEGATE_RUN"]
        export = pr.step("Export the commit under test")
        assert export.returncode == 0, export.stderr
        shutil.copytree(runner.folders["wheels"], work / "wheels")
        os.chown(work / "wheels", NOBODY, NOBODY)
        gate = pr.step("Gate in the pinned ROCm container", RECORD="", SHARD="1")
        assert gate.returncode == 0, gate.stderr[-3000:]
        assert pr.step("Stop the container").returncode == 0
        pr.step("Take the records out")
        # the attack ran: its verdict is among the records, its folder among the refusals
        assert (work / "records/artifacts/junit/rocm-1.xml").exists()
        refused = json.loads((work / "records/refused.json").read_text())["first"]
        assert "artifacts/leftover" in {r["path"] for r in refused}
        cleanup = pr.step("Remove this run's folder")
        assert cleanup.returncode == 0, cleanup.stderr
        assert list(temp.iterdir()) == [] and not _labelled_containers()
        out = f"{pr.env['TILEGATE_RUN']}-out"  # the volume and its holder
        assert not _run("docker", "ps", "-aq", "--filter", f"name=^{out}$").stdout.strip()
        assert not _run("docker", "volume", "ls", "-q", "--filter", f"name=^{out}$").stdout.strip()

        # an earlier job that died before its clean-up (as 984af2a's clean-up step stopped) left
        # its folder, with the pull request's verdict and a folder without permissions
        stale = temp / "tilegate" / "out" / "artifacts"
        (stale / "junit").mkdir(parents=True)
        (stale / "junit/rocm-1.xml").write_text("<testsuite/>")
        (stale / "locked" / "inner").mkdir(parents=True)
        _give_to_runner(temp / "tilegate")
        (stale / "locked" / "inner").chmod(0)
        (stale / "locked").chmod(0)
        main = WorkflowJob(runner, base, "push", runner.repo.main, run_id=os.getpid() * 10 + 2)
        start = main.step("This run's folder")
        assert start.returncode == 0, start.stderr
        assert [p.name for p in temp.iterdir()] == [main.env["TILEGATE_RUN"]]
        export = main.step("Export the commit under test")
        assert export.returncode == 0, export.stderr
        main.step("Take the records out")
        records = temp / main.env["TILEGATE_RUN"] / "records"
        assert records.is_dir() and not list(records.rglob("rocm-1.xml"))
        assert main.step("Remove this run's folder").returncode == 0
        assert list(temp.iterdir()) == []

        # what the runner user cannot remove stops the next job before it reads anything
        (temp / "tilegate-root-owned" / "x").mkdir(parents=True)
        (temp / "tilegate-root-owned").chmod(0o755)
        refused_job = WorkflowJob(
            runner, base, "push", runner.repo.main, run_id=os.getpid() * 10 + 3
        )
        start = refused_job.step("This run's folder")
        assert start.returncode == 1 and "could not be removed" in start.stderr, start.stderr
        for name in ("Take the records out", "Upload artifacts", "Shard summary"):
            step = _step("gate", name)
            assert not gh.truthy(gh.evaluate(step["if"], refused_job.context)), name
    finally:
        for container in _labelled_containers():
            _run("docker", "rm", "-f", container)
        _release(base)


FILL = """
import errno, json, os
written = {}
for place in ("/scratch", "/tmp", "/cache", "/out"):
    n, err = 0, None
    try:
        with open(os.path.join(place, "fill"), "wb") as f:
            while n < 400 * 2**20:
                f.write(b"x" * 2**20)
                f.flush()
                n += 2**20
    except OSError as e:
        err = errno.errorcode[e.errno]
    os.unlink(os.path.join(place, "fill"))
    written[place] = [n, err]
os.makedirs("/out/artifacts", exist_ok=True)
json.dump(written, open("/out/artifacts/fill.json", "w"))
for _ in range(8):  # 8 MiB of log for the runner's disk
    print("y" * (2**20 - 1), flush=True)
"""


@pytest.mark.container
@pytest.mark.xdist_group("docker")
def test_a_run_cannot_write_past_its_limits():
    """Symptom: /scratch, /out and /cache were folders on the runner's own disk with no size limit.
    Fix: /scratch, /tmp and a pull request's /cache are tmpfs of a fixed size made for the
    container, /out a tmpfs volume of a fixed size; the daemon keeps no log, and the job's log
    takes the first TILEGATE_LOG_MAX bytes."""
    base = _shared_temp()
    try:
        runner = RealRunner(base, {"fill.py": FILL})
        runner.env.update(
            {
                "TILEGATE_SCRATCH_SIZE": "64m",
                "TILEGATE_TMP_SIZE": "32m",
                "TILEGATE_CACHE_SIZE": "32m",
                "TILEGATE_OUT_SIZE": "48m",
                "TILEGATE_LOG_MAX": str(2**20),
            }
        )
        run = runner.gate("python3", "fill.py")
        assert run.returncode == 0, run.stderr[-3000:]
        records = _runners(base / "host") / "records"  # in the runner user's $RUNNER_TEMP
        collect = runner.collect(records)
        assert collect.returncode == 0, collect.stderr
        written = json.loads((records / "artifacts/fill.json").read_text())
        limits = {"/scratch": 64, "/tmp": 32, "/cache": 32, "/out": 48}
        for place, (n, err) in written.items():
            assert err == "ENOSPC" and n <= limits[place] * 2**20, (place, n, err)
        # the job's log: the first MiB, then what was dropped (the daemon keeps no log of its own)
        assert len(run.stdout) + len(run.stderr) < 2**20 + 4096
        dropped = re.search(rf"output past {2**20} bytes was dropped \((\d+) bytes\)", run.stderr)
        assert dropped and int(dropped.group(1)) >= 7 * 2**20, run.stderr[-300:]
    finally:
        _release(base)
