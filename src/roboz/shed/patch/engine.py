"""apply_patch: literal replacement in one file, byte-preserving and atomic.

The file is read through a pinned descriptor and rewritten next to itself (temp file in the
same directory, fsync, rename), keeping its mode. Only the replaced span changes: CRLF line
ends, non-UTF-8 bytes and everything else stay byte-identical.
"""

from __future__ import annotations

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


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file, or None.

    A surrogate-escaped name (``os.fsdecode`` of bytes that are not UTF-8) is a file name; a
    lone surrogate outside that escape range is not, and would fail deep inside ``os``.
    """
    if not path:
        return "path is empty; give the file to patch"
    if "\x00" in path:
        return f"path contains a NUL byte (at character {path.index(chr(0))}); no file name can"
    try:
        os.fsencode(path)
    except UnicodeEncodeError as error:
        return f"path is not a file name ({error.reason} at character {error.start})"
    return None


def find_matches(data: bytes, needle: bytes, *, replace_all: bool) -> list[int]:
    """Start offsets of the non-overlapping occurrences of ``needle`` to replace.

    Without ``replace_all`` the search stops at the second occurrence (two are enough to
    refuse), so a file of ``a`` and an ``old_string`` of ``a`` cannot make it list every
    overlapping match, each found by a search as long as the needle. Every search here
    starts past the previous match or is bounded to twice the needle, so the whole is linear.
    Raises PatchError when nothing matches, when ``needle`` matches more than once without
    ``replace_all``, or when occurrences overlap (which of them to replace is ambiguous).
    """
    first = data.find(needle)
    if first == -1:
        raise PatchError("old_string was not found; copy it exactly from the file")
    found = [first]
    while True:
        start = found[-1]
        # An occurrence overlapping this one starts within it and ends within one needle
        # after it, so a bounded search finds it.
        if data.find(needle, start + 1, start + 2 * len(needle) - 1) != -1:
            raise PatchError(
                "old_string matches overlapping places; include more context so it matches "
                "exactly one"
            )
        following = data.find(needle, start + len(needle))
        if following == -1:
            return found
        if not replace_all:
            raise PatchError(
                "old_string matches more than one place; include more surrounding context, "
                "or set replace_all to replace every occurrence"
            )
        found.append(following)


def replace_bytes(data: bytes, old: bytes, new: bytes, *, replace_all: bool) -> tuple[bytes, int]:
    """Replace the literal ``old``; exactly one match unless ``replace_all``."""
    chunks, count = replacement_chunks(data, old, new, replace_all=replace_all)
    return b"".join(chunks), count


def replacement_chunks(
    data: bytes, old: bytes, new: bytes, *, replace_all: bool
) -> tuple[list[bytes | memoryview], int]:
    """The patched content as pieces (views of ``data`` around each replacement)."""
    matches = find_matches(data, old, replace_all=replace_all)
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
    problem = path_problem(path)
    if problem is not None:
        raise AccessError(problem)
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
