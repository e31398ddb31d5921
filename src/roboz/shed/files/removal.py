"""rm, and the safeguards every removal shares (rm, mv, gio trash): the base and its parents
are never removed, and a name is only acted on while it still is the object that was checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from roboz.shed.files.base import Invocation, Prepared, close_all, failures
from roboz.shed.files.process import Outcome
from roboz.shed.guard import (
    DIR_FLAGS,
    AccessError,
    PermissionDenied,
    Pinned,
    check_deadline,
    check_subtree,
    reopen,
)
from roboz.shed.models import ActionVerdict, Operation


def same_entry(item: Pinned) -> bool:
    """Whether the pinned name still refers to the pinned object (no swap since the check)."""
    try:
        st = os.lstat(item.name, dir_fd=item.parent_fd)
    except OSError:
        return False
    return item.st is not None and (st.st_dev, st.st_ino) == (item.st.st_dev, item.st.st_ino)


def protect_base(inv: Invocation, item: Pinned, display: str) -> None:
    base = inv.guard.policy.base_path
    for path in (item.physical, inv.guard.policy.normalize(display)):
        if path == "/" or base == path or base.startswith(path.rstrip("/") + "/"):
            raise PermissionDenied(
                f"{inv.name} {display}: the base directory and its parents cannot be removed"
            )


def _remove_tree(fd: int, physical: str, inv: Invocation) -> Iterator[str]:
    """Delete the contents of the directory open as ``fd`` (closed here)."""
    policy = inv.guard.policy
    try:
        with os.scandir(fd) as iterator:
            entries = list(iterator)
        for entry in entries:
            check_deadline()
            path = f"{physical}/{entry.name}"
            if policy.decide(path, Operation.DELETE) is ActionVerdict.deny:
                yield f"{entry.name}: not removed (not allowed)"
                continue
            if entry.is_dir(follow_symlinks=False):
                child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                yield from _remove_tree(child, path, inv)
                try:
                    os.rmdir(entry.name, dir_fd=fd)
                except OSError as error:
                    yield f"{entry.name}: {error.strerror}"
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)


def pin_for_removal(
    inv: Invocation,
    displays: list[str],
    *,
    command: str,
    force: bool,
    recursive: bool,
    check_file: Callable[[Pinned, str], None] | None = None,
) -> list[tuple[str, Pinned]]:
    """Pin every operand for DELETE without following a final symlink, all or nothing.

    The base and its parents are refused; a directory needs ``recursive`` and DELETE on its
    whole subtree; other entries (not symlinks) must pass ``check_file``. A missing operand
    is an error unless ``force``; it stays in the list, pinned as absent.
    """
    jobs: list[tuple[str, Pinned]] = []
    try:
        for display in displays:
            item = inv.guard.pin(Operation.DELETE, display, follow_final=False)
            jobs.append((display, item))
            protect_base(inv, item, display)
            if item.st is None:
                if force:
                    continue
                raise AccessError(f"{command}: {display}: no such file or directory")
            if item.is_dir:
                if not recursive:
                    raise AccessError(f"{command}: {display}: is a directory (use -r)")
                check_subtree(inv.guard, item, display, (Operation.DELETE,), reads_content=False)
            elif check_file is not None and not item.is_symlink:
                check_file(item, display)
    except Exception:
        close_all(item for _, item in jobs)
        raise
    return jobs


def prepare_rm(inv: Invocation) -> Prepared:
    force = inv.parsed.has("-f")
    recursive = inv.parsed.has("-r")
    try:
        displays = inv.paths(glob=True)
    except AccessError:
        if not force:
            raise
        displays = []
    jobs = pin_for_removal(inv, displays, command="rm", force=force, recursive=recursive)

    def run(stdin: bytes) -> Outcome:
        errors: list[str] = []
        for display, item in jobs:
            if item.st is None:
                continue
            try:
                if item.is_dir:
                    errors += [
                        f"rm: {display}/{e}"
                        for e in _remove_tree(reopen(item, DIR_FLAGS), item.physical, inv)
                    ]
                    if same_entry(item):
                        os.rmdir(item.name, dir_fd=item.parent_fd)
                elif same_entry(item):
                    os.unlink(item.name, dir_fd=item.parent_fd)
                else:
                    errors.append(f"rm: {display}: changed since it was checked; not removed")
            except OSError as error:
                errors.append(f"rm: {display}: {error.strerror}")
        return failures(errors)

    return Prepared(run, [item for _, item in jobs])
