"""Dropping every privilege of the run before exec (python-prctl, raw prctl and capset calls).

Order matters and is enforced here:
1. securebits NOROOT, KEEP_CAPS off, NO_SETUID_FIXUP off, no ambient raise -- each *locked*,
   so nothing the run executes can regain capabilities by being (or becoming) uid 0;
2. drop the whole capability bounding set (needs CAP_SETPCAP, so before the uid change);
3. supplementary groups cleared, then gid and uid set (real, effective, saved): with
   NO_SETUID_FIXUP off the kernel clears the permitted and effective sets on the uid change;
4. inheritable and ambient sets cleared explicitly (the uid change does not touch them) and the
   result verified: any capability left is an error, never a silent success;
5. no_new_privs: setuid/setgid/file-capability binaries cannot raise privilege and exec
   transitions cannot gain any.
"""

from __future__ import annotations

import ctypes
import os

import prctl

from . import syscalls as sc

_libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

SECBIT_NOROOT = 1 << 0
SECBIT_NOROOT_LOCKED = 1 << 1
SECBIT_NO_SETUID_FIXUP_LOCKED = 1 << 3
SECBIT_KEEP_CAPS_LOCKED = 1 << 5
SECBIT_NO_CAP_AMBIENT_RAISE = 1 << 6
SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 7
LOCKED_SECUREBITS = (
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED
    | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)  # fmt: skip


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return int(prctl.CAP_LAST_CAP)


LAST_CAP = last_cap()


def _raw_prctl(option: int, arg2: int, arg3: int = 0) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def lock_securebits() -> None:
    # Raw prctl: python-prctl 1.8 rejects the ambient-raise bits it does not know.
    _raw_prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS)


def drop_bounding_set() -> None:
    # Raw prctl: 41 calls through python-prctl's Python wrapper cost ~1 ms in a freshly forked
    # child (copy-on-write faults), and it does not know capabilities newer than its table.
    for cap in range(LAST_CAP + 1):
        _raw_prctl(PR_CAPBSET_DROP, cap)


def clear_capabilities() -> None:
    # Raw calls (one capset for three sets, a plain read to verify): in a freshly forked
    # child, python-prctl's three cap_*.limit() and a text-mode file cost ~0.3 ms more.
    _raw_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    sc.capset_clear()
    verify_no_capabilities()


def verify_no_capabilities() -> None:
    """Read back all five sets from the kernel; anything left is an error."""
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 8192):
            chunks.append(chunk)
    finally:
        os.close(fd)
    for line in b"".join(chunks).splitlines():
        if line.startswith((b"CapInh:", b"CapPrm:", b"CapEff:", b"CapBnd:", b"CapAmb:")):
            _, value = line.split()
            if int(value, 16) != 0:
                raise PermissionError(f"capabilities remain after dropping them: {line!r}")


def become(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise PermissionError("uid/gid change did not take effect")


def drop_all(uid: int, gid: int, rootless: bool) -> None:
    """Steps 1-5 above. Rootless: the ids are already right in the nested user namespace."""
    lock_securebits()
    drop_bounding_set()
    if rootless:
        # setgroups is denied in a rootless user namespace; the uid is already ``uid``.
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    else:
        become(uid, gid)
    if uid == 0 or os.geteuid() == 0:
        raise PermissionError("refusing to run as uid 0")
    clear_capabilities()
    prctl.set_no_new_privs(1)


def set_not_dumpable() -> None:
    """Not dumpable: /proc/PID/{environ,mem,fd...} become root-only and ptrace needs
    CAP_SYS_PTRACE, which nothing in the run has. Must follow every credential change."""
    prctl.set_dumpable(0)
