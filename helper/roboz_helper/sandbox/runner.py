"""``run_in_sandbox``: start the run, stream its output, enforce deadline and output cap, kill,
wait until nothing of it is left, report.

The run is planned and started by launch.py and told by outcome.py. The runner watches four
descriptors: stdout and stderr pipes, a status pipe (pid 1's report: the run's wait status
and usage; in direct mode pid 1's pid first) and a pidfd of pid 1 (in direct mode of the
starter), plus one timer for the deadline. Killing a run means SIGKILL to the run's
pid 1 (the kernel then kills every process of its pid namespace, whatever it did with setsid
or double forks) and to every process of its cgroup; the runner then waits until pid 1 and
the starter are gone and the cgroup is empty, and only then returns -- or re-raises
``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from roboz_helper.run_states import RunReason

from . import cgroups, cleanup, launch
from .egress_door import EgressDoor, network_note
from .init_wire import PID_FORMAT, STATUS_FORMAT
from .outcome import Ended, Refusals, outcome_of
from .spec import (
    ChildPlan,
    NetworkSession,
    RunFds,
    SandboxError,
    SandboxOutcome,
    SandboxSpec,
    Started,
    validate,
)
from .support import sandbox_support

USE_ZYGOTE = launch.USE_ZYGOTE
OnOutput = Callable[[int, bytes], Awaitable[None]]
READ_CHUNK = 65536
KILL_RETRY_S = 1.0
_PID_SIZE = struct.calcsize(PID_FORMAT)
_STATUS_SIZE = struct.calcsize(STATUS_FORMAT)
# Benchmarks set this to see where a run's time goes: called with the run_id, a phase name and
# time.monotonic() at "started" (pid 1 has the plan), "output_closed" (every holder of the
# run's stdout and stderr is gone: the main process has exited), "exited" (pid 1 reported the
# run's status), "init_exited" (pid 1 gone: after the completion when it reported everything
# reaped, in another thread).
phase_hook: Callable[[str, str, float], None] | None = None


def _phase(run_id: str, name: str) -> None:
    if phase_hook is not None:
        phase_hook(run_id, name, time.monotonic())


def _read_ready(fd: int, size: int) -> bytes | None:
    """What a readable non-blocking pipe holds: None if nothing after all, b"" at its end (or
    when it broke, which ends it the same way)."""
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class _Pipes:
    """The run's pipes: the read ends stay here, the write ends (RunFds) go to the run."""

    def __init__(self) -> None:
        (self.out_r, out_w), (self.err_r, err_w), (self.setup_r, setup_w), (
            self.status_r, status_w) = [os.pipe2(os.O_CLOEXEC) for _ in range(4)]  # fmt: skip
        self.write = RunFds(out_w, err_w, setup_w, status_w)
        self._write_open = True

    def close_write_ends(self) -> None:
        """Once the run has its copies: the read ends see EOF when the run's are gone. Never
        twice: the numbers may be other files' by then."""
        if self._write_open:
            self._write_open = False
            for fd in self.write.all():
                os.close(fd)

    def close(self) -> None:
        self.close_write_ends()
        for fd in (self.out_r, self.err_r, self.setup_r, self.status_r):
            os.close(fd)


