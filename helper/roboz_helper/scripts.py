"""Finding scripts under a profile's scripts directory without ever following a symlink.

A client names a script by a relative path. The path is resolved exactly once, component by
component from a directory fd with O_NOFOLLOW, and the final open yields the descriptor the
sandbox executes, so nothing can be swapped between the check and the exec.

Every directory on the way and the script itself must be trusted (see untrusted_reason):
whoever can change a script decides what every client of the profile runs.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass

MAX_PATH_BYTES = 1024
MAX_LISTED = 1000
_DESCRIPTION_PEEK = 4096
_CODING = re.compile(rb"^#.*coding[:=]\s*[-\w.]+")


class ScriptRefused(ValueError):
    """The requested script path is not acceptable; the message says why."""


def untrusted_reason(info: os.stat_result) -> str | None:
    """Why a scripts directory or script must not be used, or None if it may.

    Only root, or the helper's own user when it runs rootless, may own it, and nobody else may
    write to it.
    """
    if info.st_uid not in (0, os.geteuid()):
        return f"is owned by uid {info.st_uid}; only root (or the helper's own user) may own it"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(info.st_mode)
        return f"is writable by group or others (mode {mode:#o}); only its owner may write it"
    return None


def _check_trusted(fd: int, what: str) -> None:
    reason = untrusted_reason(os.fstat(fd))
    if reason is not None:
        raise ScriptRefused(f"{what} {reason}")


def check_relative_path(path: str) -> list[str]:
    """Split a client-supplied script path into components, refusing anything tricky."""
    if not path:
        raise ScriptRefused("empty script path")
    if "\0" in path:
        raise ScriptRefused("script path contains a NUL byte")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise ScriptRefused("script path is too long")
    if path.startswith("/"):
        raise ScriptRefused(f"script path must be relative to the scripts directory: {path!r}")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ScriptRefused(f"script path may not contain '..', '.' or '//': {path!r}")
    return parts


def open_script(scripts_dir: str, path: str) -> int:
    """Open a script for execution; returns an O_RDONLY, close-on-exec fd the caller owns.

    Each directory is opened relative to its parent with O_NOFOLLOW, so a symlink anywhere in
    the path (ELOOP/ENOTDIR) is refused rather than followed; the last open also refuses FIFOs
    and devices by checking the opened file, not the name.
    """
    parts = check_relative_path(path)
    nofollow_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(scripts_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ScriptRefused(f"scripts directory unavailable: {exc.strerror}") from None
    try:
        _check_trusted(dir_fd, f"the scripts directory {scripts_dir}")
        for i, part in enumerate(parts[:-1]):
            try:
                next_fd = os.open(part, nofollow_dir, dir_fd=dir_fd)
            except OSError as exc:
                raise ScriptRefused(_explain(path, part, exc)) from None
            os.close(dir_fd)
            dir_fd = next_fd
            _check_trusted(dir_fd, f"the directory {'/'.join(parts[: i + 1])!r}")
        try:
            # O_NONBLOCK: opening a FIFO must not hang the helper; the fstat below refuses it.
            fd = os.open(
                parts[-1],
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            raise ScriptRefused(_explain(path, parts[-1], exc)) from None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ScriptRefused(f"not a regular file: {path!r}")
        if not info.st_mode & 0o111:
            raise ScriptRefused(f"script is not executable: {path!r}")
        _check_trusted(fd, f"script {path!r}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _explain(path: str, part: str, exc: OSError) -> str:
    # O_NOFOLLOW reports a symlink as ELOOP; ENOTDIR is a symlink or a file used as a directory.
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return f"script path goes through a symlink or non-directory ({part!r}): {path!r}"
    if exc.errno == errno.ENOENT:
        return f"no such script: {path!r}"
    return f"cannot open script {path!r}: {exc.strerror}"


@dataclass(frozen=True)
class ScriptInfo:
    name: str
    description: str


def describe(head: bytes) -> str:
    """The first comment line after an optional shebang, without its '#'."""
    lines = head.split(b"\n")
    if lines and lines[0].startswith(b"#!"):
        lines = lines[1:]
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if _CODING.match(line):
            continue  # a Python encoding declaration describes the file, not the script
        if line.startswith(b"#"):
            return line.lstrip(b"#").strip().decode("utf-8", "replace")
        return ""
    return ""


def list_scripts(scripts_dir: str) -> list[ScriptInfo]:
    """The scripts open_script would run: trusted, regular, executable files under scripts_dir
    (recursively, symlinks and untrusted directories skipped), sorted."""
    found: list[ScriptInfo] = []
    # fwalk hands out directory fds, so reading a description opens relative to the directory
    # that was listed, not to a path that could have been swapped for a symlink meanwhile.
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(scripts_dir, follow_symlinks=False):
        if untrusted_reason(os.fstat(dir_fd)) is not None:
            dirnames[:] = []  # nothing below it could be run either
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = os.path.relpath(dirpath, scripts_dir)
        for name in sorted(filenames):
            if name.startswith(".") or len(found) >= MAX_LISTED:
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not _is_utf8(rel):
                continue  # the protocol carries UTF-8 names; such a file could not be asked for
            head = _read_head(name, dir_fd)
            if head is not None:
                found.append(ScriptInfo(name=rel, description=describe(head)))
    found.sort(key=lambda s: s.name)
    return found


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")  # os.fwalk hands out undecodable bytes as lone surrogates
    except UnicodeEncodeError:
        return False
    return True


def _read_head(name: str, dir_fd: int) -> bytes | None:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
        )
    except OSError:
        return None  # symlinks (ELOOP), races and unreadable files are simply not listed
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not info.st_mode & 0o111:
            return None
        if untrusted_reason(info) is not None:
            return None
        return os.read(fd, _DESCRIPTION_PEEK)
    except OSError:
        return None
    finally:
        os.close(fd)
