"""What every command implementation receives and returns.

A command is prepared first (every permission check, every path pinned) and run afterwards
with the pinned descriptors, so nothing runs unless all of its checks passed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from roboz.shed.files.globs import expand, has_glob, reject_unsupported
from roboz.shed.files.parser import Call, CommandSyntaxError, Parsed
from roboz.shed.files.process import Outcome
from roboz.shed.files.report import shown
from roboz.shed.files.tokens import Tag
from roboz.shed.guard import AccessError, CommandGuard, Pinned, require_regular
from roboz.shed.models import Operation

MAX_OPERANDS = 400
"""Paths per command: each stays pinned (an open descriptor) from its check to its use."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 30.0
    """Seconds a command may run."""
    output_limit: int = 1_000_000
    """Bytes of stdout (or stderr) a command may produce before it is stopped."""


@dataclass
class Invocation:
    guard: CommandGuard
    call: Call
    parsed: Parsed
    limits: Limits
    piped: bool = False
    """Whether stdin comes from a previous command of the pipeline."""

    @property
    def name(self) -> str:
        return self.call.name

    def paths(self, operands: list[tuple[str, Tag]] | None = None, *, glob: bool) -> list[str]:
        """Path operands (tag PTH), globs expanded when ``glob`` (sources), else literal."""
        result: list[str] = []
        for value, tag in self.parsed.operands if operands is None else operands:
            if tag is not Tag.PTH:
                raise CommandSyntaxError(f"{self.name}: {value!r} is a path here; tag it PTH")
            if not value:
                raise CommandSyntaxError(f"{self.name}: empty path")
            try:
                os.fsencode(value)
            except UnicodeEncodeError as error:
                raise CommandSyntaxError(
                    f"{self.name}: path {shown(value)} is not a file name ({error.reason} at "
                    f"character {error.start})"
                ) from None
            if has_glob(value):
                if not glob:
                    raise CommandSyntaxError(
                        f"{self.name}: {value!r}: destinations must be literal paths (no *)"
                    )
                result.extend(expand(self.guard, value))
            else:
                reject_unsupported(value)
                result.append(value)
        if len(result) > MAX_OPERANDS:
            raise AccessError(
                f"{self.name}: {len(result)} paths; at most {MAX_OPERANDS} per command (each is "
                "held open from its check to its use). Narrow the pattern, or search whole "
                "directories with grep -r, rg or find"
            )
        return result

    def pin_destinations(
        self, displays: list[str], require: Callable[[Pinned, str], None]
    ) -> list[Pinned]:
        """CREATE-pin every destination; an existing one must pass ``require``. All or
        nothing: when one fails, those already pinned are closed."""
        pinned: list[Pinned] = []
        try:
            for display in displays:
                item = self.guard.pin(Operation.CREATE, display)
                pinned.append(item)
                if item.exists:
                    require(item, display)
        except Exception:
            close_all(pinned)
            raise
        return pinned

    def pin_file(self, operation: Operation, display: str) -> Pinned:
        pinned = self.guard.pin(operation, display)
        try:
            require_regular(pinned, display)
        except Exception:
            pinned.close()
            raise
        return pinned


@dataclass
class Prepared:
    """A checked command, ready to run; ``pinned`` are closed after it ran (or was dropped)."""

    run: Callable[[bytes], Outcome]
    pinned: list[Pinned] = field(default_factory=list[Pinned])

    def close(self) -> None:
        close_all(self.pinned)


def close_all(pinned: Iterable[Pinned]) -> None:
    """Release pinned descriptors, e.g. when preparing a command fails half-way."""
    for item in pinned:
        item.close()


Preparer = Callable[[Invocation], Prepared]


def ok(stdout: bytes = b"", stderr: bytes = b"", status: int = 0) -> Outcome:
    return Outcome(status, stdout, stderr)


def failures(errors: list[str]) -> Outcome:
    """Status 1 with one stderr line per error, or success when there were none."""
    # Errors name files, and a name that is not UTF-8 is surrogate-escaped: back to its bytes.
    return Outcome(1 if errors else 0, b"", os.fsencode("".join(f"{error}\n" for error in errors)))
