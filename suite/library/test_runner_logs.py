"""The MI300X runner's host steps print text of an attacker's choosing into the job's log; each
test here plays one way in and fails if a line of it becomes a workflow command (a forged
``::error`` annotation, ``::add-mask::``, a ``::stop-commands::`` that hides the gate's own), read
as the runner reads it (tilegate/testing/workflow_log.py):

- git fsck quotes a pull request's `.gitmodules` URL, newlines and all, when the export's fetch
  refuses it (scripts/mi300x-export.sh);
- the GPU-idle check prints other processes' command lines (scripts/gpu_idle.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilegate.gate.paths import REPO_ROOT
from tilegate.testing.git_plumbing import git
from tilegate.testing.workflow_log import Command, forged, lines, step_commands

# module constants, so a check of the old scripts can point them elsewhere
EXPORT = REPO_ROOT / "scripts" / "mi300x-export.sh"
GPU_IDLE = REPO_ROOT / "scripts" / "gpu_idle.py"

# what the attacker wants the runner to obey, one line each; in the .gitmodules URL they are
# joined by git config's "\n" escape, which fsck's message prints as a newline
FORGED_LINES = (
    "::error title=MI300X gate::all 1234 tests passed",
    "::add-mask::runner-credential",
    "   ::warning::indented, trimmed by the runner",
    "\u200b::notice::behind a zero-width space",
    "text, then ##[error]the older form, obeyed anywhere in a line",
    "::stop-commands::attacker",
)
GITMODULES = (
    '[submodule "x"]\n\tpath = x\n\turl = "-x\\n' + "\\n".join(FORGED_LINES) + '"\n'
).encode()
# printable ASCII and the line ending: no control byte (a \r, a terminal escape) reaches the log
CLEAN = re.compile(rb"[\x20-\x7e\n]*")


def _served_commit(root: Path, files: dict[str, bytes]) -> tuple[str, str]:
    """(file:// URL, SHA) of a commit of ``files`` made with git's plumbing (so no client-side
    check stands in the way, as none does for an attacker's own client), served by a bare
    repository as GitHub serves a pull request's head."""
    work, server = root / "attacker", root / "base.git"
    git(root, "init", "-q", str(work))
    git(root, "init", "-q", "--bare", str(server))
    entries = "".join(
        f"100644 blob {git(work, 'hash-object', '-w', '--stdin', stdin=body)}\t{name}\n"
        for name, body in sorted(files.items())
    )
    tree = git(work, "mktree", stdin=entries.encode())
    sha = git(work, "commit-tree", tree, "-m", "a pull request")
    git(work, "push", "-q", str(server), f"{sha}:refs/pull/7/head")
    return server.as_uri(), sha


def _export(url: str, sha: str, tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(EXPORT), url, sha, str(tree)], capture_output=True, timeout=120
    )


def _one_window(out: subprocess.CompletedProcess) -> list[Command]:
    """Asserts the export's whole output is one stream, stderr, that opens a ::stop-commands::
    window on its first line and closes it on its last, and that nothing between them would be
    a command even with no window; returns the commands."""
    assert out.stdout == b"", "the export writes stdout too: the two streams' order is unknown"
    found = lines(out.stderr)
    commands = step_commands(out.stdout, out.stderr)
    window = commands[0].data if commands and commands[0].name == "stop-commands" else None
    assert window, f"no window first; the runner obeys: {[c.line for c in commands]}"
    assert found[0] == f"::stop-commands::{window}", found[:3]
    assert forged(commands, window) == [], [c.line for c in forged(commands, window)]
    assert commands[-1].resume and found[-1] == f"::{window}::", found[-3:]
    # git's lines are escaped as well: a window is no excuse for a command-shaped line
    inside = "\n".join(found[1:-1]).encode()
    assert step_commands(stderr=inside) == [], [c.line for c in step_commands(stderr=inside)]
    assert CLEAN.fullmatch(out.stderr), "a control byte or non-ASCII byte in the export's output"
    return commands


def test_a_gitmodules_url_prints_no_workflow_command_through_the_export(tmp_path):
    """Symptom: the fetch's fsck refused a .gitmodules URL that starts with '-' and printed it,
    newlines and all: `::error title=MI300X gate::all 1234 tests passed` on its own line
    became an annotation on the pull request, `::stop-commands::attacker` hid the gate's own.
    Fix: the export's output is one stream inside a ::stop-commands:: window, git's lines
    escaped."""
    url, sha = _served_commit(tmp_path, {".gitmodules": GITMODULES, "kernel.py": b"x = 1\n"})
    out = _export(url, sha, tmp_path / "tree")
    assert out.returncode == 1 and b"could not fetch" in out.stderr, out.stderr
    assert not (tmp_path / "tree").exists()
    _one_window(out)
    # not vacuous: git's refusal, with the attacker's text, did reach the log
    log = out.stderr.decode()
    assert "disallowed submodule url: -x" in log
    for text in ("::error title=MI300X gate::all 1234 tests passed", "::stop-commands::attacker"):
        assert f"git: {text}" in log, log


