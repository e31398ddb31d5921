"""The helper's handle on its zygote (see zygote.py): started on first use, restarted if it
died, one request at a time; it keeps the warm pid 1 the zygote offered after its last reply
(prepared.py), which the next request of the same shape is handed to directly.

Nothing here blocks the helper's event loop on the zygote: the plan (up to a 4 MiB script)
is sent as the socket accepts it and the reply awaited, and a dead zygote is reaped in a
thread, so a zygote that stalls delays only the runs waiting for it, never the other clients.
Starting the zygote (fork and exec of the interpreter) stays on the loop's thread on purpose:
PR_SET_PDEATHSIG ties the zygote to the thread that forked it (see README)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys

import msgspec

from . import cgroups
from .prepared import Warm, keep_until_done, ready, send_framed
from .spec import ChildPlan, RunFds
from .transport import ENCODER, HEADER, OFFER_DECODER, REPLY, fds_of


class Zygote:
    """The helper's handle on its zygote (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self.warm: Warm | None = None
        self._offers_due = 0  # every reply is followed by an offer (maybe empty)
        self._prepared: tuple[tuple[object, ...], bytes] | None = None

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
        self._offers_due = 0
        if self.warm is not None:
            self.warm.discard(loop)
            self.warm = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            keep_until_done(loop.run_in_executor(None, self.proc.wait))
            self.proc = None

    def _lock_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    async def take_warm(self, key: bytes) -> Warm | None:
        """The zygote's last offer if it is usable for ``key`` (else it is discarded)."""
        loop = asyncio.get_running_loop()
        async with self._lock_for(loop):
            if self.sock is None or self.proc is None or self.proc.poll() is not None:
                return None
            try:
                await self._collect_offers(loop, self.sock)
            except (EOFError, OSError):
                self._stop(loop)
                return None
            warm, self.warm = self.warm, None
        if warm is not None and not (warm.usable(key) and warm.take_run_socket()):
            warm.discard(loop)
            warm = None
        return warm

    async def _collect_offers(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        """Read the offers due (the last one is kept, older ones discarded)."""
        while self._offers_due:
            data, fds = await self._recv(loop, sock, HEADER.size)
            self._offers_due -= 1
            (n,) = HEADER.unpack(data)
            if n == 0:
                for fd in fds:
                    os.close(fd)
                continue
            body, more = await self._recv(loop, sock, n)
            fds += more
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                raise OSError("the sandbox zygote sent a broken offer")
            offer = OFFER_DECODER.decode(body)
            ctrl = socket.socket(fileno=fds[1])
            ctrl.setblocking(False)
            pool = cgroups.RunCgroup.existing(offer.pool_name) if offer.pool_name else None
            if self.warm is not None:
                self.warm.discard(loop)
            self.warm = Warm(offer, fds[0], ctrl, pool)

    def _prepare_message(self, plan: ChildPlan, key: bytes) -> bytes:
        """The request for a warm pid 1 of ``plan``'s shape: what the zygote acts on (the
        shape, the pool's limits, whether there is a cgroup), nothing of this run's command,
        so runs of one shape send the same bytes, encoded once."""
        cache_key = (key, plan.pids_max, plan.memory_max, bool(plan.cgroup_name))
        if self._prepared is not None and self._prepared[0] == cache_key:
            return self._prepared[1]
        shape = msgspec.structs.replace(
            plan,
            mounts=plan.mounts.shape(),
            prepare_only=True,
            cgroup_name="pool" if plan.cgroup_name else "",
            exec_path="",
            exec_argv=(),
            env={},
            rlimits=(),
        )
        body = ENCODER.encode(shape)
        message = HEADER.pack(len(body)) + body
        self._prepared = (cache_key, message)
        return message

    def prepare_next(self, plan: ChildPlan, key: bytes) -> None:
        """Ask for a warm pid 1 of ``plan``'s shape (``key``: its shape_key) for the next
        request (its offer is read then). Only when the zygote is idle: a request under way
        brings an offer anyway. The request is small and the socket idle, so it is sent at
        once, without awaiting."""
        loop = asyncio.get_running_loop()
        if self.sock is None or self._lock_for(loop).locked():
            return
        message = self._prepare_message(plan, key)
        try:
            sent = self.sock.send(message)
        except BlockingIOError:
            return
        except OSError:
            self._stop(loop)
            return
        if sent != len(message):
            self._stop(loop)  # half a request: the stream is unusable, start afresh
            return
        self._offers_due += 1

    async def spawn(self, plan: ChildPlan, fds: RunFds) -> tuple[int, int]:
        """Fork the run's pid 1 in the zygote: (pid, pidfd). Retries once on a dead zygote;
        raises OSError when it cannot be used (the caller then starts the run directly)."""
        loop = asyncio.get_running_loop()
        async with self._lock_for(loop):
            for attempt in (1, 2):
                if self.sock is None or self.proc is None or self.proc.poll() is not None:
                    self._stop(loop)
                    self._start()
                try:
                    return await self._request(loop, plan, fds)
                except (EOFError, BrokenPipeError, ConnectionError):
                    self._stop(loop)
                    if attempt == 2:
                        raise OSError("the sandbox zygote died") from None
        raise AssertionError("unreachable")

    async def _request(
        self, loop: asyncio.AbstractEventLoop, plan: ChildPlan, fds: RunFds
    ) -> tuple[int, int]:
        assert self.sock is not None
        sock = self.sock
        await self._collect_offers(loop, sock)  # the stream must be at a reply's start
        await send_framed(sock, ENCODER.encode(plan), fds)
        data, anc = await self._recv(loop, sock, REPLY.size)
        self._offers_due += 1
        (pid,) = REPLY.unpack(data)
        if pid < 0:
            (n,) = HEADER.unpack((await self._recv(loop, sock, HEADER.size))[0])
            text = (await self._recv(loop, sock, n))[0].decode("utf-8", "replace")
            raise OSError(f"the sandbox zygote could not fork the run: {text}")
        if len(anc) != 1:
            for fd in anc:
                os.close(fd)
            raise OSError("the sandbox zygote sent no pidfd")
        return pid, anc[0]

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
                await ready(loop, sock, writable=False)
                continue
            if not data:
                raise EOFError
            buf += data
            fds += fds_of(ancdata)
        return buf, fds


_ENTRY = "from roboz_helper.sandbox.zygote import main; main()"


_zygote = Zygote()


def get() -> Zygote:
    return _zygote
