"""A small pre-started process that starts the runs' pid 1 (the "zygote").

Why: the helper is a multi-threaded asyncio program, and the runs' pid 1 must be started
from a thread that lives as long as the helper, in a fresh pid namespace each time
(``unshare``/``setns``, which would disturb the helper's other threads), with a system
template kept in a mount namespace of its own, and one sandbox prepared ahead of the next
request. The zygote is started once (lazily, with ``python -c "...zygote import main;
main()"``), imports only this package and is single-threaded; it does not fork pid 1 itself:
sandbox-init's fork server (fork_server.c), started once, does (and keeps the template in
its mount namespace), so nothing of a Python heap is copied per run and no program is
executed for it. It dies with the helper (PDEATHSIG), the fork server with it, and every
pid 1 with the fork server, so a crashed helper leaves no runs.

Protocol on a private socketpair (only the helper holds the other end): see transport.py.
The zygote has the run's pid 1 started in a fresh pid namespace (the fork server's
``unshare``, fork, ``setns`` back). Requests are serialised by the helper.
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import sys
import time

import prctl

from . import cgroups, init_wire
from .spec import ChildPlan, RunFds, WarmOffer
from .transport import (
    DECODER,
    ENCODER,
    HEADER,
    MAX_FDS,
    MAX_PLAN_BYTES,
    REPLY,
    fds_of,
    recv_exactly,
)

# Keep a warm pid 1 for the last shape (ROBOZ_SANDBOX_POOL=0 disables it).
POOL = os.environ.get("ROBOZ_SANDBOX_POOL", "1") != "0"


def _reap(_signum: int = 0, _frame: object = None) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


_pool_counter = iter(range(1, 1 << 62))


class Forker:
    """Starts pid 1 of a new pid namespace through the fork server (init_wire.ForkServer),
    from the system template it keeps while it can build one."""

    def __init__(self, reset_signals: tuple[int, ...]) -> None:
        # Children get the read end; we hold the write end for life (EOF = we are gone).
        self.alive_r, self._alive_w = os.pipe2(os.O_CLOEXEC)
        self.server = init_wire.ForkServer(reset_signals)
        self.template = True  # until the server fails to build one
        # The last warm plan's configuration (plan, flags, config): a repeated request for a
        # warm pid 1 is the same plan object (see serve).
        self._config: tuple[ChildPlan, tuple[bool, int], bytes] | None = None

    def refresh_template(self) -> None:
        if self.template:
            with contextlib.suppress(OSError):
                self.template = self.server.refresh_template()

    def spawn(
        self, config: bytes, ctrl: int, report_fd: int = -1, pool_fds: tuple[int, ...] = ()
    ) -> tuple[int, int]:
        return self.server.spawn(config, ctrl, self.alive_r, report_fd, pool_fds)

    def cold(self, plan: ChildPlan, fds: RunFds) -> tuple[int, int]:
        """A pid 1 built for this request, handed it at once (its failures before that go to
        the request's set-up pipe)."""
        config = init_wire.encode_config(plan, prepare_run=False, report=True, pool=0)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid, pidfd = self.spawn(config, theirs.fileno(), report_fd=fds.setup_w)
        finally:
            theirs.close()
        try:
            with contextlib.suppress(OSError):  # it died building the root, and said why
                init_wire.send_request(ours, plan, fds)
        finally:
            ours.close()
        return pid, pidfd

    def warm(self, plan: ChildPlan) -> tuple[int, int, socket.socket, cgroups.RunCgroup | None]:
        """A pid 1 prepared for ``plan``'s shape (pid, pidfd, its request socket, its pooled
        cgroup), to be handed to the helper."""
        pool = None
        if plan.cgroup_name:
            be = cgroups.backend()
            if be is not None and be.version == 1:
                # The limits of this request, which the next one of its shape most likely
                # has too (the helper then leaves them): pid 1 counts as one process of the
                # run, and nothing in the pool forks before a run is handed over.
                pool = cgroups.RunCgroup.create(
                    f"{cgroups.owner_tag()}pool-{next(_pool_counter)}",
                    plan.pids_max + 1,
                    plan.memory_max,
                )
        pool_fds = tuple(pool.open_join_fds()) if pool is not None else ()
        flags = (bool(pool_fds), len(pool_fds))
        if self._config is None or self._config[0] is not plan or self._config[1] != flags:
            config = init_wire.encode_config(
                plan, prepare_run=flags[0], report=False, pool=flags[1]
            )
            self._config = (plan, flags, config)
        config = self._config[2]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid, pidfd = self.spawn(config, theirs.fileno(), pool_fds=pool_fds)
        except BaseException:
            if pool is not None:
                pool.remove()
            raise
        finally:
            theirs.close()
            for fd in pool_fds:
                os.close(fd)
        return pid, pidfd, ours, pool


def _run_cgroup(plan: ChildPlan, fds: RunFds) -> tuple[RunFds, cgroups.RunCgroup | None]:
    """Cold start: make the run's cgroup here; the run process joins it through the
    cgroup join descriptors (cgroups.open_join_fds) added to its descriptors."""
    if not plan.cgroup_name:
        return fds, None
    cg = cgroups.RunCgroup.create(plan.cgroup_name, plan.pids_max, plan.memory_max)
    if cg is None:
        raise OSError("no usable cgroup hierarchy")
    return fds._replace(cgroup_joins=tuple(cg.open_join_fds())), cg


def _offer(sock: socket.socket, forker: Forker, plan: ChildPlan, key: bytes) -> None:
    """After each reply: a warm pid 1 of the request's shape for the helper to hand the next
    request of that shape to directly (an empty offer when there is none). The helper checks
    that the shape is the same, that it is not too old and that the system template it was
    cloned from is still current (``expires_at``), so that a sandbox whose inputs changed is
    never used; it owns the pooled cgroup from then on."""
    made = None
    if POOL:
        with contextlib.suppress(OSError):
            made = forker.warm(plan)
    if made is None:
        sock.sendall(HEADER.pack(0))
        return
    pid, pidfd, ctrl, pool = made
    try:
        pool_name = os.path.basename(next(iter(pool.dirs.values()))) if pool is not None else ""
        offer = WarmOffer(
            key=key,
            pid=pid,
            pool_name=pool_name,
            pool_limits=(plan.pids_max + 1, plan.memory_max),
            built_at=time.monotonic(),
            expires_at=forker.server.template_expires_at(),
        )
        body = ENCODER.encode(offer)
        fds = array.array("i", [pidfd, ctrl.fileno()])
        sock.sendmsg([HEADER.pack(len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        sock.sendall(body)
    finally:
        os.close(pidfd)
        ctrl.close()  # EOF for it if the helper never got its copy


def serve(sock: socket.socket) -> None:
    """The zygote's loop: one request, one pid 1, one reply, one offer. pid 1's exit (observed
    through the pidfd by the helper) means every process of the run is gone. A request the
    helper could give to a warm pid 1 it holds never reaches the zygote."""
    forker = Forker(init_wire.signals_to_reset())  # the zygote's dispositions never change
    # The last request for a warm pid 1 (body, plan, shape key): runs of one shape send the
    # same bytes (zygote_client.Zygote._prepare_message), decoded once.
    prepared: tuple[bytes, ChildPlan, bytes] | None = None
    while True:
        try:
            # MSG_CMSG_CLOEXEC: received descriptors must not survive the run's exec.
            data, ancdata, _, _ = sock.recvmsg(
                HEADER.size, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
            )
        except InterruptedError:
            continue
        except ConnectionError:  # the helper went away with an offer unread
            return
        if not data:
            return
        fds = fds_of(ancdata)
        plan: ChildPlan | None = None
        key = b""
        try:
            if len(data) < HEADER.size:
                data += recv_exactly(sock, HEADER.size - len(data))
            (length,) = HEADER.unpack(data)
            if length > MAX_PLAN_BYTES:
                raise ValueError("plan too large")
            body = recv_exactly(sock, length)
            forker.refresh_template()
            if not fds and prepared is not None and prepared[0] == body:
                _, plan, key = prepared  # the same request for a warm pid 1 as last time
            else:
                plan = DECODER.decode(body)
                key = plan.shape_key()
                if plan.prepare_only and not fds:
                    prepared = (body, plan, key)
            if plan.prepare_only:
                _offer(sock, forker, plan, key)
                continue
            if len(fds) < 4:
                raise ValueError("a run's plan without its descriptors")
            run_fds, cg = _run_cgroup(plan, RunFds.received(fds))
            try:
                pid, pidfd = forker.cold(plan, run_fds)
            except BaseException:
                if cg is not None:
                    cg.remove()
                raise
            finally:
                for fd in run_fds.cgroup_joins:
                    os.close(fd)
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
        if plan is None:
            sock.sendall(HEADER.pack(0))
        else:
            _offer(sock, forker, plan, key)


def main() -> None:
    fd = int(sys.argv[1])
    parent = int(sys.argv[2])
    prctl.set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:
        raise SystemExit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, _reap)
    sock = socket.socket(fileno=fd)
    with contextlib.suppress(OSError):
        # Pooled cgroups (named after the zygote) of zygotes that died before this one.
        # Only pools, and briefly: run cgroups are the helper's business at its start-up.
        cgroups.reclaim_stale(pools_only=True, timeout_s=0.5)
    serve(sock)


if __name__ == "__main__":
    main()
