"""Blocking client for the SafeScripts helper daemon, and the exchange it shares with the
asyncio client (``roboz.shed.safe_scripts.aio``).

A call connects, reads the helper's greeting, sends one request and reads frames until the single
RunCompletion. A run asks the helper to keep the connection open (``keep_open``); the next run
from this client reuses it when it is idle, still alive, and this process and its identity are
the ones that connected (peer credentials are the connection's). If the helper closes it
instead of reading the request (Closing, or the send fails), the request is sent once more on a
new connection; anything else that goes wrong on a connection closes it.

Transport and protocol failures raise SafeScriptsError subclasses;
a run that was refused, timed out or hit a limit is a normal result with that status, so an
agent can read the diagnostic and react.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

import msgspec
from roboz_helper import protocol
from roboz_helper.file_policy import FilePolicy
from roboz_helper.protocol import (
    Closing,
    ExecCommand,
    FrameError,
    Greeting,
    ListScripts,
    Output,
    ProtocolError,
    RunCompletion,
    RunScript,
    ScriptEntry,
)

from roboz.runtime.tracecontext import current_trace_id
from roboz.shed.guard._policy import PermissionPolicy

OutputCallback = Callable[[str, bytes], None]

DEFAULT_CAPTURE_BYTES = 1 << 20
HEADER_SIZE = protocol.HEADER.size
# Slack on top of the profile's run timeout before the client stops waiting: the helper's own
# deadline should always fire first and report `timeout` properly.
_RUN_GRACE_S = 15.0
# Idle kept connections a client holds at most (each holds one of the helper's connections).
MAX_IDLE_CONNECTIONS = 16


class SafeScriptsError(Exception):
    """Base class of every SafeScripts client error."""


class HelperUnavailable(SafeScriptsError):
    """The helper's socket is missing, refuses connections or is not accessible to us."""


class ClientRefused(SafeScriptsError):
    """The helper does not authorize this client (no matching [[clients]] rule)."""


class HelperBusy(SafeScriptsError):
    """The helper is at its connection limit or this client at its run limit."""


class ProtocolMismatch(SafeScriptsError):
    """The helper speaks another protocol version, or sent bytes we cannot decode."""


class HelperProtocolError(SafeScriptsError):
    """The helper rejected our request as malformed."""


class ConnectionLost(SafeScriptsError):
    """The helper closed the connection before sending a completion."""


class HelperTimeout(SafeScriptsError):
    """No frame from the helper within the client's timeout."""


@dataclass(frozen=True)
class ScriptInfo:
    name: str
    description: str


@dataclass(frozen=True)
class ShellScriptResult:
    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    diagnostic: str
    wall_time_s: float
    cpu_time_s: float
    peak_memory_bytes: int
    limit: str | None
    # True when more output arrived than the client keeps (max_capture_bytes per stream).
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def exit_status(self) -> int | None:
        """Shell convention: the exit code, or 128+N for death by signal N."""
        if self.exit_code is not None:
            return self.exit_code
        if self.signal is not None:
            return 128 + self.signal
        return None


class _Capture:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data += chunk

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


# --- the exchange, shared by the blocking and the asyncio client ----------------------------
# Both clients read the same frames and draw the same conclusions from them; only how bytes
# are read and written differs.


def frame_length(header: bytes) -> int:
    """The body length announced by a frame header."""
    try:
        return protocol.parse_length(header)
    except FrameError as exc:
        raise ProtocolMismatch(f"undecodable frame from the helper: {exc}") from None


def decode_frame(body: bytes) -> protocol.Response:
    try:
        return protocol.decode_response(body)
    except FrameError as exc:
        raise ProtocolMismatch(f"undecodable frame from the helper: {exc}") from None


