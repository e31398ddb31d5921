"""Glob expansion for source paths: ``*`` within one component and one recursive ``**``.

Expansion lists directories, so each listed directory is checked for READ first (lexically,
then pinned), entries whose READ is denied are skipped without a trace, and symlinked
directories are never descended into.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat

from roboz.shed.guard import DIR_FLAGS, AccessError, CommandGuard, check_deadline, reopen
from roboz.shed.models import ActionVerdict, Operation

MAX_MATCHES = 10_000


def has_glob(path: str) -> bool:
    return "*" in path


def reject_unsupported(path: str) -> None:
    if "?" in path or "[" in path or "]" in path:
        raise AccessError(f"{path}: '?' and bracket patterns are not supported; use *")


def _compile(component: str) -> re.Pattern[str]:
    return re.compile("[^/]*".join(re.escape(piece) for piece in component.split("*")))


def expand(guard: CommandGuard, display: str) -> list[str]:
    """The sorted paths (written like ``display``) that a glob pattern matches."""
    reject_unsupported(display)
    parts = display.split("/")
    if sum(1 for part in parts if part == "**") > 1:
        raise AccessError(f"{display}: only one recursive ** component is supported")
    if any("**" in part and part != "**" for part in parts):
        raise AccessError(f"{display}: ** must be a whole path component")
    first = next(index for index, part in enumerate(parts) if "*" in part)
    prefix = "/".join(parts[:first]) or ("/" if display.startswith("/") else ".")
    rest = parts[first:]
    if rest and rest[-1] == "":
        rest = rest[:-1]
    policy = guard.policy
    with guard.pin(Operation.READ, prefix) as top:
        if not top.is_dir:
            raise AccessError(f"{prefix}: not a directory")
        results: list[str] = []
        _match(guard, reopen(top, DIR_FLAGS), top.physical, prefix, rest, results)
    if not results:
        raise AccessError(f"{display}: no match")
    if len(results) > MAX_MATCHES:
        raise AccessError(f"{display}: more than {MAX_MATCHES} matches; narrow the pattern")
    del policy
    return sorted(results)


def _join(prefix: str, name: str) -> str:
    if prefix == ".":
        return name
    return posixpath.join(prefix, name)


def _match(
    guard: CommandGuard, fd: int, physical: str, shown: str, rest: list[str], out: list[str]
) -> None:
    """Match ``rest`` against the directory open as ``fd`` (closed here)."""
    policy = guard.policy
    try:
        part, remaining = rest[0], rest[1:]
        with os.scandir(fd) as iterator:
            entries = sorted(iterator, key=lambda entry: entry.name)
        if part == "**":
            if remaining:
                _match(guard, os.dup(fd), physical, shown, remaining, out)
            else:
                raise AccessError("a pattern cannot end with **; add a name pattern after it")
        matcher = _compile(part) if part != "**" else None
        check_deadline()
        for entry in entries:
            name = entry.name
            if name.startswith(".") and not part.startswith("."):
                continue
            child_physical = f"{physical.rstrip('/')}/{name}"
            if policy.decide(child_physical, Operation.READ) is ActionVerdict.deny:
                continue
            is_dir = stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
            if part == "**":
                if is_dir:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                    _match(guard, child, child_physical, _join(shown, name), rest, out)
                continue
            assert matcher is not None
            if not matcher.fullmatch(name):
                continue
            if not remaining:
                out.append(_join(shown, name))
            elif is_dir:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
                _match(guard, child, child_physical, _join(shown, name), remaining, out)
            if len(out) > MAX_MATCHES:
                return
    finally:
        os.close(fd)
