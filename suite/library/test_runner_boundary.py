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

from tilegate.paths import REPO_ROOT
from tilegate.testing.container import TEST_IMAGE

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


def _git(repo: Path, *args, stdin: str | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    out = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return out.stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, body in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(body)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


class ForkShapedRepository:
    """The base repository as GitHub keeps a fork's pull request: main, and refs/pull/7/head,
    moved by every push to the fork (and kept when the fork is deleted). Served over file:// as
    GitHub serves a commit by its SHA."""

    def __init__(self, root: Path) -> None:
        self.work, self.server = root / "fork-work", root / "base.git"
        self.work.mkdir()
        _git(self.work, "init", "-q", "-b", "main")
        self.main = _commit(self.work, {"README.md": "the base repository\n"}, "main")
        _git(root, "init", "-q", "--bare", str(self.server))
        _git(self.work, "push", "-q", str(self.server), "main:refs/heads/main")

    @property
    def url(self) -> str:
        return self.server.as_uri()

    def fork_push(self, files: dict[str, str], message: str) -> str:
        sha = _commit(self.work, files, message)
        _git(self.work, "push", "-q", "-f", str(self.server), f"{sha}:refs/pull/7/head")
        return sha

    def push_tree(self, tree_entries: str, message: str) -> str:
        """A commit of a hand-made tree (git itself never makes a `.git` entry; an attacker's
        client can)."""
        tree = _git(self.work, "mktree", stdin=tree_entries)
        sha = _git(self.work, "commit-tree", tree, "-p", "HEAD", "-m", message)
        _git(self.work, "push", "-q", "-f", str(self.server), f"{sha}:refs/pull/8/head")
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
    config = _git(
        repo.work, "hash-object", "-w", "--stdin", stdin=f"[core]\n\tfsmonitor = touch {marker}\n"
    )
    hook = _git(repo.work, "hash-object", "-w", "--stdin", stdin=f"#!/bin/sh\ntouch {marker}\n")
    hooks = _git(repo.work, "mktree", stdin=f"100755 blob {hook}\tpost-checkout\n")
    dot_git = _git(
        repo.work, "mktree", stdin=f"100644 blob {config}\tconfig\n040000 tree {hooks}\thooks\n"
    )
    readme = _git(repo.work, "rev-parse", "HEAD:README.md")
    nested = _git(repo.work, "mktree", stdin=f"040000 tree {dot_git}\t.git\n")  # suite/.git
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
    refused = {r["path"]: r["why"] for r in json.loads((dest / "refused.json").read_text())}
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
        "artifacts/bad\nname.json",
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
    assert len(annotations) == len(refused) and any("bad%0Aname.json" in ln for ln in annotations)


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
    """main's scripts as the runner checks them out, with IMAGE pinned."""
    for name in ("mi300x-container.sh", "mi300x-inside.sh", "mi300x-wheels.txt"):
        (root / "scripts").mkdir(parents=True, exist_ok=True)
        shutil.copy(SCRIPTS / name, root / "scripts" / name)
    (root / ".github").mkdir()
    (root / ".github" / "mi300x-image").write_text(f"# pinned\n{image}\n")
    return root / "scripts" / "mi300x-container.sh"


def _shared_temp() -> Path:
    """A folder the unprivileged runner user can enter (pytest's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="tilegate-boundary-"))
    base.chmod(0o755)
    return base


def _runner_folders(base: Path) -> dict[str, Path]:
    base.mkdir(mode=0o755)
    folders = {name: base / name for name in ("tree", "out", "cache", "scratch", "wheels")}
    for path in folders.values():
        path.mkdir()
        os.chown(path, NOBODY, NOBODY)
    return folders


def _fake_gpu(base: Path, gid: int) -> Path:
    node = base / "fake-kfd"
    # /dev/null's numbers, owned like /dev/kfd
    os.mknod(node, 0o660 | stat.S_IFCHR, os.makedev(1, 3))
    os.chown(node, 0, gid)
    return node


def test_the_container_command_line_is_the_boundary(tmp_path):
    base = _shared_temp()
    try:
        pin = "rocm/sglang@sha256:" + "0" * 64
        script = _trusted_copy(base / "trusted", pin)
        folders = _runner_folders(base / "run")
        bin_dir = base / "bin"
        bin_dir.mkdir()
        # records the call only
        (bin_dir / "docker").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$DOCKER_ARGS"\n')
        (bin_dir / "docker").chmod(0o755)
        args = folders["out"].parent / "docker-args"
        args.touch()
        os.chown(args, NOBODY, NOBODY)
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "DOCKER_ARGS": str(args),
            "TILEGATE_GPU_DEVICES": str(_fake_gpu(base, 44)),
        }
        f = folders
        out = _run(
            "bash",
            script,
            "gate",
            f["tree"],
            f["out"],
            f["cache"],
            f["scratch"],
            f["wheels"],
            "--",
            "tox",
            "-e",
            "rocm",
            env=env,
            user=NOBODY,
        )
        assert out.returncode == 0, out.stderr
        call = args.read_text().splitlines()
        assert call[:2] == ["run", "--rm"] and call[-6:] == [
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
        # the container's output cannot be a workflow command: they are off behind a fresh token
        first, last = out.stdout.splitlines()[0], out.stdout.splitlines()[-1]
        token = first.removeprefix("::stop-commands::")
        assert first.startswith("::stop-commands::") and len(token) == 32 and last == f"::{token}::"
        assert {
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
            f"{f['out']}:/out",
            f"{f['cache']}:/cache",
            f"{f['scratch']}:/scratch",
            f"{f['wheels']}:/wheels:ro",
            f"{base}/trusted/scripts/mi300x-inside.sh:/opt/tilegate/inside.sh:ro",
            f"{base}/trusted/scripts/mi300x-wheels.txt:/opt/tilegate/wheels.txt:ro",
        ]
        # the networked step mounts no code under test
        wheels = _run("bash", script, "wheels", f["wheels"], env=env, user=NOBODY)
        assert wheels.returncode == 0, wheels.stderr
        call = args.read_text().splitlines()
        assert [call[i + 1] for i, a in enumerate(call) if a == "-v"] == [
            f"{base}/trusted/scripts/mi300x-wheels.txt:/opt/tilegate/wheels.txt:ro",
            f"{f['wheels']}:/wheels",
        ]
        assert "--require-hashes" in call and "--only-binary=:all:" in call
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_container_refuses_a_root_runner_an_unpinned_image_and_a_tree_with_git(tmp_path):
    pinned = _trusted_copy(tmp_path / "a", "rocm/sglang@sha256:" + "0" * 64)
    (tmp_path / "tree" / ".git").mkdir(parents=True)
    as_root = _run(
        "bash",
        pinned,
        "gate",
        tmp_path / "tree",
        *(tmp_path / n for n in ("o", "c", "s", "w")),
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
            f["out"],
            f["cache"],
            f["scratch"],
            f["wheels"],
            "--",
            "true",
            user=NOBODY,
        )
        assert with_git.returncode == 1 and "no exported tree" in with_git.stderr, with_git.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


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
            f["out"],
            f["cache"],
            f["scratch"],
            f["wheels"],
            "--",
        ]
        return [str(a) for a in (*argv, *command)]

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
        gpu, f, repo = runner.gpu, runner.folders, runner.repo
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
        records = base / "host"  # the runner user's own folder ($RUNNER_TEMP)
        records.mkdir()
        os.chown(records, NOBODY, NOBODY)
        records = records / "records"
        collect = _run(
            sys.executable, SCRIPTS / "collect_records.py", f["out"], records, user=NOBODY
        )
        assert collect.returncode == 1, collect.stderr
        refused = {r["path"] for r in json.loads((records / "refused.json").read_text())}
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
        _git(base, "clone", "-q", str(repo.server), str(trusted))
        _git(trusted, "status")
        assert not marker.exists()
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(base)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


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
        subprocess.run(["chmod", "-R", "u+rwX", str(base)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