def connect_error(exc: OSError, socket_path: str) -> SafeScriptsError:
    """What a failed connect to ``socket_path`` means for the caller."""
    if isinstance(exc, FileNotFoundError):
        return HelperUnavailable(f"no helper socket at {socket_path}; is roboz-helper running?")
    if isinstance(exc, ConnectionRefusedError):
        return HelperUnavailable(f"nothing is listening on {socket_path}; is roboz-helper running?")
    if isinstance(exc, PermissionError):
        return HelperUnavailable(
            f"permission denied on {socket_path}; is this user in the helper's group?"
        )
    if isinstance(exc, TimeoutError):
        return HelperTimeout(f"connecting to {socket_path} timed out")
    if exc.errno == errno.EAGAIN:  # listen backlog full
        return HelperBusy(f"the helper at {socket_path} is overloaded")
    return HelperUnavailable(f"cannot connect to {socket_path}: {exc}")


def script_request(
    path: str, args: Sequence[str], file_policy: FilePolicy | None = None
) -> RunScript:
    """The request to run ``path``, carrying the trace id in force (if any) to the helper's log
    and the file policy that narrows the run."""
    return RunScript(
        path=path, args=list(args), trace_id=current_trace_id(), file_policy=file_policy
    )


def command_request(argv: Sequence[str], file_policy: FilePolicy | None = None) -> ExecCommand:
    """The request to run ``argv``, carrying the trace id in force (if any)."""
    return ExecCommand(argv=list(argv), trace_id=current_trace_id(), file_policy=file_policy)


def wire_policy(policy: PermissionPolicy | FilePolicy | None) -> FilePolicy | None:
    """What a run request carries of the agent's file policy."""
    return policy.file_policy if isinstance(policy, PermissionPolicy) else policy


def check_greeting(frame: protocol.Response, restricting: bool = False) -> Greeting:
    """The helper's first frame: a greeting in a protocol version we speak, or why not. With
    ``restricting`` (the run carries a file policy) the helper must be able to apply it:
    one that cannot would run the script unrestricted, so the run does not happen."""
    if isinstance(frame, RunCompletion):
        _raise_for_handshake(frame)
    if not isinstance(frame, Greeting):
        raise ProtocolMismatch(f"expected a greeting, got {type(frame).__name__}")
    version = frame.protocol_version
    if not protocol.MIN_PROTOCOL_VERSION <= version <= protocol.PROTOCOL_VERSION:
        raise ProtocolMismatch(
            f"helper speaks protocol {version}, this client speaks "
            f"{protocol.MIN_PROTOCOL_VERSION}..{protocol.PROTOCOL_VERSION}"
        )
    if restricting and version < protocol.FILE_POLICY_VERSION:
        raise ProtocolMismatch(
            f"helper speaks protocol {version}, which cannot narrow a run by a file policy "
            f"(needs {protocol.FILE_POLICY_VERSION}); not running it unrestricted"
        )
    return frame


def run_timeout(timeout: float, greeting: Greeting) -> float:
    """How long to wait for a frame during a run: the run's own limit, plus grace."""
    return max(timeout, greeting.limits.timeout_s + _RUN_GRACE_S)


class ListingReader:
    """The frames answering ListScripts."""

    def __init__(self) -> None:
        self.found: list[ScriptInfo] = []

    def feed(self, frame: protocol.Response) -> list[ScriptInfo] | None:
        """The scripts once the listing is complete, else None."""
        if isinstance(frame, ScriptEntry):
            self.found.append(ScriptInfo(frame.name, frame.description))
            return None
        if isinstance(frame, RunCompletion):
            if frame.status != "listed":
                _raise_for_handshake(frame)
                raise SafeScriptsError(f"listing failed: {frame.diagnostic}")
            return self.found
        _unexpected(frame)


