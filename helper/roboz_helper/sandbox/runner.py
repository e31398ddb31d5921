"""``run_in_sandbox``: fork the run, stream its output, enforce deadline and output cap, report.

The helper forks directly from its event loop (no interpreter start-up per run); the children
run ``child.py``. The parent watches four descriptors: stdout and stderr pipes, a status pipe
(B's pid, then the run's wait status and usage) and a pidfd of the set-up process A, plus one
timer for the deadline. Killing a run means SIGKILL to the run's pid 1 (the kernel then kills
every process of its pid namespace, whatever it did with setsid or double forks) and to every
process of its cgroup; the parent then waits until pid 1 and the set-up process are gone and
the cgroup is empty, and only then returns -- or re-raises ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from . import cgroups, child, cleanup, mounts, rlimits, transport, zygote_client
from .seccomp import DENIAL_NOTE
from .spec import SandboxError, SandboxOutcome, SandboxSpec, validate
from .support import sandbox_support

log = logging.getLogger(__name__)
# Fork runs from the pre-started zygote (see zygote.py); False forks the helper itself.
USE_ZYGOTE = os.environ.get("ROBOZ_SANDBOX_ZYGOTE", "1") != "0"
OnOutput = Callable[[int, bytes], Awaitable[None]]
READ_CHUNK = 65536
KILL_RETRY_S = 1.0
# Benchmarks set this to see where a run's time goes: called with the run_id, a phase name and
# time.monotonic() at "started" (pid 1 has the plan), "output_closed" (every holder of the
# run's stdout and stderr is gone: the main process has exited), "exited" (pid 1 reported the
# run's status), "init_exited" (pid 1 gone: after the completion when it reported everything
# reaped, in another thread).
phase_hook: Callable[[str, str, float], None] | None = None


def _phase(run_id: str, name: str) -> None:
    if phase_hook is not None:
        phase_hook(run_id, name, time.monotonic())


def exec_target(spec: SandboxSpec, plan: mounts.MountPlan) -> tuple[str, tuple[str, ...]]:
    """What C executes. Scripts run from the copy in /run/roboz; a ``#!`` line is honoured the
    way the kernel would (interpreter, one optional argument, the script path, the args)."""
    if plan.script_path is None or plan.script_bytes is None:
        return spec.argv[0], tuple(spec.argv)
    data = plan.script_bytes
    if data.startswith(b"#!"):
        line = data[2:].split(b"\n", 1)[0].strip()[:255]
        parts = line.split(None, 1)
        if not parts:
            raise SandboxError("script has an empty #! line")
        interp = parts[0].decode("utf-8", "surrogateescape")
        if not interp.startswith("/"):
            raise SandboxError(f"script interpreter {interp!r} must be an absolute path")
        extra = [parts[1].strip().decode("utf-8", "surrogateescape")] if len(parts) > 1 else []
        return interp, (interp, *extra, plan.script_path, *spec.argv[1:])
    return plan.script_path, (spec.argv[0], *spec.argv[1:])


def _read_ready(fd: int, size: int) -> bytes | None:
    """What a readable non-blocking pipe holds: None if nothing after all, b"" at its end (or
    when it broke, which ends it the same way)."""
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class _Run:
    def __init__(self, spec: SandboxSpec, on_output: OnOutput):
        self.spec = spec
        self.on_output = on_output
        self.cg: cgroups.RunCgroup | None = None  # known once the run is started
        self.loop = asyncio.get_running_loop()
        self.reason: str | None = None  # "timeout" | "output" | "cancelled"
        self.pid_a = 0
        self.pidfd_a = -1
        self.pid_b: int | None = None
        self.pidfd_b: int | None = None
        self.status_buf = b""
        self.expect_pid = True
        self.queue: asyncio.Queue[tuple[int, bytes | None]] = asyncio.Queue()
        self.exited = self.loop.create_future()
        # Zygote mode: pid 1 wrote the run's status, which it does only once every other
        # process of the run has been killed and reaped (kill_and_reap_the_rest in init.c).
        self.reported = self.loop.create_future()
        self.early = False  # completed on pid 1's report; pid 1's own exit is awaited later
        self.init_in_cgroup = False  # pid 1 itself sits in the run's cgroup (a pooled one)
        self.fds: dict[str, int] = {}
        self.readers: list[int] = []
        # Which kind of refusal the run's stderr reported, for the diagnostic's note: EPERM
        # is what the seccomp filter answers; EACCES and EROFS come from the file system.
        self.saw_eperm = False
        self.saw_fs_denial = False

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
        fd = self.fds["status_r"]
        data = _read_ready(fd, 4096)
        if data is None:
            return
        if not data:
            self._remove_reader(fd)
            return
        self.status_buf += data
        if len(self.status_buf) >= self._status_size() and not self.reported.done():
            _phase(self.spec.run_id, "exited")
            self.reported.set_result(None)
        if (
            self.expect_pid
            and self.pid_b is None
            and len(self.status_buf) >= struct.calcsize(child.PID_FORMAT)
        ):
            (self.pid_b,) = struct.unpack_from(child.PID_FORMAT, self.status_buf)
            try:
                self.pidfd_b = os.pidfd_open(self.pid_b)
            except OSError:
                self.pidfd_b = None
            if self.reason is not None:
                self.kill()

    def _status_size(self) -> int:
        pid_size = struct.calcsize(child.PID_FORMAT) if self.expect_pid else 0
        return pid_size + struct.calcsize(child.STATUS_FORMAT)

    def _on_exit(self) -> None:
        _phase(self.spec.run_id, "init_exited")
        self._remove_reader(self.pidfd_a)
        if not self.exited.done():
            self.exited.set_result(None)

    # ------------------------------------------------------------------ killing ---------

    def kill(self) -> None:
        """SIGKILL the run's pid 1 (or, before it exists, the set-up process) and its cgroup."""
        if self.pidfd_b is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd_b, signal.SIGKILL)
        elif not self.exited.done():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd_a, signal.SIGKILL)
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
                for fd in (self.fds["out_r"], self.fds["err_r"]):
                    self._remove_reader(fd)
                if head:
                    await self.on_output(stream, head)
                return
            total += len(data)
            if stream == 2:
                self._note_refusals(data)
            await self.on_output(stream, data)

    def _note_refusals(self, data: bytes) -> None:
        # The texts are strerror's (C library and Python alike), which is what programs print.
        if not self.saw_eperm and b"Operation not permitted" in data:
            self.saw_eperm = True
        if not self.saw_fs_denial and (b"Permission denied" in data
                                       or b"Read-only file system" in data):  # fmt: skip
            self.saw_fs_denial = True

    async def _reaped_by_init(self) -> bool:
        """Zygote mode, nothing killed: wait for pid 1's report or its death. True when pid 1
        reported that every process of the run is reaped and the cgroup holds nothing but
        pid 1 (the report then stands for the whole run; pid 1 itself only has to exit)."""
        if self.expect_pid or self.reason is not None:
            return False
        await asyncio.wait([self.reported, self.exited], return_when=asyncio.FIRST_COMPLETED)
        if not self.reported.done() or self.reason is not None:
            return False
        # The pids controller counts a task until it is reaped. pid 1 is single-threaded and
        # counts only when it sits in the cgroup (its own exit may already have uncharged
        # it); anything else of the run counts until reaped, and pid 1 cannot be reaped
        # before every other process of its namespace is.
        tasks = self.cg.tasks() if self.cg is not None else 0
        if tasks is None or tasks > int(self.init_in_cgroup):
            return False
        self.early = True
        return True

    async def _wait_gone(self) -> None:
        """Until A has exited, pid 1 is gone and the cgroup is empty."""
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

    async def run(self, plan_args: dict[str, Any]) -> SandboxOutcome:
        started = time.monotonic()
        # Starting the run is not interruptible half-way (the zygote's reply must be read and
        # whatever was started must be killed); a cancellation is honoured right after.
        spawn = asyncio.ensure_future(_fork_run(self.fds, plan_args, self.spec))
        cancelled = False
        while not spawn.done():
            try:
                await asyncio.shield(spawn)
            except asyncio.CancelledError:
                cancelled = True
        self.pid_a, self.pidfd_a, own_child, self.cg, self.init_in_cgroup = spawn.result()
        _phase(self.spec.run_id, "started")
        # Direct mode: pidfd_a is the set-up process, which reports pid 1's pid first on the
        # status pipe. Zygote mode: pidfd_a is pid 1 itself.
        self.expect_pid = own_child
        if cancelled:
            self.reason = "cancelled"
        for name in ("out_r", "err_r", "status_r", "setup_r"):
            os.set_blocking(self.fds[name], False)
        self._add_reader(self.pidfd_a, self._on_exit)
        self._add_reader(self.fds["status_r"], self._on_status)
        self._add_reader(self.fds["out_r"], self._on_stream, 1, self.fds["out_r"])
        self._add_reader(self.fds["err_r"], self._on_stream, 2, self.fds["err_r"])
        timer = self.loop.call_at(self.loop.time() + self.spec.timeout_s, self._on_deadline)
        try:
            try:
                if cancelled:
                    raise asyncio.CancelledError
                await self._pump()
                await self._wait_gone()
            except asyncio.CancelledError:
                if self.reason is None:
                    self.reason = "cancelled"
                self.kill()
                await _uncancellable(self._wait_gone())
                raise
            except BaseException:
                self.reason = self.reason or "cancelled"
                self.kill()
                await _uncancellable(self._wait_gone())
                raise
        finally:
            timer.cancel()
            for fd in list(self.readers):
                self._remove_reader(fd)
            rusage = _reap(self.pid_a) if own_child else None
            self._on_status_final()
        return self._outcome(time.monotonic() - started, rusage)

    def _on_status_final(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fds["status_r"], 4096):
                self.status_buf += chunk

    def _outcome(self, wall: float, rusage: Any) -> SandboxOutcome:
        spec = self.spec
        setup_error = b""
        with contextlib.suppress(OSError):
            setup_error = os.read(self.fds["setup_r"], 8192)
        usage = self.cg.usage() if self.cg is not None else cgroups.Usage()
        pid_size = struct.calcsize(child.PID_FORMAT) if self.expect_pid else 0
        st_size = struct.calcsize(child.STATUS_FORMAT)
        status = None
        cpu = (rusage.ru_utime + rusage.ru_stime) if rusage is not None else usage.cpu_s
        peak = usage.peak_memory_bytes
        if len(self.status_buf) >= pid_size + st_size:
            status, cpu_us, maxrss = struct.unpack_from(
                child.STATUS_FORMAT, self.status_buf, pid_size
            )
            cpu = max(cpu_us / 1e6, usage.cpu_s)
            if self.cg is None:
                peak = maxrss

        def done(
            st: str, code: int | None, sig: int | None, diag: str, limit: str | None
        ) -> SandboxOutcome:
            return SandboxOutcome(st, code, sig, diag, wall, cpu, peak, limit)

        code = sig = None
        if status is not None:
            if os.WIFEXITED(status):
                code = os.WEXITSTATUS(status)
            elif os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
        if self.reason == "timeout":
            diag = f"run exceeded its {spec.timeout_s:g}s timeout; every process was killed"
            return done("timeout", code, sig, diag, "timeout")
        if self.reason == "output":
            return done("output_limit", code, sig, f"run exceeded its output cap of "
                        f"{spec.max_output_bytes} bytes; every process of the run was killed",
                        "output")  # fmt: skip
        if setup_error:  # a set-up stage reported why it gave up (exit 127)
            text = setup_error.decode("utf-8", "replace")
            if text.startswith("exec:"):
                return done("failed", 127, None, f"could not execute {spec.argv[0]!r}: "
                            f"{text[5:].strip()}", None)  # fmt: skip
            return done("failed", None, None, f"sandbox set-up failed: {text}", None)
        limit = None
        if usage.oom_killed:
            limit = "memory"
        elif sig == signal.SIGXCPU or (
            sig == signal.SIGKILL and rlimits.killed_by_cpu_hard_limit(cpu, spec.cpu_time_s)
        ):
            limit = "cpu"
        elif sig == signal.SIGSYS:
            limit = "seccomp"
        elif usage.pids_limited:
            limit = "pids"
        if status is None:
            return done("killed", None, None, "the run's init process died without a status"
                        + _limit_text(limit, spec), limit)  # fmt: skip
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else sig
            return done("killed", None, sig, f"killed by signal {name}" + _limit_text(limit, spec),
                        limit)  # fmt: skip
        if code == 0:
            return done("success", 0, None, "", None)
        return done("failed", code, None, f"exited with status {code}" + _limit_text(limit, spec)
                    + self._refusal_note(), limit)  # fmt: skip

    def _refusal_note(self) -> str:
        """A note on what may have refused the run. The helper does not see which call
        failed, only what the run printed: a run that reported only file-system refusals
        (EACCES, EROFS) gets the file-system note and not the seccomp one; any other failure
        (EPERM reported, or nothing: a silent EPERM from the filter is the usual case) keeps
        the note on what the filter answers."""
        notes = []
        if self.saw_fs_denial:
            notes.append(
                "permission denied by the file system: file modes (the workdir must be "
                "writable by the profile's run_as_user for writes), a read-only bind or a "
                "path the file policy makes read-only or absent"
            )
        if self.saw_eperm or not self.saw_fs_denial:
            notes.append(DENIAL_NOTE)
        return "".join(f" (note: {note})" for note in notes)


