"""How a run ended, told: its status, exit code or signal, which limit stopped it, and a
diagnostic a person (or an agent) can act on."""

from __future__ import annotations

import os
import signal
import struct
from dataclasses import dataclass

from roboz_helper.run_states import Limit, RunReason, RunStatus

from . import cgroups, rlimits
from .init_wire import EXIT_SETUP_FAILED, STATUS_FORMAT
from .seccomp import DENIAL_NOTE
from .spec import SandboxOutcome, SandboxSpec

_STATUS = struct.Struct(STATUS_FORMAT)


class Refusals:
    """Which kinds of refusal a run's stderr reported, for the diagnostic's note. The texts are
    strerror's (C library and Python alike), which is what programs print: EPERM is what the
    seccomp filter answers; EACCES and EROFS come from the file system."""

    def __init__(self) -> None:
        self.eperm = False
        self.fs_denial = False

    def note(self, data: bytes) -> None:
        if not self.eperm and b"Operation not permitted" in data:
            self.eperm = True
        if not self.fs_denial and (b"Permission denied" in data
                                   or b"Read-only file system" in data):  # fmt: skip
            self.fs_denial = True

    def text(self) -> str:
        """A note on what may have refused the run. The helper does not see which call
        failed, only what the run printed: a run that reported only file-system refusals
        gets the file-system note and not the seccomp one; any other failure (EPERM
        reported, or nothing: a silent EPERM from the filter is the usual case) keeps the
        note on what the filter answers."""
        notes = []
        if self.fs_denial:
            notes.append(
                "permission denied by the file system: file modes (the workdir must be "
                "writable by the profile's run_as_user for writes), a read-only bind or a "
                "path the file policy makes read-only or absent"
            )
        if self.eperm or not self.fs_denial:
            notes.append(DENIAL_NOTE)
        return "".join(f" (note: {note})" for note in notes)


@dataclass(frozen=True)
class Ended:
    """What the runner saw of a run once every process of it is gone."""

    wall_time_s: float
    reason: RunReason | None  # why the runner stopped it, if it did
    report: bytes  # what pid 1 wrote on the status pipe (after pid 1's pid, in direct mode)
    setup_error: bytes  # "stage: message" of a set-up step that gave up (exit 127)
    usage: cgroups.Usage | None  # the run's cgroup's, when it has one
    children_cpu_s: float | None  # direct mode: the set-up child's reaped children's CPU
    refusals: Refusals


def outcome_of(spec: SandboxSpec, ended: Ended) -> SandboxOutcome:
    usage = ended.usage or cgroups.Usage()
    cpu = ended.children_cpu_s if ended.children_cpu_s is not None else usage.cpu_s
    peak = usage.peak_memory_bytes
    status = None
    if len(ended.report) >= _STATUS.size:
        status, cpu_us, maxrss = _STATUS.unpack_from(ended.report)
        cpu = max(cpu_us / 1e6, usage.cpu_s)
        if ended.usage is None:
            peak = maxrss

    def done(st: RunStatus, code: int | None, sig: int | None, diag: str,
             limit: Limit | None) -> SandboxOutcome:  # fmt: skip
        return SandboxOutcome(st, code, sig, diag, ended.wall_time_s, cpu, peak, limit)

    code = sig = None
    if status is not None and os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
    elif status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
    if ended.reason == "timeout":
        diag = f"run exceeded its {spec.timeout_s:g}s timeout; every process was killed"
        return done("timeout", code, sig, diag, "timeout")
    if ended.reason == "output":
        return done("output_limit", code, sig, f"run exceeded its output cap of "
                    f"{spec.max_output_bytes} bytes; every process of the run was killed",
                    "output")  # fmt: skip
    if ended.setup_error:  # a set-up stage reported why it gave up (EXIT_SETUP_FAILED)
        text = ended.setup_error.decode("utf-8", "replace")
        if text.startswith("exec:"):
            return done("failed", EXIT_SETUP_FAILED, None, f"could not execute {spec.argv[0]!r}: "
                        f"{text[5:].strip()}", None)  # fmt: skip
        return done("failed", None, None, f"sandbox set-up failed: {text}", None)
    limit = _limit_hit(usage, sig, cpu, spec)
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
                + ended.refusals.text(), limit)  # fmt: skip


def _limit_hit(
    usage: cgroups.Usage, sig: int | None, cpu: float, spec: SandboxSpec
) -> Limit | None:
    if usage.oom_killed:
        return "memory"
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and rlimits.killed_by_cpu_hard_limit(cpu, spec.cpu_time_s)
    ):
        return "cpu"
    if sig == signal.SIGSYS:
        return "seccomp"
    if usage.pids_limited:
        return "pids"
    return None


def _limit_text(limit: Limit | None, spec: SandboxSpec) -> str:
    return {
        "memory": f"; the memory limit ({spec.memory_max_bytes} bytes) was hit (OOM kill)",
        "pids": f"; the process limit ({spec.pids_max}) was hit",
        "cpu": f"; the CPU time limit ({spec.cpu_time_s}s) was hit",
        "seccomp": "; a system call outside the sandbox's architecture/ABI was made (seccomp)",
    }.get(limit or "", "")
