"""What runs after ``fork()``: the three processes between the helper and the run.

    helper (asyncio, possibly multi-threaded)
      └─ A "setup"   host pid namespace; joins new mount/net/ipc/uts(/user) namespaces, forks B,
      │              reports B's pid, waits for it. Dies with the helper (PDEATHSIG).
      └─ B "init"    pid 1 of the run's pid namespace: builds the root, forks C, then drops to the
      │              run's uid with no capabilities, no_new_privs, seccomp, not dumpable, its
      │              inherited environment and argv wiped; reaps everything and reports C's
      │              wait status and usage. When B dies the kernel kills every process of the
      │              namespace (setsid'd and double-forked ones included). Dies with A.
      └─ C "run"     joins the run's cgroup, new session and cgroup namespace, rlimits, drops
                     every privilege, fresh session keyring, fds 0-2 only, seccomp, execve.

The children only run self-contained code prepared by the parent (``ChildPlan``): no imports,
no asyncio, no locks of the parent's threads (glibc's fork resets malloc's). Every failure is
written to the set-up error pipe as "stage: message" before ``_exit(127)``, so the parent can
put a precise diagnostic in the completion.
"""

from __future__ import annotations

import _signal
import contextlib
import ctypes
import dataclasses
import gc
import os
import resource
import signal
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import prctl

from . import mounts, namespaces, network, privileges, rlimits, seccomp
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
    setup_w: int  # set-up errors (close-on-exec: EOF once C has exec'd)
    status_w: int  # A writes B's pid, B writes C's status
    cgroup_procs_fds: tuple[int, ...]
    reset_signals: tuple[int, ...]
    # Zygote mode: the zygote makes (or renames a pooled one to) this cgroup.
    cgroup_name: str = ""
    pids_max: int = 0
    memory_max: int = 0
    in_cgroup: bool = False  # pid 1 (and so the run) is already in the run's cgroup


def plan_fds(plan: ChildPlan) -> list[int]:
    return [plan.stdout_w, plan.stderr_w, plan.setup_w, plan.status_w, *plan.cgroup_procs_fds]


RecvPlan = Callable[[int], ChildPlan]
SendPlan = Callable[[socket.socket, ChildPlan], None]


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


def _wipe_inherited_memory() -> None:
    """Zero the argv and environment block inherited from the helper (what /proc/PID/cmdline
    and /proc/PID/environ show), so pid 1 of the run holds none of the helper's environment."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
    if env_end > env_start:
        sc.memzero(env_start, env_end - env_start)
    if arg_end > arg_start:
        name = b"roboz-sandbox-init\0"
        size = arg_end - arg_start
        sc.memzero(arg_start, size)
        ctypes.memmove(arg_start, name, min(len(name), size - 1))
    os.environ.clear()
    prctl.set_name("sandbox-init")


def stage_a(plan: ChildPlan) -> NoReturn:
    """Direct mode only (no zygote): the helper's child that makes the pid namespace."""
    try:
        # A collection would walk (and so copy-on-write fault) the helper's whole heap.
        gc.disable()
        # The helper's sockets (its listening socket, clients' connections) must not stay
        # open in here for the length of the run.
        _close_all_but({0, 1, 2, *plan_fds(plan)})
        _reset_signals(plan.reset_signals)
        _die_with_parent()
        if os.getppid() != plan.helper_pid:
            os._exit(EXIT_SETUP_FAILED)
        _avoid_oom_killer()
        namespaces.enter_pid_namespace(plan.rootless, plan.outer_uid, plan.outer_gid)
        alive_r, alive_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(alive_w)
            stage_b(plan, alive_r)
        os.close(alive_r)
        os.write(plan.status_w, struct.pack(PID_FORMAT, pid))
        for fd in (plan.stdout_w, plan.stderr_w, plan.setup_w, plan.status_w,
                   *plan.cgroup_procs_fds):  # fmt: skip
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
    """pid 1, first half (may run ahead of the request): namespaces and the root."""
    gc.disable()
    _reset_signals(plan.reset_signals)
    _die_with_parent()
    os.set_blocking(alive_r, False)
    try:
        if os.read(alive_r, 1) == b"":
            os._exit(EXIT_SETUP_FAILED)  # the parent is already gone
    except BlockingIOError:
        pass
    os.close(alive_r)
    _avoid_oom_killer()
    sc.unshare(namespaces.INIT_NAMESPACES)
    if plan.network == "loopback":
        network.bring_up_loopback()
    _wipe_inherited_memory()
    mounts.build_root(plan.mounts)
    sc.sethostname(namespaces.HOSTNAME)
    # Before anything untrusted exists: not dumpable (its /proc files root's, no ptrace
    # without CAP_SYS_PTRACE) and securebits locked (inherited by the run too).
    privileges.set_not_dumpable()
    privileges.lock_securebits()
    # pid 1 never execs, so an empty bounding set takes nothing from it; dropped here, ahead
    # of the request, it costs the run nothing (the run process drops it again, a no-op).
    privileges.drop_bounding_set()


