"""The workflow commands the GitHub Actions runner would obey in a step's output, modelled for
tests that play an attacker who gets text into the log (suite/library/test_runner_logs.py).

The rules are actions/runner's (read at 258d6c85, 2026-08):

- src/Runner.Sdk/ProcessInvoker.cs reads stdout and stderr on two threads, each with a
  StreamReader (UTF-8, a byte-order mark honoured) and ReadLine(), which ends a line at \\n, \\r
  or \\r\\n. Queued lines are handed on stderr's first, then stdout's, so the order across the two
  streams is unknown.
- src/Runner.Worker/Handlers/OutputManager.cs passes every line to ActionCommandManager, one
  instance for the whole job, which keeps the ::stop-commands:: state across both streams (and
  across steps).
- src/Runner.Common/ActionCommand.cs: TryParseV2 takes ``::name props::data`` after TrimStart();
  TryParse, still tried after it, takes ``##[name props]data`` anywhere in the line. The name must
  be a registered command (any case). StartsWith/IndexOf there compare by the current culture,
  through ICU on Linux, which skips ignorable characters such as U+0000 or U+200B (learn.microsoft
  .com/dotnet/standard/base-types/string-comparison-net-5-plus); the model drops those before
  looking, so it finds a command wherever the runner might.
- src/Runner.Worker/ActionCommandManager.cs: while stopped, only the token's own command
  (``::TOKEN::``) is obeyed, and it resumes.

Conservative where the runner depends on timing: each stream is parsed alone, so a window opened
on one stream never hides a line of the other; and a window whose token the other stream could
close (it holds ``::TOKEN::``) is taken as closed at once.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# ActionCommandManager.cs: stop-commands and every IActionCommandExtension's Command
# (internal-set-repo-path only for the runner's own plugins; kept, to be safe)
REGISTERED = frozenset(
    {
        "stop-commands",
        "set-env",
        "set-output",
        "save-state",
        "add-mask",
        "add-path",
        "add-matcher",
        "remove-matcher",
        "debug",
        "warning",
        "error",
        "notice",
        "group",
        "endgroup",
        "echo",
        "internal-set-repo-path",
    }
)
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


@dataclass(frozen=True)
class Command:
    """One command the runner would obey: ``name`` as written (a resume's name is its token)."""

    name: str
    data: str
    line: str
    stream: str
    resume: bool = False


def lines(data: bytes) -> list[str]:
    """The lines StreamReader.ReadLine() gives for a stream's bytes."""
    encoding = "utf-8"
    for bom, name in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], name
            break
    parts = re.split(r"\r\n|\r|\n", data.decode(encoding, errors="replace"))
    if parts[-1] == "":
        parts.pop()  # a final line ending starts no further line
    return parts


def _ignorable(ch: str) -> bool:
    # controls and format characters (U+0000, U+00AD, U+200B-U+200F, U+2060, U+FEFF ...): what an
    # ICU comparison may skip; whitespace is kept, since the runner trims only the leading run
    return unicodedata.category(ch) in ("Cc", "Cf") and not ch.isspace()


def _parse(line: str, registered: set[str]) -> tuple[str, str] | None:
    """(name, data) of the command ``line`` holds for the runner, if any."""
    text = "".join(ch for ch in line if not _ignorable(ch)).lstrip()
    if text.startswith("::"):  # TryParseV2
        end = text.find("::", 2)
        if end >= 0:
            name = text[2:end].split(" ", 1)[0]
            if name.lower() in registered:
                return name, text[end + 2 :]
    start = text.find("##[")  # TryParse, the older form
    if start >= 0:
        end = text.find("]", start)
        if end >= 0:
            name = text[start + 3 : end].split(" ", 1)[0]
            if name.lower() in registered:
                return name, text[end + 1 :]
    return None


def _stream_commands(
    stream: str, found_lines: list[str], closable: frozenset[str] = frozenset()
) -> list[Command]:
    out: list[Command] = []
    token = None  # the open window's
    for line in found_lines:
        registered = set(REGISTERED) | ({token.lower()} if token else set())
        parsed = _parse(line, registered)
        if parsed is None:
            continue
        name, data = parsed
        if token is not None:
            if name.lower() == token.lower():
                out.append(Command(name, data, line, stream, resume=True))
                token = None
            continue
        out.append(Command(name, data, line, stream))
        if name.lower() == "stop-commands" and data and data not in closable:
            token = data
    return out


def step_commands(stdout: bytes = b"", stderr: bytes = b"") -> list[Command]:
    """Every command the runner could obey in a step that wrote these bytes, whatever the order
    of its two streams: stdout's, then stderr's."""
    streams = {"stdout": lines(stdout), "stderr": lines(stderr)}
    out = []
    for stream, found in streams.items():
        others = [ln for name, more in streams.items() if name != stream for ln in more]
        closable = frozenset(
            c.data
            for c in _stream_commands(stream, found)
            if c.name.lower() == "stop-commands"
            and any(_parse(ln, {c.data.lower()}) for ln in others)
        )
        out += _stream_commands(stream, found, closable)
    return out


def forged(commands: list[Command], window: str | None = None) -> list[Command]:
    """The commands other than the window ``::stop-commands::WINDOW`` and its resume."""
    return [
        c
        for c in commands
        if window is None
        or not (
            (c.name.lower() == "stop-commands" and c.data == window)
            or (c.resume and c.name.lower() == window.lower())
        )
    ]
