"""apply_patch: literal replacement in one file, byte-preserving and atomic.

The file is read through a pinned descriptor and rewritten next to itself (temp file in the
same directory, fsync, rename), keeping its mode. Only the replaced span changes: CRLF line
ends, non-UTF-8 bytes and everything else stay byte-identical.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from roboz.runtime.events import EventPipe
from roboz.shed.guard import (
    AccessError,
    CommandGuard,
    atomic_write,
    default_file_mode,
    plan_directories,
    reopen,
    require_regular,
)
from roboz.shed.models import Operation
from roboz.shed.sandbox import PermissionPolicy


class PatchError(Exception):
    """The patch cannot be applied; nothing was written. The message says why."""


@dataclass(frozen=True)
class PatchOutcome:
    path: str
    replacements: int
    created: bool
    note: str = ""

    def describe(self) -> str:
        if self.created:
            return f"created {self.path}"
        if self.replacements == 0:
            return f"rewrote {self.path}"
        return f"patched {self.path}: {self.replacements} replacement(s){self.note}"


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PatchError(
            f"{what} is not valid text ({error.reason} at position {error.start}); nothing "
            "was changed"
        ) from None


def find_matches(data: bytes, needle: bytes) -> list[int]:
    """Start offsets of every occurrence of ``needle``, overlapping ones included."""
    found: list[int] = []
    start = data.find(needle)
    while start != -1:
        found.append(start)
        start = data.find(needle, start + 1)
    return found


def replace_bytes(data: bytes, old: bytes, new: bytes, *, replace_all: bool) -> tuple[bytes, int]:
    """Replace the literal ``old``; exactly one match unless ``replace_all``."""
    chunks, count = replacement_chunks(data, old, new, replace_all=replace_all)
    return b"".join(chunks), count


def replacement_chunks(
    data: bytes, old: bytes, new: bytes, *, replace_all: bool
) -> tuple[list[bytes | memoryview], int]:
    """The patched content as pieces (views of ``data`` around each replacement)."""
    matches = find_matches(data, old)
    if not matches:
        raise PatchError("old_string was not found; copy it exactly from the file")
    if any(b - a < len(old) for a, b in itertools.pairwise(matches)):
        raise PatchError(
            f"old_string matches {len(matches)} overlapping places; include more context so "
            "it matches exactly one"
        )
    if len(matches) > 1 and not replace_all:
        raise PatchError(
            f"old_string matches {len(matches)} places; include more surrounding context, or "
            "set replace_all to replace every occurrence"
        )
    view = memoryview(data)
    pieces: list[bytes | memoryview] = []
    last = 0
    for start in matches:
        pieces += [view[last:start], new]
        last = start + len(old)
    pieces.append(view[last:])
    return pieces, len(matches)


def apply_patch(
    policy: PermissionPolicy,
    path: str | os.PathLike[str],
    old_string: str,
    new_string: str,
    *,
    replace_all: bool = False,
    pipe: EventPipe | None = None,
    tool: str = "apply_patch",
) -> PatchOutcome:
    """Apply one literal replacement (or, with an empty ``old_string``, write the whole file).

    Raises PermissionDenied, AccessError or PatchError; on any error nothing changed.
    """
    path = os.fspath(path)
    old = _encode(old_string, "old_string")
    new = _encode(new_string, "new_string")
    if "\x00" in path or not path:
        raise AccessError("path must be a non-empty path without NUL bytes")
    guard = CommandGuard(policy, tool=tool, pipe=pipe)
    logical = guard.lexical(Operation.CREATE, path)
    if old:
        guard.lexical(Operation.READ, path)
    try:
        pinned = guard.pin(Operation.CREATE, path)
    except AccessError:
        if old:
            raise
        return _create_with_parents(guard, logical, path, new)
    try:
        if not pinned.exists:
            if old:
                raise AccessError(f"{path}: no such file; an empty old_string creates it")
            guard.confirm()
            atomic_write(pinned.parent_fd, pinned.name, [new], default_file_mode())
            return PatchOutcome(path, 0, created=True)
        require_regular(pinned, path)
        if old:
            guard.physical(Operation.READ, pinned.physical, path)
        guard.confirm()
        assert pinned.st is not None
        owner = (pinned.st.st_uid, pinned.st.st_gid)
        if not old:
            atomic_write(pinned.parent_fd, pinned.name, [new], pinned.st.st_mode, owner)
            return PatchOutcome(path, 0, created=False)
        fd = reopen(pinned, os.O_RDONLY)
        try:
            data = _read_all(fd)
        finally:
            os.close(fd)
        note = ""
        try:
            patched, count = replacement_chunks(data, old, new, replace_all=replace_all)
        except PatchError:
            crlf_old = old.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            if b"\r\n" not in data or crlf_old == old or crlf_old not in data:
                raise
            crlf_new = new.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            patched, count = replacement_chunks(data, crlf_old, crlf_new, replace_all=replace_all)
            note = " (matched with the file's CRLF line endings)"
        atomic_write(pinned.parent_fd, pinned.name, patched, pinned.st.st_mode, owner)
        return PatchOutcome(path, count, created=False, note=note)
    finally:
        pinned.close()


def _create_with_parents(guard: CommandGuard, logical: str, path: str, new: bytes) -> PatchOutcome:
    """Create a file whose parent directories are missing: CREATE is checked on each."""
    plan = plan_directories(guard, os.path.dirname(logical), path)
    try:
        final = f"{plan.anchor.physical.rstrip('/')}/" + "/".join(
            [*plan.names, os.path.basename(logical)]
        )
        guard.physical(Operation.CREATE, final, path)
        guard.confirm()
        parent_fd = plan.create()
        try:
            atomic_write(parent_fd, os.path.basename(logical), [new], default_file_mode())
        finally:
            os.close(parent_fd)
        return PatchOutcome(path, 0, created=True)
    finally:
        plan.close()


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    data = os.read(fd, max(size, 1 << 16) + 1)
    while data:
        chunks.append(data)
        data = os.read(fd, 1 << 20)
    return b"".join(chunks)
