"""After a run's outcome: its pid 1's exit, then its cgroup's removal.

Wait for an exiting pid 1 (the kernel tears the run's namespaces down as it exits, ~1 ms
that no longer delays the completion), then remove the empty cgroup. Both on the loop, in a
task (asyncio.run waits for it: it outlives a cancellation): a thread per run cost more than
the rmdir, in handing the interpreter lock back and forth with the loop (~0.25 ms of CPU per
run under load), and the rmdir of an empty cgroup takes ~0.1 ms now that no join holds the
cgroup lock through an RCU grace period (cgroups.open_join_fds). Only a cgroup that still
holds a process goes to a thread, to be killed and removed. A helper that dies first leaves
only an empty cgroup, which reclaim_stale_runs() removes at its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

from . import cgroups

# How long a run's processes get to be gone once killed, and an exiting pid 1 to exit.
DRAIN_TIMEOUT_S = 5.0

_pending_removals: set[asyncio.Future[None]] = set()


def finish_later(
    cg: cgroups.RunCgroup | None, init_pidfd: int, on_init_exited: Callable[[], None]
) -> None:
    """Start the clean-up of a run whose outcome is known (on the running loop)."""
    task = asyncio.ensure_future(_finish(cg, init_pidfd, on_init_exited))
    _pending_removals.add(task)
    task.add_done_callback(_pending_removals.discard)


async def _finish(
    cg: cgroups.RunCgroup | None, init_pidfd: int, on_init_exited: Callable[[], None]
) -> None:
    if init_pidfd >= 0:
        await _init_gone(init_pidfd)
        on_init_exited()
    if cg is None or cg.remove():
        return
    removal = asyncio.get_running_loop().run_in_executor(None, _remove, cg)
    while not removal.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(removal)


async def _init_gone(pidfd: int) -> None:
    """Until the exiting pid 1 is gone (it only had to exit: killed after DRAIN_TIMEOUT_S)."""
    loop = asyncio.get_running_loop()
    gone = loop.create_future()

    def resolve() -> None:
        if not gone.done():
            gone.set_result(None)

    def kill() -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)

    loop.add_reader(pidfd, resolve)
    timer = loop.call_later(DRAIN_TIMEOUT_S, kill)
    try:
        while not gone.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(gone)
    finally:
        timer.cancel()
        loop.remove_reader(pidfd)
        os.close(pidfd)


def _remove(cg: cgroups.RunCgroup) -> None:
    """A cgroup that rmdir refused because it still holds a process: kill, then remove."""
    cg.kill_all(DRAIN_TIMEOUT_S)
    cg.remove()
