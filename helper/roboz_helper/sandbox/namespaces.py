"""Which namespaces a run gets, and the user-namespace mappings of a rootless helper.

sandbox-init makes them all (fork_server.c, init_root.c, init.c): the process that forks the
run's pid 1 (the fork server, or the starter in direct mode) unshares the pid namespace,
which applies to its next child only; that child, pid 1, unshares mount, network, ipc and uts
namespaces for itself; the run process later enters a fresh cgroup namespace rooted at its
own cgroup. Here: the flags (seccomp.py refuses them to the run) and what sandbox_support()
probes with.

A helper that is not root has the starter create a user namespace mapping only its own
uid/gid to 0 (so the set-up steps have capabilities there), and the run process creates a
second, nested user namespace mapping the requested uid/gid onto that 0: the run is never
uid 0 in any namespace, and every mount made by the set-up is locked against it.

``unshare`` is a ctypes call because os.unshare needs Python 3.12; the flags and system call
numbers are x86_64's (``sandbox_support()`` refuses other machines).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

import prctl

from .kernelfiles import write_control

MACHINE = platform.machine()

# unshare(2) / clone(2) flags.
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# What pid 1 of the run unshares for itself (its parent made the pid namespace).
INIT_NAMESPACES = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
RUN_NAMESPACES = INIT_NAMESPACES | CLONE_NEWPID
HOSTNAME = "roboz-sandbox"

_NR_UNSHARE = 272  # x86_64
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def unshare(flags: int) -> None:
    if _libc.syscall(ctypes.c_long(_NR_UNSHARE), ctypes.c_int(flags)) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def map_self(inside_uid: int, inside_gid: int, outside_uid: int, outside_gid: int) -> None:
    """Write this process's own uid/gid maps (only allowed for the caller's own ids).

    A process whose credentials changed (e.g. a helper that dropped from root) is not
    dumpable, which makes its /proc/self files root's: make it dumpable for the writes; pid 1
    and the run set their own dumpable flag afterwards."""
    prctl.set_dumpable(1)
    write_control("/proc/self/setgroups", "deny")
    write_control("/proc/self/uid_map", f"{inside_uid} {outside_uid} 1\n")
    write_control("/proc/self/gid_map", f"{inside_gid} {outside_gid} 1\n")
