"""The Python side of ``sandbox-init`` (init.c, init_root.c, fork_server.c): where the
program is, the configuration and request it reads, how it is started, and its fork server.

A run's pid 1 is ``sandbox-init`` itself, forked in a fresh pid namespace: by the program's
fork server (started once by the zygote, with a SOCK_SEQPACKET socket) in zygote mode, or by
the program started for that one run (with a stream socket) in direct mode; see
fork_server.c. It makes the namespaces and builds the root from the mount plan in its
configuration, then waits for its request; init.c describes both formats, and
tests/sandbox/test_shared_constants.py holds the two sides to the same numbers and layout.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import math
import os
import signal
import socket
import struct
import time
from collections.abc import Sequence
from pathlib import Path

from roboz_helper.run_states import SandboxNetwork

from . import mounts, namespaces, seccomp
from .spec import Bind, ChildPlan, MountPlan, RunFds, SystemLayout

BINARY = Path(__file__).with_name("sandbox-init")
MISSING = (
    f"the sandbox's init program {BINARY} is missing or not executable: it is compiled from "
    "init.c when roboz-helper is installed (needs gcc), so reinstall it "
    "(pip install './helper[daemon]', or scripts/setup.sh in a clone)"
)
# Descriptors of a starting pid 1, and its exit status when set-up fails (init.h).
CTRL_FD, CONFIG_FD, ALIVE_FD, REPORT_FD, POOL_FD = 3, 4, 5, 6, 7
EXIT_SETUP_FAILED = 127
# A run with an allowlist: pid 1 keeps the egress proxy's listener (127.0.0.1:PROXY_PORT of
# the run's namespace) at PROXY_FD (init_root.c).
PROXY_FD, PROXY_PORT = 16, 3128
# The configuration's network byte (init.h NETWORK_*).
NETWORK_CODES: dict[SandboxNetwork, int] = {"none": 0, "loopback": 1, "proxy": 2}
CONFIG_MAGIC = b"RZI2"
# What pid 1 writes on the status pipe once the run is over: C's wait status, CPU time in
# microseconds, peak RSS in bytes; in direct mode the starter writes pid 1's pid first.
STATUS_FORMAT = "=iqq"
PID_FORMAT = "=i"
_HEADER = struct.Struct("<I")
_U32 = struct.Struct("<I")
_LIMIT = struct.Struct("<IQQ")
_VIEW_INODE = struct.Struct("<QQ")
_U64_MASK = (1 << 64) - 1  # RLIM_INFINITY is -1 in Python, all ones on the wire


def missing() -> str | None:
    """Why runs cannot start here, if the program is not installed; None when it is."""
    return None if os.access(BINARY, os.X_OK) else MISSING


def _blob(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def _strs(items: Sequence[str]) -> bytes:
    return _U32.pack(len(items)) + b"".join(_blob(os.fsencode(x)) for x in items)


def _links(items: Sequence[tuple[str, str]]) -> bytes:
    parts = [_U32.pack(len(items))]
    parts += [_blob(os.fsencode(a)) + _blob(os.fsencode(b)) for a, b in items]
    return b"".join(parts)


def _binds(items: Sequence[Bind]) -> bytes:
    parts = [_U32.pack(len(items))]
    parts += [_blob(os.fsencode(b.path)) + _U32.pack(b.attrs) for b in items]
    return b"".join(parts)


def _config(
    uid: int, gid: int, rootless: bool, flags: tuple[bool, bool, int, int], m: MountPlan
) -> bytes:
    prepare_run, report, network, pool = flags
    return b"".join(
        (
            CONFIG_MAGIC,
            struct.pack("<IIBBBBI", uid, gid, rootless, prepare_run, report, network, pool),
            _blob(os.fsencode(m.workdir)),
            _U32.pack(seccomp.INSTRUCTIONS),
            seccomp.PROGRAM,
            _blob(namespaces.HOSTNAME.encode()),
            struct.pack("<QQQ", m.root_size_bytes, m.tmp_size_bytes, m.tmp_inodes),
            struct.pack("<III", mounts.SYS_ATTRS, mounts.DEV_ATTRS, mounts.DEV_DIR_ATTRS),
            _links(m.symlinks),
            _binds(m.system),
            _binds(m.binds),
            _strs(mounts.DEVICES),
            _links(mounts.DEV_LINKS),
            _strs(mounts.PROC_READONLY),
        )
    )


def encode_config(plan: ChildPlan, prepare_run: bool, report: bool, pool: int) -> bytes:
    """What pid 1 is built for: identity, the seccomp filter, the mount plan (without the
    script, which comes with the request), whether it prepares the run process, whether it
    reports set-up failures on the request's set-up pipe, how many pooled cgroup join files
    it writes to."""
    flags = (prepare_run, report, NETWORK_CODES[plan.network], pool)
    return _config(plan.uid, plan.gid, plan.rootless, flags, plan.mounts)


def encode_template(layout: SystemLayout) -> bytes:
    """A configuration the fork server builds the system template from: only its system
    layout is read (the identity and the run's parts are left empty)."""
    empty = MountPlan(layout.symlinks, layout.binds, (), "/", 0, 0, 0)
    return _config(0, 0, False, (False, False, 0, 0), empty)


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
    script_path = plan.mounts.script_path or ""
    script_bytes = plan.mounts.script_bytes or b""
    view = plan.mounts.view
    if script_path or view:
        parts += [_blob(os.fsencode(script_path)), _blob(script_bytes)]
    if view:  # pid 1 applies it before the run exists (apply_view in init_root.c)
        parts.append(_U32.pack(len(view)))
        parts += [
            bytes([entry.kind]) + _blob(entry.path) + _VIEW_INODE.pack(entry.dev, entry.ino)
            for entry in view
        ]
    return b"".join(parts)


def frame_request(body: bytes) -> bytes:
    """The header that goes before a request's body (with its descriptors attached)."""
    return _HEADER.pack(len(body))


def send_request(sock: socket.socket, plan: ChildPlan, fds: RunFds) -> None:
    """Blocking: the header with the run's descriptors attached, then the request."""
    body = encode_request(plan)
    rights = array.array("i", fds.all())
    sock.sendmsg([frame_request(body)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    sock.sendall(body)


def _config_fd(config: bytes) -> int:
    """A sealed memfd holding ``config``: nobody can change it once written, so one can serve
    many pid 1s (each reads it with pread and closes it before anything else runs)."""
    memfd = os.memfd_create("sandbox-init-config", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(config)
        while view:
            view = view[os.write(memfd, view) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(memfd)
        raise
    return memfd


def start_direct(config: bytes, ctrl: int, fds: RunFds, reset_signals: tuple[int, ...]) -> int:
    """Direct mode: start sandbox-init as the starter of one pid 1 (start_direct in
    fork_server.c), with the request socket, its configuration, the run's status and set-up
    pipes at the descriptors it expects; its pid. The caller sends the request on ``ctrl``'s
    other end, to pid 1 itself."""
    memfd = _config_fd(config)
    try:
        sources = {CTRL_FD: ctrl, CONFIG_FD: memfd, ALIVE_FD: fds.status_w, REPORT_FD: fds.setup_w}
        return _execute(sources, reset_signals)
    finally:
        os.close(memfd)


def signals_to_reset() -> tuple[int, ...]:
    """Every signal this process handles or ignores (Python ignores SIGPIPE and SIGXFSZ, and
    exec keeps ignored signals ignored): sandbox-init starts with their defaults."""
    out = []
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(sig) not in (signal.SIG_DFL, None):
                out.append(sig)
    return tuple(out)


def _execute(sources: dict[int, int], reset_signals: tuple[int, ...]) -> int:
    """vfork and exec sandbox-init with ``sources`` (target -> descriptor) in place, default
    signal dispositions, an empty signal mask and an empty environment: its pid."""
    high: list[int] = []
    try:
        actions = []
        for target, fd in sources.items():  # copied above the targets first: no clobbering
            high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, max(sources) + 1))
            actions.append((os.POSIX_SPAWN_DUP2, high[-1], target))
        return os.posix_spawn(
            BINARY, ["sandbox-init"], {}, file_actions=actions, setsigdef=reset_signals,
            setsigmask=(),
        )  # fmt: skip
    finally:
        for fd in high:
            os.close(fd)


_SPAWN = struct.Struct("<BB")
_ANSWER = struct.Struct("<i")
TEMPLATE_REQUEST = ord("T")
MAX_POOL = 8  # pooled cgroup join files a pid 1 takes at most (fork_server.c)


class ForkServer:
    """The zygote's handle on sandbox-init's fork server (fork_server.c): started on first
    use and again if it died; blocking, one request at a time. Its children are its own to
    reap: the caller gets a pidfd of each. It keeps the system template in its own mount
    namespace when asked to (``refresh_template``), rebuilt when LAYOUT_TTL_S old."""

    def __init__(self, reset_signals: tuple[int, ...]) -> None:
        self.reset_signals = reset_signals
        self.sock: socket.socket | None = None
        self.pid = 0
        # The last configuration and its sealed memfd: pid 1s of one shape share it.
        self._config = b""
        self._config_fd = -1
        # This server's template build (time.monotonic(); None: it has none).
        self.template_built_at: float | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.pid = _execute({CTRL_FD: theirs.fileno()}, self.reset_signals)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.template_built_at = None  # a new mount namespace: no template in it yet
        return ours

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()  # EOF: it exits
            self.sock = None

    def refresh_template(self) -> bool:
        """Build the system template if this server has none or it is LAYOUT_TTL_S old, so
        that a replaced file (a new /etc/passwd) reaches later runs; False when the server
        cannot (runs then bind every system path themselves, and the caller stops asking)."""
        now = time.monotonic()
        if self.template_built_at is not None and now - self.template_built_at < (
            mounts.LAYOUT_TTL_S
        ):
            return True
        config = _config_fd(encode_template(mounts.system_layout()))
        try:
            answer, got = self._request(_SPAWN.pack(TEMPLATE_REQUEST, 0), [config])
        finally:
            os.close(config)
        for fd in got:
            os.close(fd)
        self.template_built_at = time.monotonic() if answer == 0 else None
        return answer == 0

    def template_expires_at(self) -> float:
        """When a sandbox cloned from the current build must no longer be used (the build is
        replaced at the first request after that)."""
        if self.template_built_at is None:
            return math.inf  # no template: runs bind the system paths themselves
        return self.template_built_at + mounts.LAYOUT_TTL_S

    def spawn(
        self, config: bytes, ctrl: int, alive_r: int, report_fd: int, pool_fds: tuple[int, ...]
    ) -> tuple[int, int]:
        """A pid 1 in a fresh pid namespace with these descriptors at 3-7 (see init.c):
        (pid, pidfd). Once more with a new server if this one is gone; OSError when it
        cannot."""
        if config != self._config:
            memfd = _config_fd(config)
            if self._config_fd >= 0:
                os.close(self._config_fd)
            self._config, self._config_fd = config, memfd
        fds = [ctrl, self._config_fd, alive_r, *([report_fd] if report_fd >= 0 else []),
               *pool_fds]  # fmt: skip
        answer, got = self._request(_SPAWN.pack(report_fd >= 0, len(pool_fds)), fds)
        if answer > 0 and len(got) == 1:
            return answer, got[0]
        for fd in got:
            os.close(fd)
        if answer >= 0:
            raise OSError("the sandbox fork server sent no pidfd")
        why = os.strerror(-answer)
        raise OSError(-answer, f"the sandbox fork server could not fork: {why}")

    def _request(self, head: bytes, fds: list[int]) -> tuple[int, list[int]]:
        """One message and its answer; once more with a new server if this one is gone."""
        for attempt in (1, 2):
            sock = self.sock or self._start()
            try:
                return self._ask(sock, head, fds)
            except (EOFError, ConnectionError):
                self.stop()
                if attempt == 2:
                    raise OSError("the sandbox fork server died") from None
        raise AssertionError("unreachable")

    @staticmethod
    def _ask(sock: socket.socket, head: bytes, fds: list[int]) -> tuple[int, list[int]]:
        sock.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data, ancdata, _, _ = sock.recvmsg(
            _ANSWER.size, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
        )
        if not data:
            raise EOFError
        got = [fd for level, kind, payload in ancdata
               if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
               for fd in array.array("i", payload[: len(payload) - len(payload) % 4])]  # fmt: skip
        (answer,) = _ANSWER.unpack(data)
        return answer, got
