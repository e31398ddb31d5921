"""What runs after ``fork()`` in Python: the processes between the helper and sandbox-init.

    helper (asyncio, possibly multi-threaded)
      └─ A "setup"   direct mode only (the zygote does this itself): host pid namespace; forks
      │              B into a new pid namespace, reports B's pid, hands B the request, waits.
      │              Dies with the helper (PDEATHSIG).
      └─ B "init"    pid 1 of the run's pid namespace: joins new mount/net/ipc/uts namespaces,
                     builds the root, then executes sandbox-init (init.c), which keeps all of
                     that, prepares or forks the run process, waits for the request, starts
                     the run, drops every privilege of its own, reaps and reports.

The children only run self-contained code prepared by the parent (``ChildPlan``): no imports,
no asyncio, no locks of the parent's threads (glibc's fork resets malloc's). Every failure is
written to the set-up error pipe as "stage: message" before ``_exit(127)``, so the parent can
put a precise diagnostic in the completion (a pid 1 prepared ahead of its request has no
set-up pipe yet and just exits; sandbox-init reports its own failures the same way).
"""

from __future__ import annotations

import _signal
import contextlib
import gc
import os
import signal
import socket
import struct
from dataclasses import dataclass
from typing import NoReturn

import prctl

from . import init_wire, mounts, namespaces, network
from . import syscalls as sc

STATUS_FORMAT = "=iqq"  # C's wait status, CPU time in microseconds, peak RSS in bytes
PID_FORMAT = "=i"
EXIT_SETUP_FAILED = 127


@dataclass(frozen=True)
class ChildPlan:
    helper_pid: int
    rootless: bool
    outer_uid: int
    outer_gid: int
    uid: int
    gid: int
    network: str
    mounts: mounts.MountPlan
    rlimits: tuple[tuple[int, int, int], ...]
    exec_path: str
    exec_argv: tuple[str, ...]
    env: dict[str, str]
    stdout_w: int
    stderr_w: int
    setup_w: int  # set-up errors (close-on-exec: EOF once the run has exec'd)
    status_w: int  # A writes B's pid, B writes the run's status
    cgroup_procs_fds: tuple[int, ...]
    reset_signals: tuple[int, ...]
    # Zygote mode: the zygote makes (or renames a pooled one to) this cgroup.
    cgroup_name: str = ""
    pids_max: int = 0
    memory_max: int = 0
    in_cgroup: bool = False  # pid 1 (and so the run) is already in the run's cgroup


def plan_fds(plan: ChildPlan) -> list[int]:
    return [plan.stdout_w, plan.stderr_w, plan.setup_w, plan.status_w, *plan.cgroup_procs_fds]


def _report(fd: int, stage: str, exc: BaseException) -> NoReturn:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, OSError) and exc.filename:
        text = f"{text}: {exc.filename}"
    try:
        os.write(fd, f"{stage}: {text or type(exc).__name__}".encode()[:4000])
    finally:
        os._exit(EXIT_SETUP_FAILED)


def signals_to_reset() -> tuple[int, ...]:
    """In the parent: every signal the helper handles or ignores (Python ignores SIGPIPE and
    SIGXFSZ, and exec keeps ignored signals ignored)."""
    out = []
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError):
            if _signal.getsignal(sig) not in (_signal.SIG_DFL, None):
                out.append(sig)
    return tuple(out)


def _reset_signals(signals: tuple[int, ...]) -> None:
    """Default dispositions and an empty mask; the parent's wakeup fd is detached so a signal
    here never wakes the helper's loop. Uses ``_signal`` directly: the enum conversions of
    ``signal`` would cost copy-on-write faults for nothing."""
    _signal.set_wakeup_fd(-1)
    for sig in signals:
        _signal.signal(sig, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())


def _die_with_parent() -> None:
    prctl.set_pdeathsig(signal.SIGKILL)


