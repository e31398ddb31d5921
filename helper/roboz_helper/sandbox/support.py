"""Can runs happen on this machine? Probed once per helper process."""

from __future__ import annotations

import os
import platform

from . import init_wire
from .namespaces import CLONE_NEWUSER, MACHINE, RUN_NAMESPACES, map_self, unshare

_cached: tuple[bool, str] | None = None


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _probe_namespaces(rootless: bool) -> str | None:
    """Fork a throw-away child that creates the run's namespaces; None when that works."""
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            if rootless:
                uid, gid = os.geteuid(), os.getegid()
                unshare(CLONE_NEWUSER | RUN_NAMESPACES)
                map_self(0, 0, uid, gid)
            else:
                unshare(RUN_NAMESPACES)
            os._exit(0)
        except BaseException as exc:
            try:
                os.write(w, str(exc).encode()[:1000])
            finally:
                os._exit(1)
    os.close(w)
    try:
        _, status = os.waitpid(pid, 0)
        message = os.read(r, 1000).decode("utf-8", "replace")
    finally:
        os.close(r)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    return message or "namespace probe failed"


def sandbox_support() -> tuple[bool, str]:
    """(True, description) when runs can happen here, else (False, reason)."""
    global _cached
    if _cached is not None:
        return _cached
    if platform.system() != "Linux" or MACHINE != "x86_64":
        _cached = (False, f"needs Linux on x86_64 (seccomp filter and syscall numbers), "
                   f"this is {platform.system()} {MACHINE}")  # fmt: skip
        return _cached
    if not _kernel_at_least(5, 12):
        _cached = (False, "needs Linux >= 5.12 (open_tree/move_mount/mount_setattr)")
        return _cached
    missing = init_wire.missing()
    if missing is not None:
        _cached = (False, missing)
        return _cached
    rootless = os.geteuid() != 0
    error = _probe_namespaces(rootless)
    if error is not None:
        how = "user namespaces (rootless)" if rootless else "namespaces"
        _cached = (False, f"cannot create {how}: {error}")
    elif rootless:
        _cached = (True, "rootless: user namespace; no cgroup limits unless v2 is delegated")
    else:
        _cached = (True, "root: full isolation with cgroup limits")
    return _cached