def _limit_text(limit: str | None, spec: SandboxSpec) -> str:
    return {
        None: "",
        "memory": f"; the memory limit ({spec.memory_max_bytes} bytes) was hit (OOM kill)",
        "pids": f"; the process limit ({spec.pids_max}) was hit",
        "cpu": f"; the CPU time limit ({spec.cpu_time_s}s) was hit",
        "seccomp": "; a system call outside the sandbox's architecture/ABI was made (seccomp)",
    }[limit]


async def _uncancellable(aw: Awaitable[None]) -> None:
    task = asyncio.ensure_future(aw)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
    task.result()


def _reap(pid: int) -> Any:
    while True:
        try:
            _, _, rusage = os.wait4(pid, 0)
            return rusage
        except InterruptedError:
            continue
        except ChildProcessError:
            return None


async def _fork_run(
    fds: dict[str, int], plan_args: dict[str, Any], spec: SandboxSpec
) -> tuple[int, int, bool, cgroups.RunCgroup | None, bool]:
    """Start the run: (pid, pidfd, is_our_child, cgroup, whether pid 1 is in the cgroup).
    Through the zygote when it works (it makes the cgroup, or renames a pooled one), else by
    forking the helper itself."""
    for name in ("out", "err", "setup", "status"):
        r, w = os.pipe2(os.O_CLOEXEC)
        fds[f"{name}_r"], fds[f"{name}_w"] = r, w
    try:
        base = {
            "stdout_w": fds["out_w"],
            "stderr_w": fds["err_w"],
            "setup_w": fds["setup_w"],
            "status_w": fds["status_w"],
            **plan_args,
        }
        if USE_ZYGOTE and not plan_args["rootless"]:  # rootless: see README (direct only)
            name = cgroups.owner_tag() + spec.run_id
            plan = child.ChildPlan(
                cgroup_procs_fds=(),
                cgroup_name=name,
                pids_max=spec.pids_max,
                memory_max=spec.memory_max_bytes,
                **base,
            )
            try:
                zygote = zygote_client.get()
                key = transport.shape_key(plan)
                warm = await zygote.take_warm(key)
                if warm is not None:
                    # The zygote builds the next one while this one is handed over: under
                    # concurrent runs the hand-overs queue behind the zygote's builds.
                    zygote.prepare_next(plan, key)
                started = await zygote_client.start_warm(warm, plan) if warm else None
                pid, pidfd = started or await zygote.spawn(plan)
                # A warm pid 1 sits in its pooled cgroup (v1), which became the run's; the run
                # process alone joins a cgroup made for the request.
                in_cgroup = started is not None and warm is not None and warm.pool is not None
                return pid, pidfd, False, cgroups.RunCgroup.existing(name), in_cgroup
            except OSError as exc:
                log.warning("sandbox zygote unavailable, forking the helper: %s", exc)
        cg = cgroups.RunCgroup.create(spec.run_id, spec.pids_max, spec.memory_max_bytes)
        procs = cg.open_join_fds() if cg is not None else []
        try:
            base["reset_signals"] = child.signals_to_reset()
            plan = child.ChildPlan(cgroup_procs_fds=tuple(procs), **base)
            pid = os.fork()
            if pid == 0:
                child.stage_a(plan)
            return pid, os.pidfd_open(pid), True, cg, False
        except BaseException:
            if cg is not None:
                cg.remove()
            raise
        finally:
            for fd in procs:
                os.close(fd)
    finally:
        for name in ("out_w", "err_w", "setup_w", "status_w"):
            if name in fds:
                os.close(fds.pop(name))


