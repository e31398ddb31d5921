"""The run's seccomp filter, built here as a classic BPF program.

Why hand-built rather than pyseccomp/libseccomp: the policy is a short deny-list with four
argument checks on one architecture, which is ~200 BPF instructions we can read in full and
test directly; building it ourselves keeps the trusted helper free of another ctypes binding,
the program is assembled once at import (in the parent) and handed as bytes to sandbox-init,
which installs it with one ``seccomp(2)`` call in pid 1 and in the run process. The numbers
it looks at are searched as a binary tree (see ``_search``).
What libseccomp would add (multi-arch tables, optimised jump trees) we do not need: the filter
is x86_64-only and kills anything else.

Layout:
- wrong architecture (i386 via int 0x80, anything not AUDIT_ARCH_X86_64): kill the process;
- x32 ABI numbers (bit 30 set): kill the process (x32 would otherwise alias every syscall);
- a deny-list answered with ``EPERM`` (``SECCOMP_RET_ERRNO``): programs see a normal
  "Operation not permitted" and can report it; the completion's diagnostic names the filter;
- ``clone`` with any namespace flag, all of ``unshare``/``setns``: EPERM; ``clone3`` gets
  ``ENOSYS`` because its flags live in memory the filter cannot read (glibc then falls back to
  ``clone``, whose flags we can check);
- ``ioctl`` TIOCSTI / TIOCLINUX (terminal input injection): EPERM;
- ``socket`` outside AF_UNIX/AF_INET/AF_INET6/AF_NETLINK (e.g. AF_VSOCK reaches the VM's
  hypervisor, AF_PACKET raw frames): EAFNOSUPPORT;
- ``mknod``/``mknodat`` of character or block devices: EPERM (FIFOs and sockets stay allowed);
- everything else: allowed.
"""

from __future__ import annotations

import errno
import struct

from . import namespaces as ns

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# BPF opcodes.
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K

OFF_NR = 0
OFF_ARCH = 4


def _arg_lo(index: int) -> int:
    """Offset of the low 32 bits of args[index] in struct seccomp_data (little endian)."""
    return 16 + 8 * index


# Denied outright (x86_64 numbers). Grouped by why.
DENIED: dict[str, int] = {
    # kernel attack surface with a history of sandbox escapes
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
    # key management: keyrings are not namespaced per run
    "keyctl": 250, "add_key": 248, "request_key": 249,
    # inspecting or controlling other processes
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_getfd": 438, "process_madvise": 440,
    # the filesystem view
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467,
    "open_by_handle_at": 304, "name_to_handle_at": 303,
    "swapon": 167, "swapoff": 168, "quotactl": 179, "quotactl_fd": 443,
    "fanotify_init": 300,
    # namespaces
    "unshare": 272, "setns": 308,
    # host-wide state: clock, names, kernel, modules, accounting, logs
    "sethostname": 170, "setdomainname": 171,
    "clock_settime": 227, "clock_adjtime": 305, "settimeofday": 164, "adjtimex": 159,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
    "init_module": 175, "finit_module": 313, "delete_module": 176,
    "acct": 163, "syslog": 103, "vhangup": 153, "iopl": 172, "ioperm": 173,
    "lookup_dcookie": 212, "uselib": 134, "_sysctl": 156, "personality": 135,
    "nfsservctl": 180, "move_pages": 279, "migrate_pages": 256,
}  # fmt: skip

NR_CLONE = 56
NR_CLONE3 = 435
NR_IOCTL = 16
NR_SOCKET = 41
NR_MKNOD = 133
NR_MKNODAT = 259

CLONE_NS_FLAGS = (
    ns.CLONE_NEWNS | ns.CLONE_NEWCGROUP | ns.CLONE_NEWUTS | ns.CLONE_NEWIPC
    | ns.CLONE_NEWUSER | ns.CLONE_NEWPID | ns.CLONE_NEWNET | 0x00000080  # CLONE_NEWTIME
)  # fmt: skip
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
ALLOWED_SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
S_IFMT = 0o170000
S_IFCHR = 0o020000
S_IFBLK = 0o060000

