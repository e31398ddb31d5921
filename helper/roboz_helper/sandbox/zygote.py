"""A small pre-started process that forks the runs (the "zygote").

Why: forking the helper itself costs in proportion to the helper's heap (every page the child
touches is copied), and the helper is a multi-threaded asyncio program, where ``fork`` is only
safe because the child keeps to self-contained work. The zygote is started once (lazily, with
``python -c "...zygote import main; main()"``), imports only this package, freezes its heap
for the garbage collector and is single-threaded; forking it is cheap and clean. It dies with
the helper (PDEATHSIG), and its children die with it, so a crashed helper leaves no runs.

Protocol on a private socketpair (only the helper holds the other end): the helper sends a
header ``<u32 length>`` carrying the run's descriptors (stdout, stderr, set-up and status
pipes, cgroup.procs files) as SCM_RIGHTS, then ``length`` bytes of msgspec-encoded
``ChildPlan``; the zygote forks the run's pid 1 into a fresh pid namespace (``unshare``, fork,
``setns`` back) and answers ``<i32 pid>`` plus a pidfd of it, or
``<i32 -1>`` followed by an error text. Requests are serialised by the helper.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import gc
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import msgspec
import prctl

from . import child, mounts, network
from . import syscalls as sc

HEADER = struct.Struct("=I")
REPLY = struct.Struct("=i")
MAX_FDS = 16
MAX_PLAN_BYTES = 16 * 1024 * 1024
ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder(child.ChildPlan)


def plan_fds(plan: child.ChildPlan) -> list[int]:
    return [plan.stdout_w, plan.stderr_w, plan.setup_w, plan.status_w, *plan.cgroup_procs_fds]


def with_fds(plan: child.ChildPlan, fds: list[int]) -> child.ChildPlan:
    return dataclasses.replace(
        plan,
        stdout_w=fds[0],
        stderr_w=fds[1],
        setup_w=fds[2],
        status_w=fds[3],
        cgroup_procs_fds=tuple(fds[4:]),
    )


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _reap(_signum: int = 0, _frame: object = None) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


TEMPLATE_AT = "/dev/shm"  # in the zygote's own mount namespace only; never a bind source


class Template:
    """The prepared system tree (see mounts.build_template), rebuilt when it gets old so that
    replaced files such as /etc/passwd are seen by later runs."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.built_at = 0.0
        try:
            # Our own mount namespace, a slave of the host's: host mounts still show up here,
            # nothing we mount shows up there.
            sc.unshare(sc.CLONE_NEWNS)
            sc.mount(None, "/", None, sc.MS_REC | sc.MS_SLAVE, None)
        except OSError:
            return
        self.usable = os.path.isdir(TEMPLATE_AT)

    usable = False

    def current(self) -> str | None:
        if not self.usable:
            return None
        if self.path is not None and time.monotonic() - self.built_at < mounts.LAYOUT_TTL_S:
            return self.path
        try:
            if self.path is not None:
                sc.umount2(self.path, sc.MNT_DETACH)
                self.path = None
            mounts.build_template(TEMPLATE_AT)
        except (OSError, mounts.SandboxError):
            self.usable = False  # runs then bind every system path themselves
            return None
        self.path = TEMPLATE_AT
        self.built_at = time.monotonic()
        return self.path


