"""Reading the text of a PDF's pages with pypdf, through a READ-checked pinned descriptor.

The parse runs in a child process (the script _extract.py), under a bound on its address
space (RLIMIT_AS, set by the child before it parses) and a wall-clock deadline (the parent kills
it). Why a process and not caps in this one: pypdf is a large pure-Python parser, and a hostile
file makes it raise from deep inside (AttributeError, TypeError, OverflowError, ...), loop in
its repair code, or inflate a small stream into gigabytes. Page and size caps cannot bound what
one pypdf call does, a deadline checked between pages cannot stop a call in progress, and a
signal-based timeout works only on the main thread (tools run in worker threads). A process
can be killed at any instant and its memory is its own; the cost is a Python start-up (tenths
of a second) per read, small next to the model call that asked for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast, final

from roboz.runtime.events import EventPipe
from roboz.shed.guard import CommandGuard, read_pinned, require_regular
from roboz.shed.models import Operation
from roboz.shed.sandbox import PermissionPolicy

DEFAULT_OUTPUT_LIMIT = 40_000
MAX_PDF_BYTES = 200 * 1024 * 1024
_EXTRACT = Path(__file__).with_name("_extract.py")


# final: so that `"error" in result` tells the two apart for mypy too.
@final
class _Pages(TypedDict):
    """What _extract.py prints for a file it read."""

    text: str
    pages: int
    first: int
    last: int
    truncated: bool


@final
class _Failure(TypedDict):
    """What _extract.py prints for a file it cannot read: the reason."""

    error: str


class PdfError(Exception):
    """The file cannot be read as a PDF (not a PDF, encrypted, damaged, bad page range, or its
    parse exceeded the time or memory bound)."""


@dataclass(frozen=True)
class PdfLimits:
    """Bounds on one parse. ``memory_bytes`` is the parsing process's address space beyond
    four times the file's size (the file itself, and the copies pypdf makes)."""

    seconds: float = 60.0
    memory_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"PdfLimits.seconds must be positive, got {self.seconds!r}")
        if self.memory_bytes <= 0:
            raise ValueError(f"PdfLimits.memory_bytes must be positive, got {self.memory_bytes}")


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: int
    first: int
    last: int
    """The last page actually included (may be before the requested end when truncated)."""
    truncated: bool


def read_pdf(
    policy: PermissionPolicy,
    path: str | os.PathLike[str],
    start_page: int = 1,
    end_page: int | None = None,
    *,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    limits: PdfLimits = PdfLimits(),
    pipe: EventPipe | None = None,
    tool: str = "process_pdf",
) -> PdfText:
    """The text of pages ``start_page``..``end_page`` (1-based, inclusive), each headed by its
    page number, within ``output_limit`` characters. Whatever the file holds, the outcome is
    a PdfText or a PdfError that names the file."""
    path = os.fspath(path)
    guard = CommandGuard(policy, tool=tool, pipe=pipe)
    with guard.pin(Operation.READ, path) as pinned:
        require_regular(pinned, path)
        guard.confirm()
        assert pinned.st is not None
        if pinned.st.st_size > MAX_PDF_BYTES:
            raise PdfError(f"{path}: larger than {MAX_PDF_BYTES} bytes; refused")
        data = read_pinned(pinned, MAX_PDF_BYTES)
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise PdfError(f"{path}: not a PDF file")
    result = _parse(path, data, start_page, end_page, output_limit, limits)
    if "error" in result:
        raise PdfError(f"{path}: {result['error']}")
    return PdfText(
        result["text"], result["pages"], result["first"], result["last"], result["truncated"]
    )


def _parse(
    path: str,
    data: bytes,
    start_page: int,
    end_page: int | None,
    output_limit: int,
    limits: PdfLimits,
) -> _Pages | _Failure:
    # The interpreter's start-up and pypdf's import are inside the bound too (tens of MB).
    memory = limits.memory_bytes + 4 * len(data)
    # -P: this package's directory is not put on the child's sys.path. The environment is ours,
    # so the child finds pypdf where this process did (user site, PYTHONPATH).
    argv = [
        sys.executable,
        "-P",
        str(_EXTRACT),
        str(start_page),
        "-" if end_page is None else str(end_page),
        str(output_limit),
        str(memory),
    ]
    try:
        # On the deadline, run() kills the child (SIGKILL) and reaps it before raising.
        done = subprocess.run(argv, input=data, capture_output=True, timeout=limits.seconds)
    except subprocess.TimeoutExpired:
        raise PdfError(
            f"{path}: parsing took longer than {limits.seconds:g}s and was stopped; "
            "the PDF is damaged or built to exhaust readers"
        ) from None
    except OSError as error:
        raise PdfError(f"{path}: cannot start the PDF parser: {error}") from None
    try:
        result = cast(_Pages | _Failure, json.loads(done.stdout))
    except ValueError:
        # No JSON: the child died (a C-level abort, a signal) or could not start pypdf.
        raise PdfError(f"{path}: the PDF parser failed ({_death(done)})") from None
    return result


def _death(done: subprocess.CompletedProcess[bytes]) -> str:
    """How a parse that printed nothing ended: its last stderr line, or the signal."""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    if done.returncode < 0:
        try:
            return f"killed by {signal.Signals(-done.returncode).name}"
        except ValueError:  # a real-time signal has no name
            return f"killed by signal {-done.returncode}"
    return f"exit status {done.returncode}"
