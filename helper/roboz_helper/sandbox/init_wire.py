"""The Python side of ``sandbox-init`` (init.c): where the program is, the configuration and
request it reads, and the exec into it.

pid 1 of a run is forked (from the zygote, or from the helper's set-up child) as Python, builds
the namespaces and the root filesystem (child.py, mounts.py), then executes ``sandbox-init``
through a descriptor opened before the root existed (the sandbox has no path to it). From
there on nothing of a run is a fork of a Python heap: see init.c for why and for the formats.
"""

from __future__ import annotations

import array
import os
import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import seccomp
from . import syscalls as sc
from .spec import SandboxError

if TYPE_CHECKING:
    from .child import ChildPlan

BINARY = Path(__file__).with_name("sandbox-init")
MISSING = (
    f"the sandbox's init program {BINARY} is missing or not executable: it is compiled from "
    "init.c when roboz-helper is installed (needs gcc), so reinstall it "
    "(pip install './helper[daemon]', or scripts/setup.sh in a clone)"
)
CTRL_FD, CONFIG_FD, ALIVE_FD, EXE_FD = 3, 4, 5, 6
_HEADER = struct.Struct("<I")
_U32 = struct.Struct("<I")
_LIMIT = struct.Struct("<IQQ")
_U64_MASK = (1 << 64) - 1  # RLIM_INFINITY is -1 in Python, all ones on the wire

_exe_fd = -1


def missing() -> str | None:
    """Why runs cannot start here, if the program is not installed; None when it is."""
    return None if os.access(BINARY, os.X_OK) else MISSING


def exe_fd() -> int:
    """An O_PATH descriptor of the program, opened once, in the parent, before any fork."""
    global _exe_fd
    if _exe_fd < 0:
        try:
            _exe_fd = os.open(BINARY, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SandboxError(MISSING) from None
    return _exe_fd


def opened_exe_fd() -> int:
    """In a forked child: the descriptor the parent opened (-1 if none)."""
    return _exe_fd


def _blob(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def encode_config(plan: ChildPlan, prepare_run: bool) -> bytes:
    return b"".join(
        (
            b"RZI1",
            struct.pack("<IIBB", plan.uid, plan.gid, plan.rootless, prepare_run),
            _blob(os.fsencode(plan.mounts.workdir)),
            _U32.pack(seccomp.INSTRUCTIONS),
            seccomp.PROGRAM,
        )
    )


def encode_request(plan: ChildPlan) -> bytes:
    parts = [bytes([plan.in_cgroup]), _U32.pack(len(plan.rlimits))]
    parts += [
        _LIMIT.pack(res, soft & _U64_MASK, hard & _U64_MASK) for res, soft, hard in plan.rlimits
    ]
    parts.append(_blob(os.fsencode(plan.exec_path)))
    parts.append(_U32.pack(len(plan.exec_argv)))
    parts += [_blob(os.fsencode(arg)) for arg in plan.exec_argv]
    parts.append(_U32.pack(len(plan.env)))
    parts += [_blob(os.fsencode(f"{k}={v}")) for k, v in plan.env.items()]
    script_path = plan.mounts.script_path
    if script_path is not None and plan.mounts.script_bytes is not None:
        parts += [_blob(os.fsencode(script_path)), _blob(plan.mounts.script_bytes)]
    return b"".join(parts)


def send_request(sock: socket.socket, plan: ChildPlan) -> None:
    """Blocking: the header with the plan's descriptors attached, then the request."""
    body = encode_request(plan)
    fds = array.array("i", (plan.stdout_w, plan.stderr_w, plan.setup_w, plan.status_w,
                            *plan.cgroup_procs_fds))  # fmt: skip
    sock.sendmsg([_HEADER.pack(len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    sock.sendall(body)


def exec_init(ctrl: int, alive_r: int, config: bytes) -> NoReturn:
    """In pid 1, once the root is built: become sandbox-init, with the request socket, the
    configuration and the alive pipe at the descriptors it expects and nothing else open but
    0-2 (the exec closes the program's own descriptor)."""
    config_r, config_w = os.pipe()
    os.write(config_w, config)  # well below a pipe's buffer
    os.close(config_w)
    high = [os.dup(fd) for fd in (ctrl, config_r, alive_r, _exe_fd)]  # out of 3-6's way
    for target, fd in zip((CTRL_FD, CONFIG_FD, ALIVE_FD), high, strict=False):
        os.dup2(fd, target)
    os.dup2(high[3], EXE_FD, inheritable=False)
    sc.close_from(EXE_FD + 1)
    os.execve(EXE_FD, ["sandbox-init"], {})
    raise AssertionError("unreachable")