DENIAL_NOTE = (
    "the sandbox's seccomp filter answers EPERM to io_uring, perf_event_open, bpf, keyctl/"
    "add_key/request_key, ptrace, mount and friends, chroot, unshare/setns and namespace "
    "clone flags, sethostname, clock_settime, kexec, module loading, device mknod, "
    "open_by_handle_at and the TIOCSTI ioctl"
)


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


# A system call the filter looks at, and the instructions that decide it once the call's
# number is known to be ``nr`` (the accumulator holds the number): each returns, or falls
# through to allow the call.
Decision = tuple[int, list[bytes]]
LEAF_SIZE = 4  # numbers compared one by one at the bottom of the search tree


def _decisions() -> list[Decision]:
    eperm = _ins(RET_K, 0, 0, RET_ERRNO | errno.EPERM)
    out: list[Decision] = [(nr, [eperm]) for nr in DENIED.values()]
    out.append((NR_CLONE3, [_ins(RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)]))

    def on_arg(arg: int, *body: bytes) -> list[bytes]:
        return [_ins(LD_W_ABS, 0, 0, _arg_lo(arg)), *body, _ins(RET_K, 0, 0, RET_ALLOW)]

    out.append((NR_CLONE, on_arg(0, _ins(JSET_K, 0, 1, CLONE_NS_FLAGS), eperm)))
    ioctl = [_ins(JEQ_K, 1, 0, TIOCSTI), _ins(JEQ_K, 0, 1, TIOCLINUX), eperm]
    out.append((NR_IOCTL, on_arg(1, *ioctl)))
    fams = ALLOWED_SOCKET_FAMILIES
    socket = [_ins(JEQ_K, len(fams) - i, 0, fam) for i, fam in enumerate(fams)]
    socket.append(_ins(RET_K, 0, 0, RET_ERRNO | errno.EAFNOSUPPORT))
    out.append((NR_SOCKET, on_arg(0, *socket)))
    device = [_ins(AND_K, 0, 0, S_IFMT), _ins(JEQ_K, 1, 0, S_IFCHR), _ins(JEQ_K, 0, 1, S_IFBLK)]
    for nr, arg in ((NR_MKNOD, 1), (NR_MKNODAT, 2)):
        out.append((nr, on_arg(arg, *device, eperm)))
    numbers = [nr for nr, _ in out]
    assert len(set(numbers)) == len(numbers), "a system call decided twice"
    return sorted(out, key=lambda d: d[0])


def _search(decisions: list[Decision]) -> list[bytes]:
    """A binary search over the sorted numbers (``nr >= pivot``: right half), each leaf a few
    comparisons; a number not found is allowed. Why a tree: the kernel, when it installs a
    filter, runs it for every system call number to find the ones it may always allow
    without running it again (the action cache); down a flat list of ~80 comparisons that cost
    ~0.1 ms per installation, and sandbox-init installs it twice per run."""
    if len(decisions) <= LEAF_SIZE:
        out: list[bytes] = []
        for nr, then in decisions:
            out += [_ins(JEQ_K, 0, len(then), nr), *then]
        return [*out, _ins(RET_K, 0, 0, RET_ALLOW)]
    mid = len(decisions) // 2
    low, high = _search(decisions[:mid]), _search(decisions[mid:])
    assert len(low) <= 255, "a jump of classic BPF reaches 255 instructions at most"
    return [_ins(JGE_K, len(low), 0, decisions[mid][0]), *low, *high]


def build_program() -> list[bytes]:
    return [
        _ins(LD_W_ABS, 0, 0, OFF_ARCH),
        _ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _ins(RET_K, 0, 0, RET_KILL_PROCESS),
        _ins(LD_W_ABS, 0, 0, OFF_NR),
        _ins(JGE_K, 0, 1, X32_SYSCALL_BIT),
        _ins(RET_K, 0, 0, RET_KILL_PROCESS),
        *_search(_decisions()),
    ]


_PROGRAM = build_program()
PROGRAM = b"".join(_PROGRAM)  # what sandbox-init installs (init_wire.encode_config)
INSTRUCTIONS = len(_PROGRAM)
