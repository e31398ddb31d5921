"""The helper's handle on its zygote (see zygote.py): started on first use, restarted if it
died, one request at a time.

Nothing here blocks the helper's event loop on the zygote: the plan (up to a 4 MiB script)
is sent as the socket accepts it and the reply awaited, and a dead zygote is reaped in a
thread, so a zygote that stalls delays only the runs waiting for it, never the other clients.
Starting the zygote (fork and exec of the interpreter) stays on the loop's thread on purpose:
PR_SET_PDEATHSIG ties the zygote to the thread that forked it (see README)."""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import socket
import subprocess
import sys

from . import child
from .child import plan_fds
from .transport import HEADER, REPLY, encode_plan


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
                env={
                    "PATH": "/usr/bin:/bin",
                    "PYTHONPATH": path,
                    **{
                        name: os.environ[name]
                        for name in ("ROBOZ_SANDBOX_POOL", "ROBOZ_SANDBOX_TEMPLATE_TTL_S")
                        if name in os.environ
                    },
                },
            )
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours

    def _stop(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            reaping = loop.run_in_executor(None, self.proc.wait)
            _reaping.add(reaping)
            reaping.add_done_callback(_reaping.discard)
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
                    self._stop(loop)
                    self._start()
                try:
                    return await self._request(loop, plan)
                except (EOFError, BrokenPipeError, ConnectionError):
                    self._stop(loop)
                    if attempt == 2:
                        raise OSError("the sandbox zygote died") from None
        raise AssertionError("unreachable")

    async def _request(
        self, loop: asyncio.AbstractEventLoop, plan: child.ChildPlan
    ) -> tuple[int, int]:
        assert self.sock is not None
        sock = self.sock
        await self._send(loop, sock, plan)
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
    async def _send(
        loop: asyncio.AbstractEventLoop, sock: socket.socket, plan: child.ChildPlan
    ) -> None:
        """The plan without blocking: the header carries the descriptors."""
        body = encode_plan(plan)
        header = HEADER.pack(len(body))
        fds = array.array("i", plan_fds(plan))
        while True:
            try:
                sent = sock.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                break
            except BlockingIOError:
                await _ready(loop, sock, writable=True)
        await loop.sock_sendall(sock, header[sent:] + body)

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
                await _ready(loop, sock, writable=False)
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


# Reaping of stopped zygotes in progress (kept referenced until done).
_reaping: set[asyncio.Future[int]] = set()


async def _ready(loop: asyncio.AbstractEventLoop, sock: socket.socket, writable: bool) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not ready.done():
            ready.set_result(None)

    fd = sock.fileno()
    if writable:
        loop.add_writer(fd, resolve)
    else:
        loop.add_reader(fd, resolve)
    try:
        await ready
    finally:
        if writable:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


_zygote = Zygote()


def get() -> Zygote:
    return _zygote
