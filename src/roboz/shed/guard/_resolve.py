"""Symlink-safe path resolution: walk from ``/`` one component at a time with O_NOFOLLOW.

The walk returns the physical (symlink-free) path it arrived at together with file
descriptors pinned to what it found: an O_PATH descriptor of the object (if it exists) and of
its parent directory. Policy checks look at the physical path; every later use goes through
the pinned descriptors, so swapping a component for a symlink after the check cannot redirect
the use to another file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field

MAX_SYMLINKS = 40
O_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class WalkError(OSError):
    """The walk failed; ``at`` is the physical path it was trying to reach."""

    def __init__(self, code: int, message: str, at: str) -> None:
        super().__init__(code, message)
        self.at = at


@dataclass(eq=False)
class Pinned:
    """A resolved path with descriptors pinned to the objects found at check time."""

    physical: str
    parent_fd: int
    name: str
    fd: int | None = None
    st: os.stat_result | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def exists(self) -> bool:
        return self.fd is not None

    @property
    def is_dir(self) -> bool:
        return self.st is not None and stat.S_ISDIR(self.st.st_mode)

    @property
    def is_file(self) -> bool:
        return self.st is not None and stat.S_ISREG(self.st.st_mode)

    @property
    def is_symlink(self) -> bool:
        return self.st is not None and stat.S_ISLNK(self.st.st_mode)

    @property
    def proc_path(self) -> str:
        """A path any process holding these descriptors resolves to the pinned object."""
        if self.fd is None:
            raise FileNotFoundError(errno.ENOENT, "not found", self.physical)
        return f"/proc/self/fd/{self.fd}"

    def fds(self) -> tuple[int, ...]:
        return (self.parent_fd,) if self.fd is None else (self.parent_fd, self.fd)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in self.fds():
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Pinned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _join(names: list[str]) -> str:
    return "/" + "/".join(names)


def resolve(path: str, *, follow_final: bool = True) -> Pinned:
    """Resolve an absolute path physically, pinning what it finds.

    A missing final component is not an error (``Pinned.fd`` is None, for creation); a missing
    intermediate component, a non-directory in the middle, or a symlink loop raise WalkError.
    With ``follow_final`` False a final symlink is pinned itself, not followed.
    """
    if not path.startswith("/"):
        raise ValueError("resolve() needs an absolute path")
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[int] = [root]
    names: list[str] = []
    pending = deque(part for part in path.split("/") if part)
    links = 0
    try:
        while pending:
            part = pending.popleft()
            if part == ".":
                continue
            if part == "..":
                if names:
                    os.close(stack.pop())
                    names.pop()
                continue
            final = not any(p not in (".",) for p in pending)
            try:
                fd = os.open(part, O_PATH_FLAGS, dir_fd=stack[-1])
            except FileNotFoundError:
                if final:
                    return Pinned(physical=_join([*names, part]), parent_fd=stack.pop(), name=part)
                raise WalkError(
                    errno.ENOENT, "no such file or directory", _join([*names, part, *pending])
                ) from None
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode) and (not final or follow_final):
                links += 1
                try:
                    target = os.readlink(part, dir_fd=stack[-1])
                finally:
                    os.close(fd)
                if links > MAX_SYMLINKS:
                    raise WalkError(errno.ELOOP, "too many levels of symbolic links", path)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                pending.extendleft(reversed([p for p in target.split("/") if p]))
                continue
            if not final and not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                raise WalkError(errno.ENOTDIR, "not a directory", _join([*names, part, *pending]))
            stack.append(fd)
            names.append(part)
        if not names:
            return Pinned(
                physical="/", parent_fd=os.dup(root), name="", fd=stack.pop(), st=os.fstat(root)
            )
        fd = stack.pop()
        return Pinned(
            physical=_join(names), parent_fd=stack.pop(), name=names[-1], fd=fd, st=os.fstat(fd)
        )
    finally:
        for fd in stack:
            os.close(fd)


def reopen(pinned: Pinned, flags: int) -> int:
    """Open the pinned object itself (never re-resolving its path) with ``flags``."""
    if pinned.fd is None:
        raise FileNotFoundError(errno.ENOENT, "not found", pinned.physical)
    # The magic link in /proc is itself a symlink: O_NOFOLLOW would refuse it. Following it
    # lands on the pinned inode, never on a path that could have been swapped.
    fd = os.open(pinned.proc_path, (flags & ~os.O_NOFOLLOW) | os.O_CLOEXEC)
    if pinned.st is not None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (pinned.st.st_dev, pinned.st.st_ino):
            os.close(fd)
            raise OSError(errno.ESTALE, "file changed while being checked", pinned.physical)
    return fd
