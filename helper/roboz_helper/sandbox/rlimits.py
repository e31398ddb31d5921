"""Per-process resource limits of the run (inherited by everything it starts)."""

from __future__ import annotations

import resource

from .spec import SandboxSpec


def plan_rlimits(spec: SandboxSpec) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) triples, computed in the parent."""
    return (
        (resource.RLIMIT_NOFILE, spec.nofile_max, spec.nofile_max),
        (resource.RLIMIT_FSIZE, spec.max_file_bytes, spec.max_file_bytes),
        (resource.RLIMIT_CORE, 0, 0),
        # SIGXCPU at the soft limit, SIGKILL one second later.
        (resource.RLIMIT_CPU, spec.cpu_time_s, cpu_hard_limit(spec.cpu_time_s)),
        # No locked memory: nothing in a run needs it and it escapes reclaim.
        (resource.RLIMIT_MEMLOCK, 0, 0),
    )


def cpu_hard_limit(soft: int) -> int:
    return soft + 1


def killed_by_cpu_hard_limit(cpu_s: float, soft: int) -> bool:
    """Whether a SIGKILL after ``cpu_s`` seconds of (precise) CPU time can be the hard limit's.
    The kernel counts the limit in tick-sampled CPU time, which on a busy machine runs ahead of
    the precise time we report (a limit of 1 s fires at 0.77-0.99 s): so half the hard limit,
    not the soft one, which a long limit could miss (10 s fires SIGKILL at ~8.5 s under load)."""
    return cpu_s >= cpu_hard_limit(soft) / 2
