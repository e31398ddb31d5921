"""The helper daemon: its life cycle (serve, reload on SIGHUP, stop) and the admission of
connections on its Unix socket.

The daemon's jobs, one module each: accepting (here), authorizing and conversing with a
connection (connection.py), running its requests (running.py), reporting them (exchange.py:
the completion, the log line). Each connection is one exchange, or several runs one after
another for a client that asks for that (see protocol.py). Whatever a client sends, the worst
it can do is end its own connection: every handler catches its own failures, and the
listening loop only stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from importlib import metadata
from typing import Any

from roboz_helper import host_paths
from roboz_helper.connection import MAX_REQUESTS_PER_CONNECTION, ConnectionState, converse
from roboz_helper.exchange import send
from roboz_helper.listening import BACKLOG, open_listening_socket
from roboz_helper.log_format import fields
from roboz_helper.policy import Policy, PolicyError
from roboz_helper.protocol import Closing, RunCompletion
from roboz_helper.running import RunSlots
from roboz_helper.sandbox import reclaim_stale_runs
from roboz_helper.systemd import notify, status_update, take_notify_socket

__all__ = ["MAX_REQUESTS_PER_CONNECTION", "HelperServer"]

log = logging.getLogger("roboz_helper")


# Server settings that belong to the bound socket: a reload cannot change them.
_RESTART_ONLY = ("socket", "socket_group", "socket_mode")


def _helper_version() -> str:
    try:
        return metadata.version("roboz-helper")
    except metadata.PackageNotFoundError:
        return "unknown"


class HelperServer:
    """Serves clients under `policy`; SIGHUP re-reads `policy_path` (when given).

    A connection works with the policy in force when it was accepted, from the greeting to
    the end of its run, so a reload never changes the rules of an exchange under way. A kept
    connection's later requests are served only while that policy is still the one in force:
    after a reload the helper answers the next one with Closing, unread, and the client
    reconnects and is authorized (or refused) by the new policy.
    """

    def __init__(
        self, policy: Policy, socket_path: str | None = None, policy_path: str | None = None
    ) -> None:
        self.policy = policy
        self.policy_path = policy_path
        self.socket_path = socket_path or policy.server.socket
        self._admitted = 0
        # Kept connections waiting for their next request: a new client at the connection
        # limit takes the slot of one of them rather than being told busy.
        self.idle_kept: set[ConnectionState] = set()
        self.slots = RunSlots()
        self._handlers: set[asyncio.Task[None]] = set()
        self._reloading: asyncio.Task[None] | None = None
        self._reload_again = False
        self._stopping = asyncio.Event()
        # The signal that stopped the daemon, so the command can exit 130 after a SIGINT.
        self.stopped_by: int | None = None
        self.version = _helper_version()

    # --- life cycle ---------------------------------------------------------------------------

    async def serve(self) -> None:
        take_notify_socket()
        # Claim the socket first: a second helper started by mistake must stop at "in use"
        # before it touches anything else.
        listening = open_listening_socket(self.socket_path, self.policy.server)
        self.socket_path = listening.path
        try:
            reclaim_stale_runs()
            await self._serve_on(listening.sock)
        finally:
            listening.remove()
            log.info("roboz-helper stopped %s", fields(pid=os.getpid()))

    async def _serve_on(self, sock: socket.socket) -> None:
        options: dict[str, Any] = {"backlog": BACKLOG}
        if sys.version_info >= (3, 13):
            # 3.13 unlinks the path on close by default; an activation socket belongs to
            # systemd, and ListeningSocket.remove() cleans up what we bound ourselves.
            options["cleanup_socket"] = False
        server = await asyncio.start_unix_server(self._on_connect, sock=sock, **options)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop, signum)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        log.info(
            "roboz-helper ready on %s",
            fields(socket=self.socket_path, pid=os.getpid(), policy=self.policy_path),
        )
        notify("READY=1\n" + status_update(self._serving_status()))
        try:
            await self._stopping.wait()
        finally:
            notify("STOPPING=1")
            server.close()
            # Cancelling a handler cancels its run; the sandbox kills the run's processes
            # before the cancellation completes, so when gather returns nothing is left.
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            if self._reloading is not None:
                self._reloading.cancel()
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(signum)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a late reload must not kill us

    def stop(self, signum: int | None = None) -> None:
        """Shut down: kill runs in progress, tell their clients, close the socket."""
        if self.stopped_by is None:
            self.stopped_by = signum
        self._stopping.set()

    def reload(self) -> None:
        """SIGHUP: re-read and validate the policy file in the background.

        Signals that arrive during a reload make one more reload afterwards, so the file's
        last state always wins, however fast an operator (or a script) sends them.
        """
        if self._reloading is not None and not self._reloading.done():
            self._reload_again = True
            return
        self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        self._reload_again = True
        while self._reload_again:
            self._reload_again = False
            await self._reload_once()

    async def _reload_once(self) -> None:
        if self.policy_path is None:
            log.warning("policy_reload_skipped %s", fields(reason="serving without a policy file"))
            return
        try:
            # A thread: user and group lookups may ask a directory service.
            new = await asyncio.to_thread(host_paths.load_usable_policy, self.policy_path)
        except Exception as exc:
            # Not only PolicyError: whatever stops a reload must reach the operator, on the log
            # line and in `systemctl status`. An exception escaping here would end the task
            # with nothing but "Task exception was never retrieved" on stderr and drop a SIGHUP
            # queued behind it. The old policy stays in force.
            error = str(exc) if isinstance(exc, PolicyError) else f"unexpected {exc!r}"
            log.error(
                "policy_reload_failed %s",
                fields(path=self.policy_path, error=error, keeping="previous policy"),
            )
            # systemd keeps the last STATUS= until the next one: a later good reload clears it.
            notify(status_update(f"policy reload failed, previous policy in force: {error}"))
            return
        old = self.policy
        self.policy = new
        notify(status_update(self._serving_status()))
        log.info(
            "policy_reloaded %s",
            fields(
                path=self.policy_path,
                profiles=len(new.profiles),
                clients=len(new.clients),
                applies_to="new connections",
            ),
        )
        pending = [k for k in _RESTART_ONLY if getattr(new.server, k) != getattr(old.server, k)]
        if pending:
            log.warning(
                "policy_reload_incomplete %s",
                fields(settings=",".join(f"server.{k}" for k in pending), until="restart"),
            )

    def _serving_status(self) -> str:
        """systemd's one-line status while the policy in force is the file's current one."""
        return (
            f"serving on {self.socket_path}: {len(self.policy.profiles)} profiles, "
            f"{len(self.policy.clients)} client rules"
        )

    # --- one connection -----------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        policy = self.policy  # this connection's rules, whatever a reload does meanwhile
        state = ConnectionState(task)
        try:
            if self._admitted >= policy.server.max_connections and self.idle_kept:
                self._evict(self.idle_kept.pop())
            if self._admitted >= policy.server.max_connections:
                await send(
                    writer,
                    RunCompletion(
                        status="busy",
                        diagnostic=f"the helper is at its connection limit "
                        f"({policy.server.max_connections}); try again later",
                    ),
                )
                return
            self._admitted += 1
            try:
                await converse(self, reader, writer, policy, state)
            finally:
                self.idle_kept.discard(state)
                if not state.evicted:
                    self._admitted -= 1
        except asyncio.CancelledError:
            # Shutdown: tell a waiting client why its exchange ends, if it still listens. A
            # kept connection between requests has no run to report: its next request is unread.
            message: Closing | RunCompletion
            if state.evicted:
                message = Closing(reason="its slot went to a new connection at the limit")
            elif state.idle:
                message = Closing(reason="the helper is shutting down")
            else:
                message = RunCompletion(status="killed", diagnostic="the helper is shutting down")
            with contextlib.suppress(Exception):
                await send(writer, message, timeout=1.0)
            # The handler ends here, quietly: this task is the connection's top, and asyncio
            # would log a cancelled client task as an error with a traceback.
        except (ConnectionError, TimeoutError):
            pass  # the peer went away or stopped reading; nothing to tell it
        except Exception:
            log.exception("connection_error %s", fields(reason="unexpected error"))
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    def _evict(self, state: ConnectionState) -> None:
        """Close an idle kept connection (its next request is unread) and free its slot now."""
        state.evicted = True
        self._admitted -= 1
        state.task.cancel()