def _fork_warm_run(shape: ChildPlan, receive: RecvPlan) -> WarmRun:
    """In a warm pid 1: prepare the run process too (see ``stage_c_warm``)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(exec_r)
        ours.close()
        stage_c_warm(shape, theirs.fileno(), receive, exec_w)
    os.close(exec_w)
    theirs.close()
    return WarmRun(pid, ours, exec_r)


@dataclass
class WarmRun:
    pid: int
    ctrl: socket.socket
    exec_r: int


def _run_init(
    plan: ChildPlan, warm: WarmRun | None = None, send: SendPlan | None = None
) -> NoReturn:
    """pid 1, second half: finish the root, start the run, drop everything, reap, report."""
    try:
        mounts.finish_root(plan.mounts)
        pid = -1
        if warm is not None:
            # The prepared run process needs no cgroup join: only when pid 1 is already in
            # the run's cgroup can it be used; otherwise it is killed and a fresh one forked.
            try:
                if not plan.in_cgroup or send is None or not rlimits.lowerable(plan.rlimits):
                    raise OSError("not usable for this plan")
                send(warm.ctrl, plan)
                pid, exec_r = warm.pid, warm.exec_r
            except OSError:
                with contextlib.suppress(OSError):
                    os.kill(warm.pid, signal.SIGKILL)
                os.close(warm.exec_r)
            warm.ctrl.close()
        if pid < 0:
            exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
            pid = os.fork()
            if pid == 0:
                os.close(exec_r)
                stage_c(plan)
            os.close(exec_w)
        for fd in (plan.stdout_w, plan.stderr_w, *plan.cgroup_procs_fds):
            os.close(fd)
        # Let the run's process set itself up first (it closes exec_w just before its exec):
        # on a busy machine pid 1's own privilege drop would otherwise delay the run. Until
        # then pid 1 is root but not dumpable, and every signal from the run is ignored by an
        # init without handlers; the run has no capabilities and its seccomp filter forbids
        # ptrace, so nothing it does can reach pid 1 in between.
        os.read(exec_r, 1)
        os.close(exec_r)
        if plan.rootless:
            privileges.clear_capabilities()
        else:
            privileges.become(plan.uid, plan.gid)
            privileges.clear_capabilities()
        prctl.set_no_new_privs(1)
        privileges.set_not_dumpable()
        seccomp.install()
        os.close(plan.setup_w)
    except BaseException as exc:
        _report(plan.setup_w, "init", exc)
    status = _reap_until(pid)
    _kill_and_reap_the_rest()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_us = int((usage.ru_utime + usage.ru_stime) * 1_000_000)
    try:
        os.write(plan.status_w, struct.pack(STATUS_FORMAT, status, cpu_us, usage.ru_maxrss * 1024))
    finally:
        os._exit(0)


def stage_b(plan: ChildPlan, alive_r: int) -> NoReturn:
    """pid 1 of the run's pid namespace. ``alive_r`` is the read end of a pipe whose write end
    only the parent holds: EOF means the parent is already gone (PDEATHSIG covers later)."""
    try:
        _close_all_but({0, 1, 2, alive_r, *plan_fds(plan)})
        _prepare_init(plan, alive_r)
    except BaseException as exc:
        _report(plan.setup_w, "init", exc)
    _run_init(plan)


def stage_b_warm(
    shape: ChildPlan,
    alive_r: int,
    ctrl: int,
    receive: RecvPlan,
    send: SendPlan,
    pool_fds: tuple[int, ...],
) -> NoReturn:
    """A pid 1 prepared ahead of its request (zygote's warm sandbox): namespaces and root are
    built for ``shape``, then it joins the pooled cgroup (``pool_fds``: its cgroup.procs files;
    joining is slow on cgroup v1, so it happens here rather than on the request's path) and
    waits on ``ctrl`` for the run's own plan and descriptors. If anything fails before that, it
    just exits (the zygote then starts runs cold)."""
    try:
        _close_all_but({0, 1, 2, alive_r, ctrl, *pool_fds})
        _prepare_init(shape, alive_r)
        for fd in pool_fds:
            os.write(fd, b"0")
            os.close(fd)
        warm = _fork_warm_run(shape, receive) if pool_fds else None
    except BaseException:
        os._exit(EXIT_SETUP_FAILED)
    try:
        plan = receive(ctrl)
    except BaseException:
        os._exit(0)  # discarded (EOF) or a broken request: nothing ran (the kernel kills
        # the prepared run process with this pid 1)
    os.close(ctrl)
    _run_init(plan, warm, send)


def _reap_until(main_pid: int) -> int:
    """pid 1's job: reap every orphan; return the main process's wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0x7F00  # no children at all: should not happen
        if pid == main_pid:
            return status


def _kill_and_reap_the_rest() -> None:
    """pid 1, once the run's main process has ended: SIGKILL every other process of the
    namespace and reap them all. Every one of them is pid 1's child by then (orphans are
    reparented to the namespace's init before their parent's exit is reported), so ECHILD
    means nothing of the run is left and the status written next can be reported at once,
    without waiting for the kernel to tear the namespaces down after pid 1's own exit. All of
    them run under the run's uid (no capabilities, no_new_privs), so the kill is permitted."""
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)  # from a namespace's init: all of it but pid 1 itself
    while True:
        try:
            os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def _run_setup(plan: ChildPlan) -> None:
    """The run process, first steps (as root): cgroup, session, cgroup namespace, identity."""
    for fd in plan.cgroup_procs_fds:
        os.write(fd, b"0")
        os.close(fd)
    os.setsid()
    if (plan.cgroup_procs_fds or plan.in_cgroup) and not plan.rootless:
        sc.unshare(sc.CLONE_NEWCGROUP)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("0")
    if plan.rootless:
        namespaces.enter_run_user_namespace(plan.uid, plan.gid)


def _run_exec(plan: ChildPlan, filtered: bool) -> NoReturn:
    """The run process, last steps: stdin /dev/null, stdout/stderr, only fds 0-2, seccomp
    (unless already ``filtered``), execve."""
    devnull = os.open("/dev/null", os.O_RDONLY)
    if devnull != 0:
        os.dup2(devnull, 0)
        os.close(devnull)
    os.dup2(plan.stdout_w, 1)
    os.dup2(plan.stderr_w, 2)
    # Only 0, 1, 2 survive exec: close everything else except the (close-on-exec) error
    # pipe, which exec closes itself.
    setup_w = plan.setup_w
    os.set_inheritable(setup_w, False)  # exec closes it: EOF tells the parent exec worked
    if setup_w > 3:
        os.closerange(3, setup_w)
    sc.close_from(setup_w + 1)
    if not filtered:
        seccomp.install()
    os.execve(plan.exec_path, list(plan.exec_argv), plan.env)
    raise AssertionError("unreachable")


def stage_c(plan: ChildPlan) -> NoReturn:
    try:
        _run_setup(plan)
        rlimits.apply_rlimits(plan.rlimits)
        privileges.drop_all(plan.uid, plan.gid, plan.rootless)
        sc.join_session_keyring()
        _run_exec(plan, filtered=False)
    except BaseException as exc:
        _report(plan.setup_w, "exec" if isinstance(exc, OSError) else "run", exc)


def stage_c_warm(shape: ChildPlan, ctrl: int, receive: RecvPlan, exec_w: int) -> NoReturn:
    """A run process prepared ahead of its request, inside a warm pid 1 that already sits in
    the run's (pooled) cgroup: it makes its session, drops every privilege, takes a fresh
    keyring and installs the seccomp filter, then waits on ``ctrl`` for the run's plan and
    descriptors; only rlimits, descriptors and execve remain per request."""
    try:
        _close_all_but({0, 1, 2, ctrl, exec_w})  # exec_w: closed just before execve
        _run_setup(dataclasses.replace(shape, in_cgroup=True))
        privileges.drop_all(shape.uid, shape.gid, shape.rootless)
        sc.join_session_keyring()
        os.chdir(shape.mounts.workdir)
        seccomp.install()
    except BaseException:
        os._exit(EXIT_SETUP_FAILED)
    try:
        plan = receive(ctrl)
    except BaseException:
        os._exit(0)  # discarded: nothing ran
    try:
        rlimits.apply_rlimits(plan.rlimits)
        _run_exec(plan, filtered=True)
    except BaseException as exc:
        _report(plan.setup_w, "exec" if isinstance(exc, OSError) else "run", exc)
