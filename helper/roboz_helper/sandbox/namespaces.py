"""Which namespaces a run gets, and the user-namespace mappings of a rootless helper.

The process that forks the run's pid 1 (the zygote, or a first child of the helper) unshares
the pid namespace, which applies to its next child only; that child, pid 1, unshares mount,
network, ipc and uts namespaces for itself; the run process later enters a fresh cgroup
namespace rooted at its own cgroup.

A helper that is not root first creates a user namespace mapping only its own uid/gid to 0
(so the set-up steps have capabilities there), and the run process creates a second, nested
user namespace mapping the requested uid/gid onto that 0: the run is never uid 0 in any
namespace, and every mount made by the set-up is locked against it.
"""

from __future__ import annotations

import prctl

from . import syscalls as sc
from .kernelfiles import write_control

# What pid 1 of the run unshares for itself (its parent made the pid namespace).
INIT_NAMESPACES = sc.CLONE_NEWNS | sc.CLONE_NEWNET | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
RUN_NAMESPACES = INIT_NAMESPACES | sc.CLONE_NEWPID
HOSTNAME = "roboz-sandbox"


def map_self(inside_uid: int, inside_gid: int, outside_uid: int, outside_gid: int) -> None:
    """Write this process's own uid/gid maps (only allowed for the caller's own ids).

    A process whose credentials changed (e.g. a helper that dropped from root) is not
    dumpable, which makes its /proc/self files root's: make it dumpable for the writes; pid 1
    and the run set their own dumpable flag afterwards."""
    prctl.set_dumpable(1)
    write_control("/proc/self/setgroups", "deny")
    write_control("/proc/self/uid_map", f"{inside_uid} {outside_uid} 1\n")
    write_control("/proc/self/gid_map", f"{inside_gid} {outside_gid} 1\n")


def enter_pid_namespace(rootless: bool, outer_uid: int, outer_gid: int) -> None:
    """Make the next child the pid 1 of a new pid namespace (rootless: inside a new user
    namespace in which this process is 0, so that the child can create the others)."""
    if rootless:
        sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWPID)
        map_self(0, 0, outer_uid, outer_gid)
    else:
        sc.unshare(sc.CLONE_NEWPID)
