"""Direct mode (no zygote): what runs in the helper's own child after ``fork()``.

    helper (asyncio, possibly multi-threaded)
      └─ A "setup"   host pid namespace; spawns B into a new pid namespace, reports B's pid,
      │              hands B the request, waits. Dies with the helper (PDEATHSIG).
      └─ B "init"    sandbox-init (init.c), pid 1 of the run's pid namespace: namespaces, root,
                     the run process, its own privilege drop, reaping, the status.

A runs only self-contained code prepared by the parent (the plan, the descriptors, the
signals to reset): no imports, no asyncio, no locks of the parent's threads (glibc's fork
resets malloc's). Every failure is written to the set-up error pipe as "stage: message"
before ``_exit(127)``, so the parent can put a precise diagnostic in the completion;
sandbox-init reports its own the same way. (The zygote does A's job with the fork server.)
"""

from __future__ import annotations

import _signal
import contextlib
import gc
import os
import signal
import socket
import struct
from typing import NoReturn

import prctl

from . import init_wire, namespaces
from .init_wire import EXIT_SETUP_FAILED, PID_FORMAT
from .spec import ChildPlan, RunFds


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


def stage_a(
    plan: ChildPlan, fds: RunFds, helper_pid: int, reset_signals: tuple[int, ...]
) -> NoReturn:
    """The helper's child that makes the pid namespace and spawns pid 1 into it."""
    try:
        # A collection would walk (and so copy-on-write fault) the helper's whole heap.
        gc.disable()
        # The helper's sockets (its listening socket, clients' connections) must not stay
        # open in here for the length of the run.
        _close_all_but({0, 1, 2, *fds.all()})
        _reset_signals(reset_signals)
        _die_with_parent()
        if os.getppid() != helper_pid:
            os._exit(EXIT_SETUP_FAILED)
        _avoid_oom_killer()
        namespaces.enter_pid_namespace(plan.rootless)
        alive_r, _alive_w = os.pipe2(os.O_CLOEXEC)  # held until we exit: EOF = A is gone
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        config = init_wire.encode_config(plan, prepare_run=False, report=True, pool=0)
        pid = init_wire.spawn(config, theirs.fileno(), alive_r, fds.setup_w, (), ())
        os.close(alive_r)
        theirs.close()
        os.write(fds.status_w, struct.pack(PID_FORMAT, pid))
        # pid 1 may have died building the root: it said why on the set-up pipe.
        with contextlib.suppress(OSError):
            init_wire.send_request(ours, plan, fds)
        ours.close()
        for fd in fds.all():
            os.close(fd)
    except BaseException as exc:
        _report(fds.setup_w, "setup", exc)
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
    # One close_range(2) call where the C library has it (CPython uses it).
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
