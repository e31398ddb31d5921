"""A pid 1 the zygote prepared ahead of a request (a "warm" one), from the helper's side: is
it still usable, and handing it a request, through pid 1 or straight to its prepared run
process (see the README's "Warm pid 1" and wait_for_request in init.c).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import os
import resource
import select
import socket
import time
from typing import Any

import msgspec

from . import cgroups, init_wire
from .spec import ChildPlan, RunFds, WarmOffer
from .transport import HEADER, fds_of

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
        keep_until_done(loop.run_in_executor(None, _remove_when_gone, self.pidfd, self.pool))


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
                # The run is started: nothing from here may fall back to another start. pid 1
                # may already have closed its end (the run process exec'd and handed it the
                # pipes), so the header is best effort.
                with contextlib.suppress(OSError):
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
    await send_framed(sock, init_wire.encode_request(plan), fds)


async def send_framed(sock: socket.socket, body: bytes, fds: RunFds) -> None:
    """A length-prefixed ``body``; the header carries the run's descriptors."""
    loop = asyncio.get_running_loop()
    header = HEADER.pack(len(body))
    rights = array.array("i", fds.all())
    while True:
        try:
            sent = sock.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
            break
        except BlockingIOError:
            await ready(loop, sock, writable=True)
    await loop.sock_sendall(sock, header[sent:] + body)


# Clean-ups in progress (kept referenced until done).
_pending: set[asyncio.Future[Any]] = set()


def keep_until_done(future: asyncio.Future[Any]) -> None:
    _pending.add(future)
    future.add_done_callback(_pending.discard)


async def ready(loop: asyncio.AbstractEventLoop, sock: socket.socket, writable: bool) -> None:
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
