"""The helper's handle on its zygote (see zygote.py): started on first use, restarted if it
died, one request at a time; and the warm pid 1 the zygote offered after its last reply,
which the next request of the same shape is handed to directly (one hop instead of two).

Nothing here blocks the helper's event loop on the zygote: the plan (up to a 4 MiB script)
is sent as the socket accepts it and the reply awaited, and a dead zygote is reaped in a
thread, so a zygote that stalls delays only the runs waiting for it, never the other clients.
Starting the zygote (fork and exec of the interpreter) stays on the loop's thread on purpose:
PR_SET_PDEATHSIG ties the zygote to the thread that forked it (see README)."""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import os
import resource
import select
import socket
import subprocess
import sys
import time
from typing import Any

import msgspec

from . import cgroups, init_wire
from .spec import ChildPlan, RunFds, WarmOffer
from .transport import ENCODER, HEADER, OFFER_DECODER, REPLY, fds_of

# A warm pid 1 older than this is thrown away rather than used (its binds were made then).
WARM_MAX_AGE_S = 10.0
# Requests handed straight to a prepared run process, in this process (for tests and the
# benchmark: which path a run took is not visible from inside it).
handed_to_run = 0


@dataclasses.dataclass
class Warm:
    """A pid 1 the zygote offered, waiting on ``ctrl`` (non-blocking here), sitting in the
    pooled cgroup ``pool`` (v1) when there is one; used once at most."""

    offer: WarmOffer
    pidfd: int
    ctrl: socket.socket
    pool: cgroups.RunCgroup | None
    # The prepared run process's request socket, once pid 1 has offered it (offer_run_socket
    # in init.c): a request without a script or file view goes straight there.
    run_sock: socket.socket | None = None

    def take_run_socket(self) -> bool:
        """Whether pid 1 is still there; takes the run process's socket if it offered it."""
        try:
            data, ancdata, _, _ = self.ctrl.recvmsg(
                1, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
            )
        except BlockingIOError:
            return True  # still preparing: this request goes through pid 1
        except OSError:
            return False
        fds = fds_of(ancdata)
        if len(fds) == 1:
            self.run_sock = socket.socket(fileno=fds[0])
            return True
        for fd in fds:
            os.close(fd)
        return bool(data)

    def usable(self, key: bytes) -> bool:
        now, offer = time.monotonic(), self.offer
        if key != offer.key or now - offer.built_at > WARM_MAX_AGE_S or now >= offer.expires_at:
            return False
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return not readable  # a readable pidfd: it died while preparing

    def discard(self, loop: asyncio.AbstractEventLoop) -> None:
        """EOF on its socket: it exits without running anything; its pooled cgroup is
        removed once it is gone."""
        self.ctrl.close()
        if self.run_sock is not None:
            self.run_sock.close()
        removal = loop.run_in_executor(None, _remove_when_gone, self.pidfd, self.pool)
        _reaping.add(removal)
        removal.add_done_callback(_reaping.discard)


def _remove_when_gone(pidfd: int, pool: cgroups.RunCgroup | None) -> None:
    try:
        select.select([pidfd], [], [], 5.0)
    finally:
        os.close(pidfd)
    if pool is not None:
        pool.kill_all(5.0)
        pool.remove()


async def start_warm(warm: Warm, plan: ChildPlan, fds: RunFds) -> tuple[int, int] | None:
    """Hand ``plan`` to ``warm`` (usable for it): the pooled cgroup gets the run's name and
    limits (renaming is cheap; joining a v1 cgroup waits for an RCU grace period), then the
    request goes to pid 1. (pid, pidfd), or None (and the warm one discarded) on failure."""
    loop = asyncio.get_running_loop()
    pool_names = dict(warm.pool.dirs) if warm.pool is not None else {}
    made: cgroups.RunCgroup | None = None
    try:
        if plan.cgroup_name and warm.pool is not None:
            warm.pool.rename(plan.cgroup_name)
            limits = (plan.pids_max + 1, plan.memory_max)  # pid 1 counts as one process
            if limits != warm.offer.pool_limits:
                warm.pool.set_limits(*limits)
            plan = msgspec.structs.replace(plan, in_cgroup=True)
        elif plan.cgroup_name:
            made = cgroups.RunCgroup.create(plan.cgroup_name, plan.pids_max, plan.memory_max)
            if made is None:
                raise OSError("no usable cgroup hierarchy")
            fds = fds._replace(cgroup_joins=tuple(made.open_join_fds()))
        try:
            if warm.run_sock is not None and _straight_to_run(plan):
                # One hop: the run process gets the request, pid 1 only an empty header (it
                # then takes the set-up and status pipes from the run process).
                await send_request(warm.run_sock, plan, fds)
                warm.ctrl.send(HEADER.pack(0))
                global handed_to_run
                handed_to_run += 1
            else:
                if warm.run_sock is None:
                    # pid 1 is still building its sandbox, at a lower priority (pid1_main in
                    # init.c): from now on that is this run's time.
                    with contextlib.suppress(OSError):
                        os.setpriority(
                            os.PRIO_PROCESS, warm.offer.pid, os.getpriority(os.PRIO_PROCESS, 0)
                        )
                await send_request(warm.ctrl, plan, fds)
        finally:
            for fd in fds.cgroup_joins:
                os.close(fd)
    except OSError:
        if made is not None:
            made.remove()
        if warm.pool is not None and warm.pool.dirs != pool_names:
            with contextlib.suppress(OSError):  # back to its pool name, to be removed as such
                for ctrl, d in warm.pool.dirs.items():
                    os.rename(d, pool_names[ctrl])
                warm.pool.dirs = pool_names
        warm.discard(loop)
        return None
    warm.ctrl.close()
    if warm.run_sock is not None:
        warm.run_sock.close()
    return warm.offer.pid, warm.pidfd


def _straight_to_run(plan: ChildPlan) -> bool:
    """Whether the prepared run process can take ``plan`` without pid 1: already in the run's
    cgroup, nothing for pid 1 to put in the root (script, file view), and rlimits it can set
    unprivileged (no hard limit above its own, which are this process's)."""
    if not plan.in_cgroup or plan.mounts.script_path is not None or plan.mounts.view:
        return False
    for res, _soft, hard in plan.rlimits:
        current = resource.getrlimit(res)[1]
        if current != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > current):
            return False
    return True


async def send_request(sock: socket.socket, plan: ChildPlan, fds: RunFds) -> None:
    """The request to a pid 1 on ``sock`` (non-blocking), without blocking the loop."""
    await _send_framed(sock, init_wire.encode_request(plan), fds)


async def _send_framed(sock: socket.socket, body: bytes, fds: RunFds) -> None:
    """A length-prefixed ``body``; the header carries the run's descriptors."""
    loop = asyncio.get_running_loop()
    header = HEADER.pack(len(body))
    rights = array.array("i", fds.all())
    while True:
        try:
            sent = sock.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
            break
        except BlockingIOError:
            await _ready(loop, sock, writable=True)
    await loop.sock_sendall(sock, header[sent:] + body)


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
            reaping = loop.run_in_executor(None, self.proc.wait)
            _reaping.add(reaping)
            reaping.add_done_callback(_reaping.discard)
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
        await _send_framed(sock, ENCODER.encode(plan), fds)
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
                await _ready(loop, sock, writable=False)
                continue
            if not data:
                raise EOFError
            buf += data
            fds += fds_of(ancdata)
        return buf, fds


_ENTRY = "from roboz_helper.sandbox.zygote import main; main()"


# Reaping of stopped zygotes in progress (kept referenced until done).
_reaping: set[asyncio.Future[Any]] = set()


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
