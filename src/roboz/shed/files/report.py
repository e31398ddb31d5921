"""What run_file_command tells the LLM: per command what ran or why not, status and output."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field

from roboz.models import Str

DISPLAY_LIMIT = 20_000
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` as the LLM is shown it: a file name's bytes that are not UTF-8 (which
    ``os.fsdecode`` turns into surrogates U+DC80..U+DCFF) as ``\\xHH``, the way output
    bytes are shown, and any other lone surrogate as ``\\uXXXX``. The result always
    encodes as UTF-8, so a report can be stored and sent."""
    return text if text.isascii() else _SURROGATE.sub(_escape, text)


@dataclass
class CommandReport:
    text: str
    """The command as written."""
    state: str
    """"ran", "denied", "failed" (could not start: syntax, missing file, missing program; or
    broke off with an internal error) or "skipped" (an operator did not reach it)."""
    status: int | None = None
    stdout: str = ""
    stderr: str = ""
    reason: str = ""


class FileCommandResult(Str):
    """The sequence's report as text (``value``); the structured form is kept for Python."""

    exit_status: int = Field(default=0, exclude=True)
    commands: list[CommandReport] = Field(default_factory=list[CommandReport], exclude=True)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown; narrow it]"


def render(commands: list[CommandReport], exit_status: int, limit: int = DISPLAY_LIMIT) -> str:
    counts = {
        state: sum(1 for c in commands if c.state == state)
        for state in ("ran", "denied", "failed", "skipped")
    }
    summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [f"sequence: {len(commands)} command(s): {summary}; exit status {exit_status}"]
    per_command = max(limit // max(len(commands), 1), 2_000)
    for index, command in enumerate(commands, 1):
        head = f"[{index}] $ {command.text}"
        if command.state == "ran":
            lines.append(f"{head}\n    ran, exit status {command.status}")
        elif command.state == "skipped":
            lines.append(f"{head}\n    skipped: {command.reason}")
            continue
        else:
            lines.append(f"{head}\n    {command.state.upper()}: {command.reason}")
        if command.state == "ran" and command.reason:
            lines.append(f"    note: {command.reason}")
        if command.stdout:
            lines.append("--- stdout\n" + _cap(command.stdout, per_command).rstrip("\n"))
        if command.stderr:
            lines.append("--- stderr\n" + _cap(command.stderr, per_command // 4).rstrip("\n"))
    return shown("\n".join(lines))