class RunReader:
    """The frames of one run: output (kept up to ``max_capture`` bytes per stream), then the
    completion that becomes the result."""

    def __init__(self, max_capture: int) -> None:
        self.out = _Capture(max_capture)
        self.err = _Capture(max_capture)

    def feed(self, frame: protocol.Response) -> Output | ShellScriptResult:
        if isinstance(frame, Output):
            (self.out if frame.stream == "stdout" else self.err).add(frame.data)
            return frame
        if isinstance(frame, RunCompletion):
            return ShellScriptResult(
                status=frame.status,
                exit_code=frame.exit_code,
                signal=frame.signal,
                stdout=self.out.text(),
                stderr=self.err.text(),
                diagnostic=frame.diagnostic,
                wall_time_s=frame.wall_time_s,
                cpu_time_s=frame.cpu_time_s,
                peak_memory_bytes=frame.peak_memory_bytes,
                limit=frame.limit,
                output_truncated=self.out.truncated or self.err.truncated,
            )
        _unexpected(frame)


def refused_result(exc: ClientRefused | HelperBusy) -> ShellScriptResult:
    """A run the helper would not start is a result (refused or busy), not an error."""
    return _empty_result("refused" if isinstance(exc, ClientRefused) else "busy", str(exc))


class NotStarted(Exception):
    """A kept connection ended before the helper read the request: send it on a new one."""


def owner() -> tuple[int, int, int]:
    """Who a connection speaks for: the helper saw this process and identity at connect."""
    return os.getpid(), os.geteuid(), os.getegid()


def first_frame(frame: protocol.Response, reused: bool) -> protocol.Response:
    """The first answer to a request; on a reused connection Closing means it was not read."""
    if isinstance(frame, Closing):
        if reused:
            raise NotStarted
        raise ConnectionLost(f"the helper closed the connection: {frame.reason}")
    return frame


def kept_open(frame: protocol.Response) -> bool:
    return isinstance(frame, RunCompletion) and frame.keep_open


class _Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.owner = owner()

    def alive(self) -> bool:
        """Nothing pending and not hung up: an idle connection the helper has not closed
        (a Closing frame or EOF waiting would make it readable)."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return not poller.poll(0)

    def recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except TimeoutError:
                raise HelperTimeout("timed out waiting for the helper") from None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionLost("the helper closed the connection unexpectedly")
            buf += chunk
        return bytes(buf)

    def read(self) -> protocol.Response:
        return decode_frame(self.recv_exactly(frame_length(self.recv_exactly(HEADER_SIZE))))

    def send(self, message: protocol.Request) -> None:
        try:
            self.sock.sendall(protocol.encode_frame(message))
        except (BrokenPipeError, ConnectionResetError):
            raise ConnectionLost("the helper closed the connection unexpectedly") from None


class ClientSettings:
    """Where the helper is and how long to wait for it; shared by both clients."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        timeout: float = 10.0,
        max_capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        reuse_connections: bool = True,
        file_policy: PermissionPolicy | FilePolicy | None = None,
    ) -> None:
        self.socket_path = os.fspath(socket_path)
        self.timeout = timeout
        self.max_capture_bytes = max_capture_bytes
        self.reuse_connections = reuse_connections
        # Every run of this client is narrowed by it (the agent's guarded-files policy).
        self.file_policy = wire_policy(file_policy)


