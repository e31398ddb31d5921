"""pwd, cat, head, tail, wc and tee, implemented in Python on pinned descriptors."""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterable, Iterator

from roboz.shed.files.base import Invocation, Prepared, close_all, ok
from roboz.shed.files.parser import CommandSyntaxError
from roboz.shed.files.process import Outcome
from roboz.shed.files.tokens import Tag, Token
from roboz.shed.guard import (
    AccessError,
    Pinned,
    check_deadline,
    default_file_mode,
    reopen,
    require_regular,
)
from roboz.shed.models import Operation

CHUNK = 1 << 20


def _sources(inv: Invocation) -> tuple[list[str], list[Pinned]]:
    displays = inv.paths(glob=True)
    pinned: list[Pinned] = []
    try:
        for display in displays:
            pinned.append(inv.pin_file(Operation.READ, display))
    except Exception:
        close_all(pinned)
        raise
    return displays, pinned


def _read(pinned: Pinned, limit: int) -> bytes:
    fd = reopen(pinned, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            check_deadline()
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _capped(data: bytes, limit: int) -> Outcome:
    if len(data) > limit:
        return Outcome(
            1,
            data[:limit],
            b"",
            f"output exceeded {limit} bytes and was cut; read a smaller part (head, tail, grep)",
        )
    return ok(data)


def prepare_pwd(inv: Invocation) -> Prepared:
    if inv.parsed.operands:
        raise CommandSyntaxError("pwd takes no operands")
    base = inv.guard.policy.base_path
    return Prepared(lambda stdin: ok(os.fsencode(base) + b"\n"))


def prepare_cat(inv: Invocation) -> Prepared:
    _displays, pinned = _sources(inv)
    limit = inv.limits.output_limit
    number = inv.parsed.has("-n")

    def run(stdin: bytes) -> Outcome:
        data = b"".join(_read(item, limit) for item in pinned) if pinned else stdin
        if number:
            lines = data.splitlines(keepends=True)
            data = b"".join(b"%6d\t%s" % (i, line) for i, line in enumerate(lines, 1))
        return _capped(data, limit)

    return Prepared(run, pinned)


def _chunks(item: Pinned) -> Iterator[bytes]:
    fd = reopen(item, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while chunk := os.read(fd, CHUNK):
            check_deadline()
            yield chunk
    finally:
        os.close(fd)


def _tail_of(item: Pinned, lines: int | None, count: int | None, limit: int) -> bytes:
    """The last ``lines`` lines or ``count`` bytes, read backwards from the end."""
    fd = reopen(item, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        if count is not None:
            start = max(size - min(count, limit + 1), 0)
            return os.pread(fd, size - start, start)
        assert lines is not None
        position, data = size, b""
        while position > 0 and data.count(b"\n") <= lines and len(data) <= limit:
            step = min(CHUNK, position)
            position -= step
            data = os.pread(fd, step, position) + data
        kept = data.splitlines(keepends=True)
        return b"".join(kept[-lines:]) if lines else b""
    finally:
        os.close(fd)


def _from_line(item: Pinned, first: int, limit: int) -> bytes:
    """Everything from line ``first`` (1-based), at most ``limit + 1`` bytes."""
    skip = max(first - 1, 0)
    out: list[bytes] = []
    size = 0
    for chunk in _chunks(item):
        while skip and chunk:
            newline = chunk.find(b"\n")
            if newline < 0:
                chunk = b""
                break
            chunk = chunk[newline + 1 :]
            skip -= 1
        if chunk:
            out.append(chunk)
            size += len(chunk)
            if size > limit:
                break
    return b"".join(out)


def _head_tail(inv: Invocation, tail: bool) -> Prepared:
    displays, pinned = _sources(inv)
    limit = inv.limits.output_limit
    by_bytes = inv.parsed.value("-c")
    lines_spec = inv.parsed.value("-n") or "10"
    multiple = len(pinned) > 1

    def cut(data: bytes) -> bytes:
        if by_bytes is not None:
            count = int(by_bytes)
            return (data[-count:] if count else b"") if tail else data[:count]
        if tail and lines_spec.startswith("+"):
            return b"".join(data.splitlines(keepends=True)[max(int(lines_spec) - 1, 0) :])
        count = int(lines_spec)
        lines = data.splitlines(keepends=True)
        return b"".join((lines[-count:] if count else []) if tail else lines[:count])

    def one(item: Pinned) -> bytes:
        if not tail:
            return cut(_read(item, limit))
        if by_bytes is not None:
            return _tail_of(item, None, int(by_bytes), limit)
        if lines_spec.startswith("+"):
            return _from_line(item, int(lines_spec), limit)
        return _tail_of(item, int(lines_spec), None, limit)

    def run(stdin: bytes) -> Outcome:
        if not pinned:
            return _capped(cut(stdin), limit)
        parts: list[bytes] = []
        for index, (display, item) in enumerate(zip(displays, pinned, strict=True)):
            if multiple:
                parts.append(b"%s==> %s <==\n" % (b"\n" if index else b"", os.fsencode(display)))
            parts.append(one(item))
        return _capped(b"".join(parts), limit)

    return Prepared(run, pinned)


def prepare_head(inv: Invocation) -> Prepared:
    return _head_tail(inv, tail=False)


def prepare_tail(inv: Invocation) -> Prepared:
    return _head_tail(inv, tail=True)


class _Counts:
    """wc's counts over a stream of chunks (words and characters may span chunks)."""

    def __init__(self) -> None:
        self.lines = self.words = self.chars = self.size = 0
        self.in_word = False
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, chunk: bytes, final: bool = False) -> None:
        self.lines += chunk.count(b"\n")
        self.size += len(chunk)
        self.chars += len(self.decoder.decode(chunk, final))
        if not chunk:
            return
        words = len(chunk.split())
        if words and self.in_word and not chunk[:1].isspace():
            words -= 1  # the first word continues the previous chunk's last one
        self.words += words
        self.in_word = not chunk[-1:].isspace()

    def values(self, chosen: list[str]) -> list[int]:
        table = {"-l": self.lines, "-w": self.words, "-m": self.chars, "-c": self.size}
        return [table[flag] for flag in chosen]


def prepare_wc(inv: Invocation) -> Prepared:
    displays, pinned = _sources(inv)
    chosen = [flag for flag in ("-l", "-w", "-m", "-c") if inv.parsed.has(flag)]
    chosen = chosen or ["-l", "-w", "-c"]

    def counted(chunks: Iterable[bytes]) -> list[int]:
        counts = _Counts()
        for chunk in chunks:
            counts.feed(chunk)
        counts.feed(b"", final=True)
        return counts.values(chosen)

    def run(stdin: bytes) -> Outcome:
        rows: list[tuple[list[int], str]] = []
        if not pinned:
            rows.append((counted([stdin]), ""))
        for display, item in zip(displays, pinned, strict=True):
            rows.append((counted(_chunks(item)), display))
        if len(rows) > 1:
            rows.append(([sum(col) for col in zip(*(r[0] for r in rows), strict=True)], "total"))
        width = max(len(str(v)) for row in rows for v in row[0])
        text = "".join(
            " ".join(str(v).rjust(width) for v in values) + (f" {name}" if name else "") + "\n"
            for values, name in rows
        )
        return ok(os.fsencode(text))

    return Prepared(run, pinned)


def _tee_content(inv: Invocation) -> tuple[bytes | None, list[Token]]:
    """Split tee's operands into its inline content (one leading ARG) and its destinations.

    Without a shell there is no ``echo``: ``tee "text" PTH...`` writes the text itself. A pipe
    is the other source, so with one the ARG would be ambiguous and is refused.
    """
    operands = inv.parsed.operands
    contents = [value for value, tag in operands if tag is not Tag.PTH]
    if not contents:
        return None, operands
    if inv.piped:
        raise CommandSyntaxError(
            "tee: its input comes from the pipe; drop the content ARG or the pipe"
        )
    if len(contents) > 1 or operands[0][1] is Tag.PTH:
        raise CommandSyntaxError(
            "tee: give exactly one content ARG, before the destination PTHs "
            '(["tee","CMD"],["text","ARG"],["file","PTH"])'
        )
    try:
        data = contents[0].encode("utf-8")
    except UnicodeEncodeError as error:
        raise CommandSyntaxError(
            f"tee: the content is not valid text ({error.reason} at position {error.start})"
        ) from None
    return data, operands[1:]


def prepare_tee(inv: Invocation) -> Prepared:
    content, destinations = _tee_content(inv)
    displays = inv.paths(destinations, glob=False)
    append = inv.parsed.has("-a")
    pinned = inv.pin_destinations(displays, require_regular)

    def run(stdin: bytes) -> Outcome:
        data = stdin if content is None else content
        errors: list[str] = []
        for display, item in zip(displays, pinned, strict=True):
            try:
                fd = open_for_write(item, append=append)
            except OSError as error:
                errors.append(f"tee: {display}: {error.strerror}")
                continue
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        return Outcome(1 if errors else 0, data, os.fsencode("\n".join(errors)))

    return Prepared(run, pinned)


def open_for_write(item: Pinned, *, append: bool = False) -> int:
    """Open a pinned file for writing: the pinned inode if it existed, else a new file."""
    if item.exists:
        fd = reopen(item, os.O_WRONLY | os.O_NOFOLLOW | (os.O_APPEND if append else 0))
        if not append:
            os.ftruncate(fd, 0)
        return fd
    try:
        return os.open(
            item.name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            default_file_mode(),
            dir_fd=item.parent_fd,
        )
    except FileExistsError:
        raise AccessError(f"{item.name}: appeared while being checked; try again") from None
