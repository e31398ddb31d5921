"""The seccomp program sandbox-init installs, run in a classic-BPF interpreter against its
specification (the module docstring of seccomp.py) for every system call number and the
arguments that matter. The live sandbox's answers are checked by the identity tests; this
one covers all ~1,000 numbers and both architectures, which no live test could."""

from __future__ import annotations

import errno
import struct

import pytest
from roboz_helper.sandbox import seccomp as sc

AUDIT_ARCH_I386 = 0x40000003
NUMBERS = [*range(1024), sc.X32_SYSCALL_BIT, sc.X32_SYSCALL_BIT + 1, 0x7FFFFFFF, 0xFFFFFFFF]


def run(
    program: bytes, nr: int, arch: int = sc.AUDIT_ARCH_X86_64, args: tuple[int, ...] = ()
) -> int:
    return interpret(program, nr, arch, args)[0]


def interpret(
    program: bytes, nr: int, arch: int = sc.AUDIT_ARCH_X86_64, args: tuple[int, ...] = ()
) -> tuple[int, int]:
    """What the filter returns for one call (struct seccomp_data: nr, arch, ip, six args),
    and after how many instructions."""
    padded = (*args, *(0,) * (6 - len(args)))
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, 0, *padded)
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc, steps = 0, 0, 0
    while True:
        steps += 1
        assert steps <= len(insns), "a loop in a classic BPF program"
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == sc.LD_W_ABS:
            assert k % 4 == 0 and k + 4 <= len(data), k
            (acc,) = struct.unpack_from("<I", data, k)
        elif code == sc.AND_K:
            acc &= k
        elif code in (sc.JEQ_K, sc.JGE_K, sc.JSET_K):
            taken = {sc.JEQ_K: acc == k, sc.JGE_K: acc >= k, sc.JSET_K: bool(acc & k)}[code]
            pc += jt if taken else jf
        elif code == sc.RET_K:
            return k, steps
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        assert pc < len(insns), "jumped past the end"


def expected(nr: int, arch: int = sc.AUDIT_ARCH_X86_64, args: tuple[int, ...] = ()) -> int:
    """The specification, written out plainly."""
    arg = (*args, *(0,) * (6 - len(args)))
    low = [a & 0xFFFFFFFF for a in arg]
    eperm, allow = sc.RET_ERRNO | errno.EPERM, sc.RET_ALLOW
    if arch != sc.AUDIT_ARCH_X86_64 or nr >= sc.X32_SYSCALL_BIT:
        return sc.RET_KILL_PROCESS
    if nr in sc.DENIED.values():
        return eperm
    if nr == sc.NR_CLONE3:
        return sc.RET_ERRNO | errno.ENOSYS
    if nr == sc.NR_CLONE:
        return eperm if low[0] & sc.CLONE_NS_FLAGS else allow
    if nr == sc.NR_IOCTL:
        return eperm if low[1] in (sc.TIOCSTI, sc.TIOCLINUX) else allow
    if nr == sc.NR_SOCKET:
        ok = low[0] in sc.ALLOWED_SOCKET_FAMILIES
        return allow if ok else sc.RET_ERRNO | errno.EAFNOSUPPORT
    if nr in (sc.NR_MKNOD, sc.NR_MKNODAT):
        mode = low[1 if nr == sc.NR_MKNOD else 2] & sc.S_IFMT
        return eperm if mode in (sc.S_IFCHR, sc.S_IFBLK) else allow
    return allow


# Arguments worth trying for the calls the filter looks into (and all-zero for every call).
ARGS = [
    (),
    (sc.CLONE_NS_FLAGS,),
    (0x00010000 | 0x00000100,),  # CLONE_THREAD | CLONE_VM: an ordinary thread
    (0x10000000,),  # CLONE_NEWUSER alone
    (1 << 32 | 0x11,),  # high bits set, low bits SIGCHLD only
    (0, sc.TIOCSTI),
    (0, sc.TIOCLINUX),
    (0, 0x5401),  # TCGETS
    (0, 1 << 32 | sc.TIOCSTI),  # the kernel reads a 32-bit command: still TIOCSTI
    *[(family,) for family in (1, 2, 10, 16, 17, 40, 0, 0xFFFF)],
    (0, sc.S_IFCHR | 0o666),
    (0, sc.S_IFBLK | 0o600),
    (0, 0o010644),  # a FIFO
    (0, 0, sc.S_IFCHR),
    (0, 0, 0o140755),  # a socket
]


def test_every_number_and_architecture_gets_the_specified_answer() -> None:
    for arch in (sc.AUDIT_ARCH_X86_64, AUDIT_ARCH_I386):
        for nr in NUMBERS:
            assert run(sc.PROGRAM, nr, arch) == expected(nr, arch), (hex(arch), nr)


@pytest.mark.parametrize("args", ARGS)
def test_the_argument_checks_get_the_specified_answer(args: tuple[int, ...]) -> None:
    for nr in (sc.NR_CLONE, sc.NR_IOCTL, sc.NR_SOCKET, sc.NR_MKNOD, sc.NR_MKNODAT, 0, 1, 59):
        assert run(sc.PROGRAM, nr, args=args) == expected(nr, args=args), (nr, args)


def test_a_call_is_decided_in_few_steps() -> None:
    """The search tree: the kernel runs the filter for every number when it is installed, and
    the run for every call it cannot cache; a flat list took ~90 comparisons."""
    longest = max(interpret(sc.PROGRAM, nr)[1] for nr in range(1024))
    assert longest <= 20, longest