class SafeScriptsClient(ClientSettings):
    """Talk to a roboz-helper on `socket_path`.

    `timeout` bounds connecting and each wait for a frame; while a run is in progress the wait
    is stretched to the run's own time limit announced in the greeting. Runs reuse kept
    connections (one run at a time on each) unless `reuse_connections` is False; `close()`
    drops the idle ones. With `file_policy` (the agent's PermissionPolicy) every run is
    narrowed by it inside the sandbox; a helper too old to apply it gets no run at all.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        timeout: float = 10.0,
        max_capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        reuse_connections: bool = True,
        file_policy: PermissionPolicy | FilePolicy | None = None,
    ) -> None:
        super().__init__(socket_path, timeout, max_capture_bytes, reuse_connections, file_policy)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the idle kept connections (a later run connects again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.sock.close()

    # --- public API ---------------------------------------------------------------------------

    def check(self) -> Greeting:
        """Connect and return the helper's greeting, or raise why that is not possible."""
        conn = self._connect()
        try:
            return check_greeting(conn.read())
        finally:
            conn.sock.close()

    def list_scripts(self) -> list[ScriptInfo]:
        conn = self._connect()
        try:
            check_greeting(conn.read())
            conn.send(ListScripts())
            listing = ListingReader()
            while (found := listing.feed(conn.read())) is None:
                pass
            return found
        finally:
            conn.sock.close()

    def run_script(
        self,
        path: str,
        args: Sequence[str] = (),
        on_output: OutputCallback | None = None,
    ) -> ShellScriptResult:
        """Run `path` (relative to the profile's scripts directory) with `args`."""
        return self._run(script_request(path, args, self.file_policy), on_output)

    def exec_command(
        self, argv: Sequence[str], on_output: OutputCallback | None = None
    ) -> ShellScriptResult:
        """Run an allowlisted executable; argv[0] must be its absolute path."""
        return self._run(command_request(argv, self.file_policy), on_output)

    # --- internals ----------------------------------------------------------------------------

    def _connect(self) -> _Connection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError as exc:
            sock.close()
            raise connect_error(exc, self.socket_path) from None
        return _Connection(sock)

    def _take_idle(self) -> _Connection | None:
        me = owner()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.owner == me and conn.alive():
                return conn
            if conn.owner[0] == me[0]:
                conn.sock.close()
            # else: inherited over fork; the parent's connection is not ours to use or close

    def _keep(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.sock.close()

    def _run(
        self, request: RunScript | ExecCommand, on_output: OutputCallback | None
    ) -> ShellScriptResult:
        if self.reuse_connections:
            request = msgspec.structs.replace(request, keep_open=True)
            conn = self._take_idle()
            if conn is not None:
                try:
                    return self._exchange(conn, request, on_output, reused=True)
                except NotStarted:
                    pass  # the helper closed it unread: once more on a new connection
        conn = self._connect()
        try:
            greeting = check_greeting(conn.read(), request.file_policy is not None)
        except (ClientRefused, HelperBusy) as exc:
            conn.sock.close()
            return refused_result(exc)
        except BaseException:
            conn.sock.close()
            raise
        conn.sock.settimeout(run_timeout(self.timeout, greeting))
        return self._exchange(conn, request, on_output, reused=False)

    def _exchange(
        self,
        conn: _Connection,
        request: RunScript | ExecCommand,
        on_output: OutputCallback | None,
        reused: bool,
    ) -> ShellScriptResult:
        keep = False
        try:
            try:
                conn.send(request)
            except ConnectionLost:
                # Refused by a socket the helper had closed: the request never arrived. (An
                # end without any answer after the request was sent proves nothing: no retry.)
                if reused:
                    raise NotStarted from None
                raise
            frame = first_frame(conn.read(), reused)
            run = RunReader(self.max_capture_bytes)
            while True:
                item = run.feed(frame)
                if isinstance(item, ShellScriptResult):
                    keep = self.reuse_connections and kept_open(frame)
                    return item
                if on_output is not None:
                    on_output(item.stream, item.data)
                frame = conn.read()
        finally:
            if keep:
                self._keep(conn)
            else:
                conn.sock.close()


def _raise_for_handshake(frame: RunCompletion) -> None:
    if frame.status == "refused":
        raise ClientRefused(frame.diagnostic or "the helper refused this client")
    if frame.status == "busy":
        raise HelperBusy(frame.diagnostic or "the helper is busy")
    raise ConnectionLost(f"the helper ended the exchange: {frame.status}: {frame.diagnostic}")


def _unexpected(frame: protocol.Response) -> NoReturn:
    if isinstance(frame, ProtocolError):
        raise HelperProtocolError(f"the helper rejected the request: {frame.message}")
    raise ProtocolMismatch(f"unexpected {type(frame).__name__} frame from the helper")


def _empty_result(status: str, diagnostic: str) -> ShellScriptResult:
    return ShellScriptResult(
        status=status,
        exit_code=None,
        signal=None,
        stdout="",
        stderr="",
        diagnostic=diagnostic,
        wall_time_s=0.0,
        cpu_time_s=0.0,
        peak_memory_bytes=0,
        limit=None,
    )
