"""File operations on pinned paths: reading, atomic writing, subtree checks, directory creation.

Everything here acts through descriptors obtained from a symlink-safe walk (``resolve``), never
by re-resolving a path string, so the object that was checked is the object that is used.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from roboz.shed.guard._checks import AccessError, CommandGuard, PermissionDenied
from roboz.shed.guard._deadline import check_deadline
from roboz.shed.guard._resolve import Pinned, WalkError, reopen, resolve
from roboz.shed.models import ActionVerdict, Operation

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def describe_kind(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a special file"


def require_regular(pinned: Pinned, display: str) -> None:
    """Refuse anything but an existing regular file with a single link."""
    if pinned.st is None:
        raise AccessError(f"{display}: no such file or directory")
    if stat.S_ISDIR(pinned.st.st_mode):
        raise AccessError(f"{display}: is a directory")
    if not stat.S_ISREG(pinned.st.st_mode):
        raise AccessError(
            f"{display}: is {describe_kind(pinned.st)}; only regular files and directories "
            "are supported"
        )
    if pinned.st.st_nlink > 1:
        raise AccessError(f"{display}: has several hard links; refused")


def require_regular_or_dir(pinned: Pinned, display: str) -> None:
    if pinned.st is None:
        raise AccessError(f"{display}: no such file or directory")
    if not pinned.is_dir:
        require_regular(pinned, display)


def read_pinned(pinned: Pinned, limit: int | None = None) -> bytes:
    """The content of a pinned regular file (at most ``limit`` bytes when given)."""
    fd = reopen(pinned, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        chunks: list[bytes] = []
        remaining = limit if limit is not None else -1
        while remaining != 0:
            chunk = os.read(fd, 1 << 20 if remaining < 0 else min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if remaining > 0:
                remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _scan(
    fd: int,
    prefix: str,
    out: list[str] | None,
    names: list[str],
    content: list[tuple[str, os.stat_result]] | None,
) -> None:
    """Append the relative paths below the directory ``fd`` (closed here), no symlinks
    followed; with ``content`` also collect the non-directories (for type/link checks)."""
    try:
        with os.scandir(fd) as iterator:
            entries = list(iterator)
        check_deadline()
        for entry in entries:
            name = entry.name
            names.append(name)
            if out is not None:
                out.append(prefix + name)
            if entry.is_dir(follow_symlinks=False):
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                _scan(child, prefix + name + "/" if out is not None else "", out, names, content)
            elif content is not None and not entry.is_symlink():
                content.append((prefix + name, entry.stat(follow_symlinks=False)))
    finally:
        os.close(fd)


def check_subtree(
    guard: CommandGuard,
    top: Pinned,
    display: str,
    operations: tuple[Operation, ...],
    *,
    reads_content: bool,
    dest: str | None = None,
    dest_operations: tuple[Operation, ...] = (),
) -> None:
    """Check every descendant of a pinned directory before a recursive command touches it.

    Denied descendants deny the whole command with a message that names no descendant.
    ``reads_content`` also refuses FIFOs, devices, sockets and hard-linked files inside.
    ``dest`` (a normalized path) maps each descendant to a destination checked for
    ``dest_operations`` (copying).
    """
    policy = guard.policy
    uniform = dest is None and all(
        policy.verdicts_below(top.physical, op) == frozenset({ActionVerdict.allow})
        for op in operations
    )
    if uniform and not reads_content:
        return
    targets = [(top.physical, op) for op in operations]
    if dest is not None:
        targets += [(dest, op) for op in dest_operations]
    paths_needed = not uniform and any(policy.needs_paths_below(r, op) for r, op in targets)
    rels: list[str] | None = [] if paths_needed else None
    names: list[str] = []
    files: list[tuple[str, os.stat_result]] | None = [] if reads_content else None
    _scan(reopen(top, DIR_FLAGS), "", rels, names, files)
    if not uniform:
        for root, op in targets:
            verdicts = policy.subtree_verdicts(root, rels, op, names)
            if ActionVerdict.deny in verdicts:
                raise PermissionDenied(
                    f"{op.value} {display}: the command would reach paths below it that the "
                    "policy does not allow; use a narrower path"
                )
            if ActionVerdict.ask in verdicts:
                guard.pending_asks.append((op, f"everything below {display}"))
    for rel, st in files or ():
        if not stat.S_ISREG(st.st_mode):
            raise AccessError(f"{display}: contains {describe_kind(st)} ({rel}); refused")
        if st.st_nlink > 1:
            raise AccessError(f"{display}: contains a hard-linked file ({rel}); refused")


def temp_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(6)}.tmp"


def atomic_write(
    parent_fd: int,
    name: str,
    chunks: Iterator[bytes] | list[bytes] | list[bytes | memoryview],
    mode: int,
    owner: tuple[int, int] | None = None,
) -> None:
    """Write a file next to ``name`` in the pinned directory, fsync, then rename over ``name``."""
    tmp = temp_name(name)
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=parent_fd,
    )
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            os.fchmod(fd, stat.S_IMODE(mode))
            if owner is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, *owner)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent_fd)
        raise
    dir_fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def default_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@dataclass
class DirPlan:
    """Directories to create (checked for CREATE) below an existing pinned ancestor."""

    anchor: Pinned
    names: list[str]

    def create(self) -> int:
        """Create the directories; return an O_PATH descriptor of the deepest (caller closes)."""
        fd = os.dup(self.anchor.fd if self.anchor.fd is not None else self.anchor.parent_fd)
        for name in self.names:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
            child = os.open(
                name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = child
        return fd

    def close(self) -> None:
        self.anchor.close()


def plan_directories(guard: CommandGuard, logical_dir: str, display: str) -> DirPlan:
    """Find the deepest existing ancestor of ``logical_dir``; check CREATE on each missing one."""
    missing: list[str] = []
    current = logical_dir
    while True:
        try:
            pinned = resolve(current)
        except WalkError:
            pinned = None
        if pinned is not None and pinned.exists:
            if not pinned.is_dir:
                pinned.close()
                raise AccessError(f"{display}: {current} is not a directory")
            break
        if pinned is not None:
            pinned.close()
        head, tail = os.path.split(current)
        missing.append(tail)
        current = head
    names = list(reversed(missing))
    path = pinned.physical
    for name in names:
        path = f"{path.rstrip('/')}/{name}"
        try:
            guard.physical(Operation.CREATE, path, display)
        except PermissionDenied:
            pinned.close()
            raise
    return DirPlan(anchor=pinned, names=names)
