"""Raw Linux system calls the standard library lacks (or lacks on Python 3.11).

Everything here is a thin ctypes call into libc's ``syscall(2)`` wrapper, resolved once at import
so that the forked child (see ``child.py``) only performs foreign calls and never loads anything.
Each wrapper raises ``OSError`` with the kernel's errno and the call's name.

Syscall numbers are x86_64's; ``sandbox_support()`` refuses other architectures rather than
guessing numbers (the seccomp filter is architecture-checked the same way).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

MACHINE = platform.machine()

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

# x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl).
NR = {
    "pivot_root": 155,
    "sethostname": 170,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "mount_setattr": 442,
    "close_range": 436,
}

# unshare(2) / clone(2) flags.
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# mount(2) flags.
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MNT_DETACH = 0x2

# open_tree / move_mount / mount_setattr (new mount API, Linux >= 5.12 for mount_setattr).
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOVE_MOUNT_T_EMPTY_PATH = 0x40
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8

# keyctl(2)


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _check(result: int, name: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return result


def _c(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def unshare(flags: int) -> None:
    _check(_syscall(NR["unshare"], ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_syscall(NR["setns"], ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    res = _libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data))
    _check(res, f"mount {target}")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(_c(target), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_syscall(NR["pivot_root"], _c(new_root), _c(put_old)), "pivot_root")


def open_tree(dirfd: int, path: str, flags: int) -> int:
    return _check(
        _syscall(NR["open_tree"], ctypes.c_int(dirfd), _c(path), ctypes.c_uint(flags)), "open_tree"
    )


def move_mount(from_fd: int, from_path: str, to_fd: int, to_path: str, flags: int) -> None:
    res = _syscall(
        NR["move_mount"],
        ctypes.c_int(from_fd),
        _c(from_path),
        ctypes.c_int(to_fd),
        _c(to_path),
        ctypes.c_uint(flags),
    )
    _check(res, "move_mount")


def mount_setattr(dirfd: int, path: str, flags: int, attr_set: int, attr_clr: int = 0) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    res = _syscall(
        NR["mount_setattr"],
        ctypes.c_int(dirfd),
        _c(path),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(res, "mount_setattr")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_syscall(NR["sethostname"], raw, ctypes.c_size_t(len(raw))), "sethostname")


def close_from(lowfd: int) -> None:
    """Close every descriptor >= lowfd (close_range(2); falls back to os.closerange)."""
    if _syscall(NR["close_range"], ctypes.c_uint(lowfd), ctypes.c_uint(0xFFFFFFFF), 0) < 0:
        os.closerange(lowfd, os.sysconf("SC_OPEN_MAX"))