def test_the_exports_own_messages_print_no_workflow_command(tmp_path):
    out = _export((tmp_path / "nowhere.git").as_uri(), "1\n::error::forged", tmp_path / "tree")
    assert out.returncode == 2 and b"is not a full commit SHA" in out.stderr, out.stderr
    _one_window(out)


def test_a_clean_export_opens_and_closes_its_window(tmp_path):
    url, sha = _served_commit(tmp_path, {"kernel.py": b"x = 1\n"})
    out = _export(url, sha, tmp_path / "tree")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "tree" / "kernel.py").read_bytes() == b"x = 1\n"
    assert len(_one_window(out)) == 2
    assert f"mi300x-export: {sha} -> ".encode() in out.stderr


# command lines a process holding the GPU could have; gpu_idle.py prints each
HOSTILE_ARGS = (
    "\n::error::forged on a line of its own",
    "\r::add-mask::after a carriage return",
    "\r\n::warning::after CR LF",
    "\x1b]0;terminal title\x07\x1b[2J",
    "text ##[error]the older form",
    "\u2028::notice::after a line separator",
    "\x85::debug::after NEL",
    "a\\x41 backslash",
)


def test_gpu_idle_prints_other_processes_command_lines_escaped(tmp_path):
    """Symptom: gpu_idle.py printed a GPU holder's command line raw; one holding "\\n::error::"
    forged an annotation, one holding escape bytes drove the log's terminal. Fix: every byte
    outside printable ASCII, and the backslash, printed as an escape."""
    kfd = tmp_path / "proc"
    kfd.mkdir()
    holders = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", arg])
        for arg in HOSTILE_ARGS
    ]
    try:
        for holder in holders:
            (kfd / str(holder.pid)).mkdir()
        out = subprocess.run(
            [sys.executable, str(GPU_IDLE), "--when", "after", "--kfd-proc", str(kfd)],
            capture_output=True,
            timeout=60,
        )
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    assert out.returncode == 1, out.stderr
    commands = step_commands(out.stdout, out.stderr)
    assert commands == [], [c.line for c in commands]
    assert CLEAN.fullmatch(out.stdout + out.stderr), out.stderr
    log = out.stderr.decode()
    for holder in holders:
        assert f"pid {holder.pid}: {sys.executable} -c import time; time.sleep(60) " in log
    assert "\\x0a::error::forged" in log and "\\x0d\\x0a::warning" in log
    assert "a\\\\x41 backslash" in log  # a backslash of the command line's, not an escape


# --- the model of the runner's reading ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("::error::x\n", ["error"]),
        ("  \t::warning file=a.py,line=3::x\n", ["warning"]),  # TrimStart
        ("::ERROR::x\n", ["ERROR"]),  # names in any case
        ("x ::error::y\n", []),  # the newer form only at the line's start
        ("x ##[error]y\n", ["error"]),  # the older one anywhere
        ("::not-a-command::y\n::error\n", []),  # unregistered, unterminated
        ("ok\r::error::a\r\n::add-mask::b", ["error", "add-mask"]),  # \r, \r\n and \n end lines
        ("\u200b::error::x\n", ["error"]),  # skipped by ICU's comparison
        ("a\u2028::error::x\n", []),  # U+2028 ends no line for ReadLine
    ],
)
def test_the_model_finds_the_runners_commands(text, names):
    assert [c.name for c in step_commands(stdout=text.encode())] == names


def test_a_window_hides_only_its_own_streams_lines():
    window = b"::stop-commands::t0ken\n::error::hidden\n::t0ken::\n::error::shown\n"
    assert [(c.name, c.resume) for c in step_commands(stdout=window)] == [
        ("stop-commands", False),
        ("t0ken", True),
        ("error", False),
    ]
    # the runner may hand the other stream's lines first: the window hides none of them
    both = step_commands(stdout=b"::stop-commands::t0ken\n", stderr=b"::error::x\n")
    assert [(c.stream, c.name) for c in both] == [("stdout", "stop-commands"), ("stderr", "error")]
    # a resume on the other stream may come right after the window opens
    closed = step_commands(stdout=b"::stop-commands::t0ken\n::error::x\n", stderr=b"::t0ken::\n")
    assert [c.name for c in forged(closed, "t0ken")] == ["error"]
