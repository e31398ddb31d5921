"""A proxy run's egress session, seen from the runner: when the session may take the
listener the run's pid 1 made, and the session's end (see the README, "Network egress").

pid 1 makes the listener before the run process exists, so once every copy of the set-up
pipe is closed (pid 1 is set up and the run has exec'd) and pid 1 is known (in direct mode
the starter names it), the session takes it. Anything written on the set-up pipe is a set-up
error, kept for the outcome; no session is attached then.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
from collections.abc import Callable

from roboz_helper.egress.report import NetworkReport

from .spec import NetworkSession


class EgressDoor:
    def __init__(self, session: NetworkSession, setup_r: int, kill: Callable[[], None]) -> None:
        self.session = session
        self.setup_r = setup_r
        self.kill = kill
        self.setup_error = b""  # what the set-up pipe said
        self.error = b""  # why the session could not serve the run
        self._setup_ended = False
        self._init_pidfd: int | None = None
        self._attached = False

    def on_setup(self) -> bool:
        """The set-up pipe is readable; True at its end (stop watching it)."""
        try:
            data = os.read(self.setup_r, 8192)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if data:
            self.setup_error += data
            return False
        self._setup_ended = True
        self._attach()
        return True

    def init_known(self, pidfd: int) -> None:
        self._init_pidfd = pidfd
        self._attach()

    def _attach(self) -> None:
        pidfd = self._init_pidfd
        if self._attached or not self._setup_ended or self.setup_error or pidfd is None:
            return
        self._attached = True
        try:
            self.session.attach(pidfd)
        except OSError as exc:
            if _exited(exc, pidfd):
                return  # the run is over before its proxy was needed (a quick /bin/true)
            # Stopped: it would wait on a port nobody answers.
            self.error = f"network: the egress proxy cannot serve the run: {exc}".encode()
            self.kill()

    async def close(self) -> NetworkReport:
        """The session closed (every connection of the run ends) and its report, even while
        the run's caller is being cancelled."""
        task = asyncio.ensure_future(self.session.close())
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        return task.result()


def network_note(status: str, report: NetworkReport) -> str:
    """For a run that failed after its proxy refused something: the first refusal, which is
    the likelier cause than the notes on the seccomp filter and file modes."""
    if status == "success" or not report.refusals:
        return ""
    more = report.refused - 1
    also = f"; {more} more refused attempt{'s' if more > 1 else ''}" if more > 0 else ""
    return f" (note: {report.refusals[0].text(report.policy)}{also})"


def _exited(error: OSError, pidfd: int) -> bool:
    """Whether taking pid 1's listener failed because pid 1 is gone (ESRCH) or exiting (its
    descriptors closed, EBADF, its pidfd readable within moments): pid 1 made the listener
    before the run started, and never closes it itself."""
    if error.errno == errno.ESRCH:
        return True
    return error.errno == errno.EBADF and bool(select.select([pidfd], [], [], 0.02)[0])