def serve(sock: socket.socket) -> None:
    """The zygote's loop: one request, one fork, one reply. The child is directly the run's
    pid 1; its exit (observed through the pidfd) means every process of the run is gone."""
    me = os.getpid()
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    # Children get the read end; we hold the write end for life (EOF there = we are gone).
    alive_r, _alive_w = os.pipe2(os.O_CLOEXEC)
    template = Template()
    while True:
        try:
            # MSG_CMSG_CLOEXEC: received descriptors must not survive the run's exec.
            data, ancdata, _, _ = sock.recvmsg(
                HEADER.size, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
            )
        except InterruptedError:
            continue
        if not data:
            return
        fds: list[int] = []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(payload[: len(payload) - (len(payload) % arr.itemsize)])
                fds.extend(arr)
        try:
            if len(data) < HEADER.size:
                data += _recv_exactly(sock, HEADER.size - len(data))
            (length,) = HEADER.unpack(data)
            if length > MAX_PLAN_BYTES:
                raise ValueError("plan too large")
            plan = with_fds(DECODER.decode(_recv_exactly(sock, length)), fds)
            plan = dataclasses.replace(
                plan,
                helper_pid=me,
                reset_signals=child.signals_to_reset(),
                mounts=dataclasses.replace(plan.mounts, template=template.current()),
            )
            network.prepare(plan.network)
            # No reaping between fork and pidfd_open, so the pid cannot be recycled meanwhile.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
            try:
                # The next child is pid 1 of a new pid namespace; then back to our own, so
                # that the namespace of the following run is a fresh one again.
                sc.unshare(sc.CLONE_NEWPID)
                try:
                    pid = os.fork()
                    if pid == 0:
                        sock.close()
                        child.stage_b(plan, alive_r)
                finally:
                    sc.setns(own_pidns, sc.CLONE_NEWPID)
                pidfd = os.pidfd_open(pid)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            try:
                sock.sendmsg(
                    [REPLY.pack(pid)],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))],
                )
            finally:
                os.close(pidfd)
        except EOFError:
            return
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}".encode()[:4000]
            sock.sendall(REPLY.pack(-1) + HEADER.pack(len(text)) + text)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


class Zygote:
    """The helper's handle on its zygote (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.pathsep.join(p for p in sys.path if p)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(theirs.fileno()), str(os.getpid())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path},
            )
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours

    def _stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(1)
            self.proc = None

    def _lock_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    async def spawn(self, plan: child.ChildPlan) -> tuple[int, int]:
        """Fork the run's pid 1 in the zygote: (pid, pidfd). Retries once on a dead zygote;
        raises OSError when it cannot be used (the caller then forks the helper itself)."""
        loop = asyncio.get_running_loop()
        async with self._lock_for(loop):
            for attempt in (1, 2):
                if self.sock is None or self.proc is None or self.proc.poll() is not None:
                    self._stop()
                    self._start()
                try:
                    return await self._request(loop, plan)
                except (EOFError, BrokenPipeError, ConnectionError):
                    self._stop()
                    if attempt == 2:
                        raise OSError("the sandbox zygote died") from None
        raise AssertionError("unreachable")

    async def _request(
        self, loop: asyncio.AbstractEventLoop, plan: child.ChildPlan
    ) -> tuple[int, int]:
        assert self.sock is not None
        sock = self.sock
        body = ENCODER.encode(
            dataclasses.replace(
                plan, stdout_w=-1, stderr_w=-1, setup_w=-1, status_w=-1, cgroup_procs_fds=()
            )
        )
        fds = array.array("i", plan_fds(plan))
        sock.setblocking(True)
        try:
            sock.sendmsg([HEADER.pack(len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            sock.sendall(body)
        finally:
            sock.setblocking(False)
        data, anc = await self._recv(loop, sock, REPLY.size)
        (pid,) = REPLY.unpack(data)
        if pid < 0:
            (n,) = HEADER.unpack((await self._recv(loop, sock, HEADER.size))[0])
            text = (await self._recv(loop, sock, n))[0].decode("utf-8", "replace")
            raise OSError(f"the sandbox zygote could not fork the run: {text}")
        pidfds = [fd for fd in anc]
        if len(pidfds) != 1:
            for fd in pidfds:
                os.close(fd)
            raise OSError("the sandbox zygote sent no pidfd")
        return pid, pidfds[0]

    @staticmethod
    async def _recv(
        loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int
    ) -> tuple[bytes, list[int]]:
        buf = b""
        fds: list[int] = []
        while len(buf) < n:
            try:
                data, ancdata, _, _ = sock.recvmsg(
                    n - len(buf), socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_reader(sock.fileno(), _resolve, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(sock.fileno())
                continue
            if not data:
                raise EOFError
            buf += data
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    arr = array.array("i")
                    arr.frombytes(payload[: len(payload) - (len(payload) % arr.itemsize)])
                    fds.extend(arr)
        return buf, fds


_ENTRY = "from roboz_helper.sandbox.zygote import main; main()"


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_zygote = Zygote()


def get() -> Zygote:
    return _zygote


def main() -> None:
    fd = int(sys.argv[1])
    parent = int(sys.argv[2])
    prctl.set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:
        raise SystemExit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, _reap)
    sock = socket.socket(fileno=fd)
    gc.collect()
    gc.freeze()  # children never walk (and so never copy) the zygote's heap
    serve(sock)


if __name__ == "__main__":
    main()
