"""The helper daemon: accept clients on a Unix socket, authorize them, run their requests.

Each connection is one exchange, or several runs one after another for a client that asks
for that (see protocol.py). Whatever a client sends, the worst it can do
is end its own connection: every handler catches its own failures, and the listening loop only
stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections import Counter
from importlib import metadata
from typing import Any

import msgspec

from roboz_helper import host_paths, protocol, runs, scripts
from roboz_helper.exchange import (
    SEND_TIMEOUT_S,
    Client,
    RunRecord,
    read_request,
    refusal_for,
    send,
    supervise,
)
from roboz_helper.listening import BACKLOG, open_listening_socket
from roboz_helper.log_format import fields
from roboz_helper.peer import PeerCredentials, peer_credentials
from roboz_helper.policy import Policy, PolicyError, match_client
from roboz_helper.protocol import (
    Closing,
    ExecCommand,
    FrameError,
    Greeting,
    ListScripts,
    ProtocolError,
    RunCompletion,
    RunScript,
    ScriptEntry,
)
from roboz_helper.sandbox import reclaim_stale_runs
from roboz_helper.systemd import notify, status_update, take_notify_socket

log = logging.getLogger("roboz_helper")

# How long a request waits for the slot of a run whose client went away (being killed; the
# sandbox's kill takes milliseconds, its retry comes after a second) before it is busy.
ENDING_RUN_WAIT_S = 2.0
# A kept connection (keep_open) takes at most this many requests, then closes after the last
# completion; between requests it waits as long as a new connection waits for its first
# (server.handshake_timeout_s).
MAX_REQUESTS_PER_CONNECTION = 100


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
        self._idle_kept: set[_ConnectionState] = set()
        self._runs_per_uid: Counter[int] = Counter()
        # Runs whose client went away, being killed: a slot they hold frees within moments.
        self._ending_per_uid: Counter[int] = Counter()
        self._slot_freed: asyncio.Condition | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._reloading: asyncio.Task[None] | None = None
        self._reload_again = False
        self._stopping = asyncio.Event()
        # The signal that stopped the daemon, so the command can exit 130 after a SIGINT.
        self.stopped_by: int | None = None
        self._version = _helper_version()

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
        state = _ConnectionState(task)
        try:
            if self._admitted >= policy.server.max_connections and self._idle_kept:
                self._evict(self._idle_kept.pop())
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
                await self._converse(reader, writer, policy, state)
            finally:
                self._idle_kept.discard(state)
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

    def _evict(self, state: _ConnectionState) -> None:
        """Close an idle kept connection (its next request is unread) and free its slot now."""
        state.evicted = True
        self._admitted -= 1
        state.task.cancel()

    async def _converse(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        policy: Policy,
        state: _ConnectionState,
    ) -> None:
        try:
            peer = peer_credentials(writer.get_extra_info("socket"))
        except OSError as exc:
            await send(
                writer, RunCompletion(status="refused", diagnostic=f"no peer credentials: {exc}")
            )
            return
        profile_name = match_client(policy, peer.uid, peer.gid, peer.groups)
        if profile_name is None:
            log.info(
                "refused %s",
                fields(uid=peer.uid, gid=peer.gid, pid=peer.pid, reason="no [[clients]] rule"),
            )
            await send(
                writer,
                RunCompletion(
                    status="refused",
                    diagnostic=f"uid {peer.uid} (gid {peer.gid}) is not authorized "
                    "by the helper's policy",
                ),
            )
            return
        profile = policy.profiles[profile_name]
        await send(
            writer,
            Greeting(
                protocol_version=protocol.PROTOCOL_VERSION,
                helper_version=self._version,
                profile=profile_name,
                uid=peer.uid,
                limits=runs.limits_of(profile, policy.server.max_runs_per_client),
            ),
        )
        try:
            request = await asyncio.wait_for(
                read_request(reader), policy.server.handshake_timeout_s
            )
        except TimeoutError:
            await send(
                writer,
                ProtocolError(message=f"no request within {policy.server.handshake_timeout_s:g}s"),
            )
            return
        except FrameError as exc:
            log.info("protocol_error %s", fields(uid=peer.uid, pid=peer.pid, error=str(exc)))
            await send(writer, ProtocolError(message=str(exc)))
            return
        except asyncio.IncompleteReadError:
            return  # the client hung up before finishing its request

        client = Client(peer, profile_name, profile, policy.server.max_runs_per_client)
        if isinstance(request, ListScripts):
            await self._list(writer, client)
            return
        served = 1
        while await self._run(
            reader,
            writer,
            client,
            request,
            request.keep_open and served < MAX_REQUESTS_PER_CONNECTION,
        ):
            state.idle = True  # left set if cancelled: shutdown then says Closing
            self._idle_kept.add(state)
            next_request = await self._next_request(reader, writer, policy, peer)
            self._idle_kept.discard(state)
            state.idle = False
            if next_request is None:
                return
            request = next_request
            served += 1

    async def _next_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        policy: Policy,
        peer: PeerCredentials,
    ) -> RunScript | ExecCommand | None:
        """The next request on a kept connection, or None when the connection ends here."""
        timeout = policy.server.handshake_timeout_s
        try:
            request = await asyncio.wait_for(read_request(reader), timeout)
        except TimeoutError:
            await send(writer, Closing(reason=f"no request within {timeout:g}s"))
            return None
        except FrameError as exc:
            log.info("protocol_error %s", fields(uid=peer.uid, pid=peer.pid, error=str(exc)))
            await send(writer, ProtocolError(message=str(exc)))
            return None
        except asyncio.IncompleteReadError:
            return None  # the client hung up, between requests or inside one
        if self.policy is not policy:
            # Checked after the read, so a request that raced the reload is refused unread too.
            await send(writer, Closing(reason="the helper's policy was reloaded"))
            return None
        if isinstance(request, ListScripts):
            await send(writer, ProtocolError(message="list_scripts on a kept connection"))
            return None
        return request

    async def _list(self, writer: asyncio.StreamWriter, client: Client) -> None:
        record = RunRecord(client, {"kind": "list"})
        profile = client.profile
        unusable = refusal_for(host_paths.listing_problems(client.profile_name, profile))
        if unusable is not None:
            record("refused", logging.WARNING, reason=unusable)
            await send(writer, RunCompletion(status="refused", diagnostic=unusable))
            return
        try:
            entries = await asyncio.to_thread(scripts.list_scripts, profile.scripts_dir)
        except OSError as exc:
            diagnostic = f"scripts directory unavailable: {exc.strerror}"
            record("failed", logging.WARNING, reason=diagnostic)
            await send(writer, RunCompletion(status="failed", diagnostic=diagnostic))
            return
        for entry in entries:
            writer.write(
                protocol.encode_frame(ScriptEntry(name=entry.name, description=entry.description))
            )
            await asyncio.wait_for(writer.drain(), SEND_TIMEOUT_S)
        await send(writer, RunCompletion(status="listed", diagnostic=f"{len(entries)} scripts"))
        record("listed", scripts=len(entries))

    def _slots(self) -> asyncio.Condition:
        if self._slot_freed is None:
            self._slot_freed = asyncio.Condition()
        return self._slot_freed

    async def _notify_slot_freed(self) -> None:
        async with self._slots():
            self._slots().notify_all()

    async def _slot_of_an_ending_run(self, uid: int, max_runs: int) -> None:
        """A client that hangs up and asks again at once finds its old run still being killed
        (that takes a few milliseconds): wait for that, briefly, rather than answer busy."""

        def free_or_nothing_ending() -> bool:
            return self._runs_per_uid[uid] < max_runs or not self._ending_per_uid[uid]

        with contextlib.suppress(TimeoutError):
            async with self._slots():
                await asyncio.wait_for(
                    self._slots().wait_for(free_or_nothing_ending), ENDING_RUN_WAIT_S
                )

    async def _run(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: Client,
        request: RunScript | ExecCommand,
        keep_open: bool = False,
    ) -> bool:
        """Serve one run request; True if its completion kept the connection open."""
        peer, profile = client.peer, client.profile
        run_id = runs.new_run_id()
        record = RunRecord(client, runs.request_fields(request), run_id)
        if self._runs_per_uid[peer.uid] >= client.max_runs and self._ending_per_uid[peer.uid]:
            await self._slot_of_an_ending_run(peer.uid, client.max_runs)
        if self._runs_per_uid[peer.uid] >= client.max_runs:
            record("busy")
            await send(
                writer,
                RunCompletion(
                    status="busy",
                    diagnostic=f"uid {peer.uid} already has {client.max_runs} runs in progress",
                ),
            )
            return False
        unusable = refusal_for(host_paths.run_problems(client.profile_name, profile))
        if unusable is not None:
            record("refused", logging.WARNING, reason=unusable)
            await send(writer, RunCompletion(status="refused", diagnostic=unusable))
            return False
        script_fd: int | None = None
        try:
            if isinstance(request, RunScript):
                runs.check_args(request.args)
                script_fd = scripts.open_script(profile.scripts_dir, request.path)
                argv = [request.path, *request.args]
            else:
                argv = runs.exec_argv(profile, request)
            spec = runs.build_spec(profile, argv, script_fd, run_id, request.file_policy)
        except (scripts.ScriptRefused, runs.RunRefused, PolicyError) as exc:
            if script_fd is not None:
                os.close(script_fd)
            record("refused", reason=str(exc))
            await send(writer, RunCompletion(status="refused", diagnostic=str(exc)))
            return False

        self._runs_per_uid[peer.uid] += 1
        ending = False

        def client_gone() -> None:
            nonlocal ending
            ending = True
            self._ending_per_uid[peer.uid] += 1

        try:
            completion = await supervise(reader, writer, profile, spec, client_gone)
        except asyncio.CancelledError:
            record("killed", reason="helper shutting down")
            raise
        finally:
            self._runs_per_uid[peer.uid] -= 1
            if self._runs_per_uid[peer.uid] <= 0:
                del self._runs_per_uid[peer.uid]
            if ending:
                self._ending_per_uid[peer.uid] -= 1
                if self._ending_per_uid[peer.uid] <= 0:
                    del self._ending_per_uid[peer.uid]
            await self._notify_slot_freed()
            if script_fd is not None:
                os.close(script_fd)
        if completion is None:
            record("killed", reason="client disconnected")
            return False
        record(
            completion.status,
            exit=completion.exit_code,
            signal=completion.signal,
            limit=completion.limit,
            diagnostic=None if completion.status == "success" else completion.diagnostic,
        )
        if keep_open:
            completion = msgspec.structs.replace(completion, keep_open=True)
        await send(writer, completion)
        return keep_open


class _ConnectionState:
    """What a connection's handler is doing, for its last message."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task
        self.idle = False  # a kept connection between requests
        self.evicted = False  # closed while idle to admit a new connection at the limit
