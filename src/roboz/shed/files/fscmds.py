"""touch, mkdir, cp and mv, implemented in Python on pinned descriptors.

Operations needed: cp reads every source entry and creates every destination entry; mv needs
READ and DELETE on what it moves and CREATE where it lands; rm needs DELETE on everything it
removes. Overwriting a file counts as CREATE.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from roboz.shed.files.base import Invocation, Prepared, close_all, failures
from roboz.shed.files.parser import CommandSyntaxError
from roboz.shed.files.process import Outcome
from roboz.shed.files.removal import protect_base, same_entry
from roboz.shed.guard import (
    DIR_FLAGS,
    AccessError,
    DirPlan,
    Pinned,
    atomic_write,
    check_deadline,
    check_subtree,
    plan_directories,
    reopen,
    require_regular,
    require_regular_or_dir,
)
from roboz.shed.models import Operation


def prepare_touch(inv: Invocation) -> Prepared:
    displays = inv.paths(glob=False)
    no_create = inv.parsed.has("-c")
    pinned = inv.pin_destinations(displays, require_regular_or_dir)

    def run(stdin: bytes) -> Outcome:
        errors: list[str] = []
        for display, item in zip(displays, pinned, strict=True):
            try:
                if item.exists:
                    fd = reopen(item, os.O_RDONLY | os.O_NOFOLLOW)
                    try:
                        os.utime(fd)
                    finally:
                        os.close(fd)
                elif not no_create:
                    os.close(
                        os.open(
                            item.name,
                            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                            0o666,
                            dir_fd=item.parent_fd,
                        )
                    )
            except OSError as error:
                errors.append(f"touch: {display}: {error.strerror}")
        return failures(errors)

    return Prepared(run, pinned)


def prepare_mkdir(inv: Invocation) -> Prepared:
    displays = inv.paths(glob=False)
    parents = inv.parsed.has("-p")
    plans: list[DirPlan] = []
    try:
        for display in displays:
            logical = inv.guard.lexical(Operation.CREATE, display)
            plan = plan_directories(inv.guard, logical, display)
            plans.append(plan)
            if not plan.names and not parents:
                raise AccessError(f"mkdir: {display}: already exists")
            if len(plan.names) > 1 and not parents:
                raise AccessError(f"mkdir: {display}: parent directory missing (use -p)")
    except Exception:
        for plan in plans:
            plan.close()
        raise

    def run(stdin: bytes) -> Outcome:
        errors: list[str] = []
        for display, plan in zip(displays, plans, strict=True):
            try:
                os.close(plan.create())
            except OSError as error:
                errors.append(f"mkdir: {display}: {error.strerror}")
        return failures(errors)

    return Prepared(run, [plan.anchor for plan in plans])


def _split_dest(inv: Invocation) -> tuple[list[str], str]:
    operands = inv.parsed.operands
    if len(operands) < 2:
        raise CommandSyntaxError(f"{inv.name}: needs SOURCE... DEST (at least two PTH)")
    dest = inv.paths(operands[-1:], glob=False)[0]
    return inv.paths(operands[:-1], glob=True), dest


def _target(inv: Invocation, sources: list[str], dest: str) -> tuple[Pinned, bool]:
    """Pin the destination for CREATE; True if it is an existing directory to copy into."""
    target = inv.guard.pin(Operation.CREATE, dest)
    into = target.is_dir
    if len(sources) > 1 and not into:
        target.close()
        raise AccessError(f"{inv.name}: {dest}: with several sources DEST must be a directory")
    return target, into


Transfer = tuple[str, Pinned, Pinned]
"""One source of cp or mv: its display name, the pinned source, the pinned final path."""


@dataclass(frozen=True)
class _Destination:
    display: str
    target: Pinned
    into: bool
    """Whether ``target`` is an existing directory the sources go into."""

    def final(self, name: str) -> str:
        return posixpath.join(self.display, name) if self.into else self.display


def _plan_transfers(
    inv: Invocation, plan_one: Callable[[str, _Destination, list[Pinned]], Transfer]
) -> tuple[list[Transfer], list[Pinned]]:
    """Pin the destination, then let ``plan_one(source, destination, pinned)`` check each
    source (appending what it pins). All or nothing: on any error everything is released."""
    sources, dest = _split_dest(inv)
    pinned: list[Pinned] = []
    jobs: list[Transfer] = []
    try:
        target, into = _target(inv, sources, dest)
        pinned.append(target)
        destination = _Destination(dest, target, into)
        for source in sources:
            jobs.append(plan_one(source, destination, pinned))
    except Exception:
        close_all(pinned)
        raise
    return jobs, pinned


def _walk_copy(src_fd: int, dst_fd: int) -> Iterator[str]:
    """Copy the directory ``src_fd`` into ``dst_fd`` (both closed here); yield errors."""
    try:
        with os.scandir(src_fd) as iterator:
            entries = list(iterator)
        for entry in entries:
            check_deadline()
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(entry.name, stat.S_IMODE(st.st_mode) | 0o700, dir_fd=dst_fd)
                child_src = os.open(entry.name, DIR_FLAGS, dir_fd=src_fd)
                child_dst = os.open(entry.name, DIR_FLAGS, dir_fd=dst_fd)
                yield from _walk_copy(child_src, child_dst)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    os.symlink(os.readlink(entry.name, dir_fd=src_fd), entry.name, dir_fd=dst_fd)
                except OSError as error:
                    yield f"{entry.name}: {error.strerror}"
            elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
                try:
                    atomic_write(dst_fd, entry.name, _chunks(fd), st.st_mode)
                finally:
                    os.close(fd)
            else:
                yield f"{entry.name}: skipped (not a regular file)"
    finally:
        os.close(src_fd)
        os.close(dst_fd)


def _chunks(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, 1 << 20):
        check_deadline()
        yield chunk


def prepare_cp(inv: Invocation) -> Prepared:
    recursive = inv.parsed.has("-r")
    no_clobber = inv.parsed.has("-n")
    guard = inv.guard

    def plan_one(source: str, destination: _Destination, pinned: list[Pinned]) -> Transfer:
        src = guard.pin(Operation.READ, source)
        pinned.append(src)
        require_regular_or_dir(src, source)
        if src.is_dir and not recursive:
            raise AccessError(f"cp: {source}: is a directory (use -r)")
        final_display = destination.final(src.name)
        if destination.into:
            final = guard.pin(Operation.CREATE, final_display)
            pinned.append(final)
        else:
            final = destination.target
        if final.exists:
            if src.is_dir != final.is_dir:
                raise AccessError(f"cp: cannot overwrite {final_display} with {source}")
            if (
                final.st
                and src.st
                and (final.st.st_ino, final.st.st_dev) == (src.st.st_ino, src.st.st_dev)
            ):
                raise AccessError(f"cp: {source} and {final_display} are the same file")
            if not final.is_dir:
                require_regular(final, final_display)
        if src.is_dir:
            if final.physical == src.physical or final.physical.startswith(src.physical + "/"):
                raise AccessError(f"cp: cannot copy {source} into itself")
            check_subtree(
                guard,
                src,
                source,
                (Operation.READ,),
                reads_content=True,
                dest=final.physical,
                dest_operations=(Operation.CREATE,),
            )
        return (final_display, src, final)

    jobs, pinned = _plan_transfers(inv, plan_one)

    def run(stdin: bytes) -> Outcome:
        errors: list[str] = []
        for display, src, final in jobs:
            try:
                if src.is_dir:
                    if not final.exists:
                        assert src.st is not None
                        os.mkdir(
                            final.name, stat.S_IMODE(src.st.st_mode) | 0o700, dir_fd=final.parent_fd
                        )
                        dst_fd = os.open(final.name, DIR_FLAGS, dir_fd=final.parent_fd)
                    else:
                        dst_fd = reopen(final, DIR_FLAGS)
                    errors += [
                        f"cp: {display}/{e}" for e in _walk_copy(reopen(src, DIR_FLAGS), dst_fd)
                    ]
                    continue
                if final.exists and no_clobber:
                    continue
                assert src.st is not None
                mode = final.st.st_mode if final.exists and final.st else src.st.st_mode
                fd = reopen(src, os.O_RDONLY)
                try:
                    atomic_write(final.parent_fd, final.name, _chunks(fd), mode)
                finally:
                    os.close(fd)
            except OSError as error:
                errors.append(f"cp: {display}: {error.strerror}")
        return failures(errors)

    return Prepared(run, pinned)


def prepare_mv(inv: Invocation) -> Prepared:
    no_clobber = inv.parsed.has("-n")
    guard = inv.guard

    def plan_one(source: str, destination: _Destination, pinned: list[Pinned]) -> Transfer:
        guard.lexical(Operation.READ, source)
        src = guard.pin(Operation.DELETE, source, follow_final=False)
        pinned.append(src)
        guard.physical(Operation.READ, src.physical, source)
        if src.st is None:
            raise AccessError(f"mv: {source}: no such file or directory")
        protect_base(inv, src, source)
        final_display = destination.final(src.name)
        if destination.into:
            final = guard.pin(Operation.CREATE, final_display, follow_final=False)
            pinned.append(final)
        else:
            final = destination.target
        if src.is_dir:
            if final.physical.startswith(src.physical + "/"):
                raise AccessError(f"mv: cannot move {source} into itself")
            check_subtree(
                guard,
                src,
                source,
                (Operation.READ, Operation.DELETE),
                reads_content=False,
                dest=final.physical,
                dest_operations=(Operation.CREATE,),
            )
        elif not src.is_symlink:
            require_regular(src, source)
        if final.exists and final.is_dir and not src.is_dir:
            raise AccessError(f"mv: cannot overwrite directory {final_display}")
        return (source, src, final)

    jobs, pinned = _plan_transfers(inv, plan_one)

    def run(stdin: bytes) -> Outcome:
        errors: list[str] = []
        for display, src, final in jobs:
            if not same_entry(src):
                errors.append(f"mv: {display}: changed since it was checked; not moved")
                continue
            if no_clobber:
                try:
                    os.lstat(final.name, dir_fd=final.parent_fd)
                    continue
                except FileNotFoundError:
                    pass
            try:
                os.rename(
                    src.name, final.name, src_dir_fd=src.parent_fd, dst_dir_fd=final.parent_fd
                )
            except OSError as error:
                reason = (
                    "source and destination are on different file systems; use cp and rm"
                    if error.errno == errno.EXDEV
                    else error.strerror
                )
                errors.append(f"mv: {display}: {reason}")
        return failures(errors)

    return Prepared(run, pinned)