class _Run:
    def __init__(self, spec: SandboxSpec, on_output: OnOutput, network: NetworkSession | None):
        self.spec = spec
        self.on_output = on_output
        self.loop = asyncio.get_running_loop()
        self.pipes = _Pipes()
        # network = proxy: the run's egress session, attached once pid 1 is set up.
        self.door = EgressDoor(network, self.pipes.setup_r, self.kill) if network else None
        self.started: Started | None = None
        self.cg: cgroups.RunCgroup | None = None  # known once the run is started
        self.reason: RunReason | None = None
        self.pid_b: int | None = None  # direct mode: pid 1, once the starter said it
        self.pidfd_b: int | None = None
        self.status_buf = b""
        self.queue: asyncio.Queue[tuple[int, bytes | None]] = asyncio.Queue()
        self.exited = self.loop.create_future()
        # Zygote mode: pid 1 wrote the run's status, which it does only once every other
        # process of the run has been killed and reaped (kill_and_reap_the_rest in init.c).
        self.reported = self.loop.create_future()
        self.early = False  # completed on pid 1's report; pid 1's own exit is awaited later
        self.readers: list[int] = []
        self.refusals = Refusals()

    @property
    def direct(self) -> bool:
        return self.started is not None and self.started.direct

    # ------------------------------------------------------------------ watching --------

    def _add_reader(self, fd: int, cb: Callable[..., Any], *args: Any) -> None:
        self.loop.add_reader(fd, cb, *args)
        self.readers.append(fd)

    def _remove_reader(self, fd: int) -> None:
        if fd in self.readers:
            self.loop.remove_reader(fd)
            self.readers.remove(fd)

    def _on_stream(self, stream: int, fd: int) -> None:
        data = _read_ready(fd, READ_CHUNK)
        if data is None:
            return
        if not data:
            self._remove_reader(fd)
            self.queue.put_nowait((stream, None))
        else:
            self.queue.put_nowait((stream, data))

    def _on_status(self) -> None:
        fd = self.pipes.status_r
        data = _read_ready(fd, 4096)
        if data is None:
            return
        if not data:
            self._remove_reader(fd)
            return
        self.status_buf += data
        pid_size = _PID_SIZE if self.direct else 0
        if len(self.status_buf) >= pid_size + _STATUS_SIZE and not self.reported.done():
            _phase(self.spec.run_id, "exited")
            self.reported.set_result(None)
        if self.direct and self.pid_b is None and len(self.status_buf) >= _PID_SIZE:
            (self.pid_b,) = struct.unpack_from(PID_FORMAT, self.status_buf)
            try:
                self.pidfd_b = os.pidfd_open(self.pid_b)
            except OSError:
                self.pidfd_b = None
            if self.door is not None and self.pidfd_b is not None:
                self.door.init_known(self.pidfd_b)
            if self.reason is not None:
                self.kill()

    def _on_setup(self) -> None:
        assert self.door is not None
        if self.door.on_setup():
            self._remove_reader(self.pipes.setup_r)

    def _on_exit(self) -> None:
        assert self.started is not None
        _phase(self.spec.run_id, "init_exited")
        self._remove_reader(self.started.pidfd)
        if not self.exited.done():
            self.exited.set_result(None)

    # ------------------------------------------------------------------ killing ---------

    def kill(self) -> None:
        """SIGKILL the run's pid 1 (or, before it exists, the starter) and its cgroup."""
        if self.pidfd_b is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd_b, signal.SIGKILL)
        elif self.started is not None and not self.exited.done():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.started.pidfd, signal.SIGKILL)
        if self.cg is not None:
            with contextlib.suppress(OSError):
                self.cg.kill_once()

    def _on_deadline(self) -> None:
        if self.reason is None:
            self.reason = "timeout"
        self.kill()

    # ------------------------------------------------------------------ the run ---------

    async def _pump(self) -> None:
        open_streams = 2
        total = 0
        cap = self.spec.max_output_bytes
        while open_streams:
            stream, data = await self.queue.get()
            if data is None:
                open_streams -= 1
                if not open_streams:
                    _phase(self.spec.run_id, "output_closed")
                continue
            if self.reason is not None:
                continue  # killed: drop what is still in flight
            if total + len(data) > cap:
                head = data[: cap - total]
                self.reason = "output"
                self.kill()
                for fd in (self.pipes.out_r, self.pipes.err_r):
                    self._remove_reader(fd)
                if head:
                    await self.on_output(stream, head)
                return
            total += len(data)
            if stream == 2:
                self.refusals.note(data)
            await self.on_output(stream, data)

    async def _reaped_by_init(self) -> bool:
        """Zygote mode, nothing killed: wait for pid 1's report or its death. True when pid 1
        reported that every process of the run is reaped and the cgroup holds nothing but
        pid 1 (the report then stands for the whole run; pid 1 itself only has to exit)."""
        assert self.started is not None
        if self.direct or self.reason is not None:
            return False
        await asyncio.wait([self.reported, self.exited], return_when=asyncio.FIRST_COMPLETED)
        if not self.reported.done() or self.reason is not None:
            return False
        # The pids controller counts a task until it is reaped. pid 1 is single-threaded and
        # counts only when it sits in the cgroup (its own exit may already have uncharged
        # it); anything else of the run counts until reaped, and pid 1 cannot be reaped
        # before every other process of its namespace is.
        tasks = self.cg.tasks() if self.cg is not None else 0
        if tasks is None or tasks > int(self.started.init_in_cgroup):
            return False
        self.early = True
        return True

    async def _wait_gone(self) -> None:
        """Until the starter has exited, pid 1 is gone and the cgroup is empty."""
        if await self._reaped_by_init():
            return
        while not self.exited.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), KILL_RETRY_S)
            except TimeoutError:
                if self.reason is not None:
                    self.kill()
        if self.pidfd_b is not None:
            gone = self.loop.create_future()
            pidfd_b = self.pidfd_b

            def _gone() -> None:
                if not gone.done():
                    gone.set_result(None)

            self.loop.add_reader(pidfd_b, _gone)
            try:
                await gone
            finally:
                self.loop.remove_reader(pidfd_b)
        if self.cg is not None:
            deadline = time.monotonic() + cleanup.DRAIN_TIMEOUT_S
            while not self.cg.kill_once() and time.monotonic() < deadline:
                await asyncio.sleep(0.005)

    async def _start(self, plan: ChildPlan) -> bool:
        """Start the run; True when the caller was cancelled meanwhile. Starting is not
        interruptible half-way (the zygote's reply must be read and whatever was started
        must be killed): a cancellation is honoured right after."""
        spawn = asyncio.ensure_future(launch.start(plan, self.pipes.write))
        cancelled = False
        try:
            while not spawn.done():
                try:
                    await asyncio.shield(spawn)
                except asyncio.CancelledError:
                    cancelled = True
        finally:
            self.pipes.close_write_ends()
        self.started = spawn.result()
        self.cg = self.started.cgroup
        _phase(self.spec.run_id, "started")
        return cancelled

    async def run(self, plan: ChildPlan) -> SandboxOutcome:
        started_at = time.monotonic()
        cancelled = await self._start(plan)
        assert self.started is not None
        if cancelled:
            self.reason = "cancelled"
        pipes = self.pipes
        for fd in (pipes.out_r, pipes.err_r, pipes.status_r, pipes.setup_r):
            os.set_blocking(fd, False)
        self._add_reader(self.started.pidfd, self._on_exit)
        self._add_reader(pipes.status_r, self._on_status)
        self._add_reader(pipes.out_r, self._on_stream, 1, pipes.out_r)
        self._add_reader(pipes.err_r, self._on_stream, 2, pipes.err_r)
        if self.door is not None:
            self._add_reader(pipes.setup_r, self._on_setup)
            if not self.started.direct:  # direct mode: once the starter names pid 1
                self.door.init_known(self.started.pidfd)
        timer = self.loop.call_at(self.loop.time() + self.spec.timeout_s, self._on_deadline)
        children_cpu_s = None
        try:
            try:
                if cancelled:
                    raise asyncio.CancelledError
                await self._pump()
                await self._wait_gone()
            except BaseException:
                if self.reason is None:
                    self.reason = "cancelled"
                self.kill()
                await _uncancellable(self._wait_gone())
                raise
        finally:
            timer.cancel()
            for fd in list(self.readers):
                self._remove_reader(fd)
            if self.started.direct:
                children_cpu_s = _reap(self.started.pid)
            with contextlib.suppress(OSError):
                while chunk := os.read(pipes.status_r, 4096):
                    self.status_buf += chunk
            # Nothing of the run is left: its proxy connections end with it.
            report = await self.door.close() if self.door is not None else None
        outcome = outcome_of(self.spec, self._ended(time.monotonic() - started_at, children_cpu_s))
        if report is None:
            return outcome
        # Before the other notes (the seccomp filter, file modes): the likelier cause.
        head, sep, notes = outcome.diagnostic.partition(" (note: ")
        diagnostic = head + network_note(outcome.status, report) + sep + notes
        return dataclasses.replace(outcome, network=report, diagnostic=diagnostic)

    def _ended(self, wall: float, children_cpu_s: float | None) -> Ended:
        setup_error = (self.door.error or self.door.setup_error) if self.door else b""
        with contextlib.suppress(OSError):
            setup_error = setup_error or os.read(self.pipes.setup_r, 8192)
        return Ended(
            wall_time_s=wall,
            reason=self.reason,
            report=self.status_buf[_PID_SIZE if self.direct else 0 :],
            setup_error=setup_error,
            usage=self.cg.usage() if self.cg is not None else None,
            children_cpu_s=children_cpu_s,
            refusals=self.refusals,
        )

    def release(self) -> None:
        """Close what the run held; pid 1's exit and the cgroup's removal go on after the
        outcome (cleanup.py) when the run completed early or has a cgroup."""
        self.pipes.close()
        started = self.started
        if started is None:
            return
        init_exiting = -1
        if self.early:
            init_exiting = started.pidfd
        else:
            with contextlib.suppress(OSError):
                os.close(started.pidfd)
        if self.pidfd_b is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd_b)
        if self.cg is not None or init_exiting >= 0:
            run_id = self.spec.run_id
            cleanup.finish_later(self.cg, init_exiting, lambda: _phase(run_id, "init_exited"))