def stage_a(plan: ChildPlan) -> NoReturn:
    """Direct mode only (no zygote): the helper's child that makes the pid namespace."""
    try:
        # A collection would walk (and so copy-on-write fault) the helper's whole heap.
        gc.disable()
        # The helper's sockets (its listening socket, clients' connections) must not stay
        # open in here for the length of the run.
        _close_all_but({0, 1, 2, init_wire.opened_exe_fd(), *plan_fds(plan)} - {-1})
        _reset_signals(plan.reset_signals)
        _die_with_parent()
        if os.getppid() != plan.helper_pid:
            os._exit(EXIT_SETUP_FAILED)
        _avoid_oom_killer()
        namespaces.enter_pid_namespace(plan.rootless, plan.outer_uid, plan.outer_gid)
        alive_r, alive_w = os.pipe2(os.O_CLOEXEC)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            os.close(alive_w)
            ours.close()
            stage_b(plan, alive_r, theirs.fileno(), report_fd=plan.setup_w)
        os.close(alive_r)
        theirs.close()
        os.write(plan.status_w, struct.pack(PID_FORMAT, pid))
        # pid 1 may have died preparing: it said why on the set-up pipe.
        with contextlib.suppress(OSError):
            init_wire.send_request(ours, plan)
        ours.close()
        for fd in plan_fds(plan):
            os.close(fd)
    except BaseException as exc:
        _report(plan.setup_w, "setup", exc)
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    os._exit(0)


def _avoid_oom_killer() -> None:
    """Stay out of the OOM killer's choice (best effort: needs CAP_SYS_RESOURCE); the set-up
    processes are outside the run's cgroup anyway, so a memory-cgroup OOM never picks them."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor except ``keep`` (pid 1 inherits the zygote's other sockets)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    sc.close_from(low)


def _prepare_init(plan: ChildPlan, alive_r: int) -> None:
    """pid 1 (may run ahead of the request): namespaces and the root. Not dumpable, locked
    securebits and the empty bounding set come right after the exec, in sandbox-init (with
    them pid 1 would lose its capabilities across the exec); nothing untrusted exists yet."""
    gc.disable()
    _reset_signals(plan.reset_signals)
    _die_with_parent()
    os.set_blocking(alive_r, False)
    try:
        if os.read(alive_r, 1) == b"":
            os._exit(EXIT_SETUP_FAILED)  # the parent is already gone
    except BlockingIOError:
        pass
    _avoid_oom_killer()
    sc.unshare(namespaces.INIT_NAMESPACES)
    if plan.network == "loopback":
        network.bring_up_loopback()
    mounts.build_root(plan.mounts)
    sc.sethostname(namespaces.HOSTNAME)


def stage_b(
    shape: ChildPlan,
    alive_r: int,
    ctrl: int,
    pool_fds: tuple[int, ...] = (),
    report_fd: int = -1,
) -> NoReturn:
    """pid 1 of the run's pid namespace, up to its exec of sandbox-init, which then reads the
    request from ``ctrl``. ``alive_r`` is the read end of a pipe whose write end only the
    parent holds: EOF means the parent is already gone (PDEATHSIG covers later). A pid 1
    prepared ahead of its request (the zygote's warm sandbox) joins the pooled cgroup
    (``pool_fds``: its cgroup.procs files; joining is slow on cgroup v1, so it happens here
    rather than on the request's path) and has sandbox-init prepare the run process too;
    without a ``report_fd`` (set-up pipe) a failure just exits (the zygote then starts runs
    cold)."""
    try:
        keep = {0, 1, 2, alive_r, ctrl, init_wire.opened_exe_fd(), report_fd, *pool_fds}
        _close_all_but(keep - {-1})
        _prepare_init(shape, alive_r)
        for fd in pool_fds:
            os.write(fd, b"0")
            os.close(fd)
        config = init_wire.encode_config(shape, prepare_run=bool(pool_fds))
        init_wire.exec_init(ctrl, alive_r, config)
    except BaseException as exc:
        if report_fd >= 0:
            _report(report_fd, "init", exc)
        os._exit(EXIT_SETUP_FAILED)
