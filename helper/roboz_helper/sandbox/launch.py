"""Starting a run: its plan (what sandbox-init is told), then its start in one of three ways.

- warm: the zygote offered a pid 1 prepared for this shape; the request goes straight to it
  (one hop), and the zygote is asked, without waiting, for the next one;
- cold: the zygote has the fork server fork a pid 1 built for this request;
- direct: no zygote (``ROBOZ_SANDBOX_ZYGOTE=0``, a rootless helper, or a zygote that cannot
  be used): the helper starts sandbox-init for this one run, which forks pid 1 (start_direct
  in fork_server.c).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket

from . import cgroups, init_wire, mounts, prepared, rlimits, zygote_client
from .spec import ChildPlan, RunFds, SandboxError, SandboxSpec, Started

log = logging.getLogger(__name__)
# Start runs from the pre-started zygote (see zygote.py); False starts each run directly.
USE_ZYGOTE = os.environ.get("ROBOZ_SANDBOX_ZYGOTE", "1") != "0"


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


def plan_run(spec: SandboxSpec) -> ChildPlan:
    """The plan of a validated spec: the script read once, the mounts planned (every policy
    path checked), what to execute, the rlimits, the cgroup's name and limits."""
    script_bytes = mounts.read_script(spec.script_fd) if spec.script_fd is not None else None
    mplan = mounts.plan_mounts(spec, script_bytes)
    exec_path, exec_argv = exec_target(spec, mplan)
    return ChildPlan(
        rootless=os.geteuid() != 0,
        uid=spec.uid,
        gid=spec.gid,
        network=spec.network,
        mounts=mplan,
        rlimits=rlimits.plan_rlimits(spec),
        exec_path=exec_path,
        exec_argv=exec_argv,
        env=dict(spec.env),
        cgroup_name=cgroups.owner_tag() + spec.run_id,
        pids_max=spec.pids_max,
        memory_max=spec.memory_max_bytes,
    )


async def start(plan: ChildPlan, fds: RunFds) -> Started:
    """Start the run whose descriptors are ``fds`` (the caller closes its copies): through
    the zygote when it works (it makes the cgroup, or renames a pooled one), else by forking
    the helper itself."""
    if USE_ZYGOTE and not plan.rootless:  # rootless: see README (direct only)
        zygote = zygote_client.get()
        try:
            key = plan.shape_key()
            warm = await zygote.take_warm(key)
            if warm is not None:
                # The zygote builds the next one while this one is handed over: under
                # concurrent runs the hand-overs queue behind the zygote's builds.
                zygote.prepare_next(plan, key)
                started = await _warm(warm, plan, fds)
                if started is not None:
                    return started
            return await _cold(zygote, plan, fds)
        except OSError as exc:
            log.warning("sandbox zygote unavailable, starting the run directly: %s", exc)
    return await _direct(plan, fds)


async def _warm(warm: prepared.Warm, plan: ChildPlan, fds: RunFds) -> Started | None:
    """The request to a prepared pid 1, which sits in its pooled cgroup (v1) when it has one:
    that cgroup became the run's; otherwise the run process joins one made for it."""
    started = await prepared.start_warm(warm, plan, fds)
    if started is None:
        return None
    pid, pidfd = started
    cgroup = cgroups.RunCgroup.existing(plan.cgroup_name)
    return Started(pid, pidfd, False, cgroup, init_in_cgroup=warm.pool is not None)


async def _cold(zygote: zygote_client.Zygote, plan: ChildPlan, fds: RunFds) -> Started:
    """A pid 1 built for this request, forked by the zygote's fork server (the zygote makes
    the run's cgroup)."""
    pid, pidfd = await zygote.spawn(plan, fds)
    return Started(pid, pidfd, False, cgroups.RunCgroup.existing(plan.cgroup_name), False)


async def _direct(plan: ChildPlan, fds: RunFds) -> Started:
    """sandbox-init started for this run (it writes pid 1's pid first on the status pipe);
    the request goes to pid 1 from here. The cgroup is made here (none when a rootless
    helper has no delegated v2)."""
    cg = cgroups.RunCgroup.create(plan.cgroup_name, plan.pids_max, plan.memory_max)
    joins = tuple(cg.open_join_fds()) if cg is not None else ()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        config = init_wire.encode_config(plan, prepare_run=False, report=True, pool=0)
        with theirs:
            reset = init_wire.signals_to_reset()
            pid = init_wire.start_direct(config, theirs.fileno(), fds, reset)
        started = Started(pid, os.pidfd_open(pid), True, cg, False)
        ours.setblocking(False)
        with contextlib.suppress(OSError):  # pid 1 died building the root, and said why
            await prepared.send_request(ours, plan, fds._replace(cgroup_joins=joins))
        return started
    except BaseException:
        if cg is not None:
            cg.remove()
        raise
    finally:
        ours.close()
        for fd in joins:
            os.close(fd)