async def _uncancellable(aw: Awaitable[None]) -> None:
    task = asyncio.ensure_future(aw)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
    task.result()


def _reap(pid: int) -> float | None:
    """Reap the starter: the CPU time of the children it reaped (the run's)."""
    while True:
        try:
            _, _, rusage = os.wait4(pid, 0)
            return rusage.ru_utime + rusage.ru_stime
        except InterruptedError:
            continue
        except ChildProcessError:
            return None


async def run_in_sandbox(
    spec: SandboxSpec, on_output: OnOutput, network: NetworkSession | None = None
) -> SandboxOutcome:
    """Run ``spec`` in a fresh sandbox; see the package README for what that guarantees.
    ``network``: the egress proxy session of a run with ``network = "proxy"`` (and only
    then), closed when the run has ended; its report is the outcome's ``network``."""
    validate(spec)
    if (spec.network == "proxy") != (network is not None):
        raise SandboxError('network: a session is given exactly for network = "proxy"')
    ok, why = sandbox_support()
    if not ok:
        raise SandboxError(f"sandboxing is not available here: {why}")
    # A file view walks the tree (every directory, for a rule on a bare name such as
    # **/.env), which the run can make as large as it likes: in a worker thread, so that
    # the loop goes on serving every other run meanwhile. Without one, planning is a few
    # reads, cheaper than the hop.
    if spec.file_policies:
        plan = await asyncio.to_thread(launch.plan_run, spec)
    else:
        plan = launch.plan_run(spec)
    if cgroups.backend() is None and not plan.rootless:
        raise SandboxError("no usable cgroup hierarchy (need v1 pids+memory+freezer or "
                           "delegated v2 memory+pids)")  # fmt: skip
    run = _Run(spec, on_output, network)
    try:
        return await run.run(plan)
    finally:
        run.release()
        if run.door is not None:  # a run that failed to start: its session ends too
            await run.door.close()


def reclaim_stale_runs() -> None:
    """At helper start-up: kill and remove run cgroups left by a crashed helper."""
    cgroups.reclaim_stale()
