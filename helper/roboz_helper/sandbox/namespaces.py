"""Which namespaces a run gets, and the user-namespace mappings of a rootless helper.

A root helper unshares mount, pid, network, ipc and uts namespaces in the first child (the pid
namespace applies to that child's children, so the second child is the run's pid 1); the run
process itself later enters a fresh cgroup namespace rooted at its own cgroup.

A helper that is not root first creates a user namespace mapping only its own uid/gid to 0
(so the set-up steps have capabilities there), and the run process creates a second, nested
user namespace mapping the requested uid/gid onto that 0: the run is never uid 0 in any
namespace, and every mount made by the set-up is locked against it.
"""

from __future__ import annotations

import os

from . import syscalls as sc

RUN_NAMESPACES = (
    sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWNET | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
)
HOSTNAME = "roboz-sandbox"


def _write(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def map_self(inside_uid: int, inside_gid: int, outside_uid: int, outside_gid: int) -> None:
    """Write this process's own uid/gid maps (only allowed for the caller's own ids)."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside_uid} {outside_uid} 1\n")
    _write("/proc/self/gid_map", f"{inside_gid} {outside_gid} 1\n")


def enter_run_namespaces(rootless: bool, outer_uid: int, outer_gid: int) -> None:
    if rootless:
        sc.unshare(sc.CLONE_NEWUSER | RUN_NAMESPACES)
        map_self(0, 0, outer_uid, outer_gid)
    else:
        sc.unshare(RUN_NAMESPACES)


def enter_run_user_namespace(uid: int, gid: int) -> None:
    """Rootless only: nest a user namespace in which this process is uid/gid (not 0)."""
    sc.unshare(sc.CLONE_NEWUSER)
    map_self(uid, gid, 0, 0)