async def run_in_sandbox(spec: SandboxSpec, on_output: OnOutput) -> SandboxOutcome:
    """Run ``spec`` in a fresh sandbox; see the package README for what that guarantees."""
    validate(spec)
    ok, why = sandbox_support()
    if not ok:
        raise SandboxError(f"sandboxing is not available here: {why}")
    script_bytes = mounts.read_script(spec.script_fd) if spec.script_fd is not None else None
    mplan = mounts.plan_mounts(spec, script_bytes)
    exec_path, exec_argv = exec_target(spec, mplan)
    rootless = os.geteuid() != 0
    plan_args = {
        "helper_pid": os.getpid(),
        "rootless": rootless,
        "outer_uid": os.geteuid(),
        "outer_gid": os.getegid(),
        "uid": spec.uid,
        "gid": spec.gid,
        "network": spec.network,
        "mounts": mplan,
        "rlimits": rlimits.plan_rlimits(spec),
        "exec_path": exec_path,
        "exec_argv": exec_argv,
        "env": dict(spec.env),
        "reset_signals": (),  # the zygote fills in its own; direct mode: see _fork_run
    }
    if cgroups.backend() is None and not rootless:
        raise SandboxError("no usable cgroup hierarchy (need v1 pids+memory+freezer or "
                           "delegated v2 memory+pids)")  # fmt: skip
    run = _Run(spec, on_output)
    try:
        return await run.run(plan_args)
    finally:
        for fd in run.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        init_exiting = -1
        if run.early and run.pidfd_a >= 0:
            init_exiting, run.pidfd_a = run.pidfd_a, -1
        for fd in (run.pidfd_a, run.pidfd_b or -1):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if run.cg is not None or init_exiting >= 0:
            run_id = spec.run_id
            cleanup.finish_later(run.cg, init_exiting, lambda: _phase(run_id, "init_exited"))


def reclaim_stale_runs() -> None:
    """At helper start-up: kill and remove run cgroups left by a crashed helper."""
    cgroups.reclaim_stale()
