"""The helper's log: one record is one line of `key=value` fields, whatever a client sends.

Clients control much of what the log reports (script names, argv, protocol garbage), and the
log is read by people tailing the journal. So a value that is not a plain token is quoted and
every character that is not printable is escaped: a client can never start a new line, move
the cursor or send a terminal escape (CR, LF, ESC, BEL, C1 controls, bidi overrides, lone
surrogates, U+2028). The formatter applies the same escaping to the whole record, tracebacks
included, so a message that forgot to quote still cannot break out of its line.

Under systemd (stderr connected to the journal, JOURNAL_STREAM) each line starts with the
syslog priority prefix journald understands (`<6>` for info) instead of a timestamp.
"""

from __future__ import annotations

import logging
import os
import re
import sys

# A value made only of these is written bare; anything else is quoted.
_BARE = re.compile(r"[A-Za-z0-9_.,:/@%+-]+")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Long client strings (an argv of 10,000 arguments) are cut, so one run is one readable line.
MAX_VALUE_CHARS = 300

_PRIORITY = {
    logging.DEBUG: 7,
    logging.INFO: 6,
    logging.WARNING: 4,
    logging.ERROR: 3,
    logging.CRITICAL: 2,
}


def _escape_char(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_unprintable(text: str) -> str:
    """Escape every character but the space that str.isprintable() rejects."""
    if text.isprintable():
        return text  # the common case, checked at C speed
    return "".join(c if c == " " or c.isprintable() else _escape_char(c) for c in text)


def quote(value: object) -> str:
    """One field value: bare if it is a plain token, else double-quoted with escapes."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + "..."
    if _BARE.fullmatch(text):
        return text
    inner = escape_unprintable(text.replace("\\", "\\\\").replace('"', '\\"'))
    return f'"{inner}"'


def fields(**values: object) -> str:
    """`key=value` pairs in the given order; None values are left out."""
    return " ".join(f"{key}={quote(value)}" for key, value in values.items() if value is not None)


class OneLineFormatter(logging.Formatter):
    """Formats a record as one line with nothing unprintable in it, traceback included."""

    def __init__(self, journal: bool) -> None:
        fmt = (
            "%(name)s: %(message)s"
            if journal
            else "%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        super().__init__(fmt)
        self.journal = journal

    def format(self, record: logging.LogRecord) -> str:
        line = escape_unprintable(super().format(record))
        if self.journal:
            return f"<{_PRIORITY.get(record.levelno, 6)}>{line}"
        return line


def _stderr_is_the_journal() -> bool:
    """systemd sets JOURNAL_STREAM=dev:inode when stderr is connected to the journal."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        info = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return expected == f"{info.st_dev}:{info.st_ino}"


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter(journal=_stderr_is_the_journal()))
    logging.basicConfig(level=level, handlers=[handler], force=True)
