"""The SafeScripts client's protocol, written once and without I/O: what to send and read,
what the helper's frames mean, when a kept connection is reused, and when a request goes
once more on a new connection. The blocking client (client.py) and the asyncio client
(aio.py) are shells that carry out its steps on their own sockets (what else they share is
in shells.py; what the calls return and raise, in results.py).

A call is a generator of steps; the shell performs each and sends back the answer:

    TakeIdle()      go on on one of this client's idle kept connections, if it has a usable
                    one (its own process and identity, open, nothing waiting) -> bool
    Connect()       go on on a new connection (its greeting is the first frame to read)
    ReadFrame()     the helper's next frame -> protocol.Response (read and decoded with
                    frame_length and decode_frame)
    Send(data)      all of data
    Wait(seconds)   from now on, how long to wait for each frame on this connection
    Emit(s, data)   a chunk of the run's output (s: "stdout" or "stderr") for the caller
    Keep()          once the call returns, the connection is kept idle for the next run

Whenever a call moves to another connection or ends (returns or raises), the shell closes the
connection it was on, unless the last step was Keep. An I/O failure is thrown into the
generator as the SafeScriptsError it means (a failed send as ConnectionLost), so that the
protocol decides what it means here: on a reused connection a refused send, or a Closing
frame instead of an answer, prove the helper did not read the request, which then goes once
more on a new connection; anything else that goes wrong on a connection ends the call.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NamedTuple, NoReturn, TypeVar, cast

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
from roboz.shed.safe_scripts.network import RunNetwork
from roboz.shed.safe_scripts.results import (
    ClientRefused,
    ConnectionLost,
    HelperBusy,
    HelperProtocolError,
    ProtocolMismatch,
    ScriptInfo,
    ShellScriptResult,
)
from roboz.shed.safe_scripts.shells import ClientSettings

HEADER_SIZE = protocol.HEADER.size
# Slack on top of the profile's run timeout before the client stops waiting: the helper's own
# deadline should always fire first and report `timeout` properly.
_RUN_GRACE_S = 15.0


class _NotStarted(Exception):
    """A kept connection ended before the helper read the request: send it on a new one."""


# --- the steps -------------------------------------------------------------------------------


class TakeIdle(NamedTuple):
    pass


class Connect(NamedTuple):
    pass


class ReadFrame(NamedTuple):
    pass


class Send(NamedTuple):
    data: bytes


class Wait(NamedTuple):
    seconds: float


class Emit(NamedTuple):
    stream: str
    data: bytes


class Keep(NamedTuple):
    pass


Step = TakeIdle | Connect | ReadFrame | Send | Wait | Emit | Keep
T = TypeVar("T")
Steps = Generator[Step, protocol.Response | bool | None, T]


# --- the calls -------------------------------------------------------------------------------


def check_call() -> Steps[Greeting]:
    yield Connect()
    return _greeting(_frame((yield ReadFrame())))


def list_call() -> Steps[list[ScriptInfo]]:
    yield Connect()
    _greeting(_frame((yield ReadFrame())))
    yield Send(protocol.encode_frame(ListScripts()))
    found: list[ScriptInfo] = []
    while True:
        frame = _frame((yield ReadFrame()))
        if isinstance(frame, ScriptEntry):
            found.append(ScriptInfo(frame.name, frame.description))
        elif isinstance(frame, RunCompletion):
            if frame.status != "listed":
                _raise_for_handshake(frame)
            return found
        else:
            _unexpected(frame)


def run_call(
    settings: ClientSettings, request: RunScript | ExecCommand
) -> Steps[ShellScriptResult]:
    """One run: on a kept connection when the client keeps them and has one, else (or once
    more, when the kept one proves the request unread) on a new connection."""
    if settings.reuse_connections:
        request = msgspec.structs.replace(request, keep_open=True)
        if (yield TakeIdle()):
            try:
                return (yield from _exchange(settings, request, reused=True))
            except _NotStarted:
                pass
    yield Connect()
    try:
        greeting = _greeting(_frame((yield ReadFrame())), request)
    except (ClientRefused, HelperBusy) as exc:
        # A run the helper would not start is a result (refused or busy), not an error.
        return _empty_result("refused" if isinstance(exc, ClientRefused) else "busy", str(exc))
    # While a run is in progress the wait for a frame stretches to the run's own time limit.
    yield Wait(max(settings.timeout, greeting.limits.timeout_s + _RUN_GRACE_S))
    return (yield from _exchange(settings, request, reused=False))


def _exchange(
    settings: ClientSettings, request: RunScript | ExecCommand, reused: bool
) -> Steps[ShellScriptResult]:
    try:
        yield Send(protocol.encode_frame(request))
    except ConnectionLost:
        # Refused by a socket the helper had closed: the request never arrived. (An end
        # without any answer after the request was sent proves nothing: no retry.)
        if reused:
            raise _NotStarted from None
        raise
    frame = _frame((yield ReadFrame()))
    if isinstance(frame, Closing):
        if reused:
            raise _NotStarted
        raise ConnectionLost(f"the helper closed the connection: {frame.reason}")
    out, err = _Capture(settings.max_capture_bytes), _Capture(settings.max_capture_bytes)
    while not isinstance(frame, RunCompletion):
        if not isinstance(frame, Output):
            _unexpected(frame)
        (out if frame.stream == "stdout" else err).add(frame.data)
        yield Emit(frame.stream, frame.data)
        frame = _frame((yield ReadFrame()))
    if settings.reuse_connections and frame.keep_open:
        yield Keep()
    return ShellScriptResult(
        status=frame.status,
        exit_code=frame.exit_code,
        signal=frame.signal,
        stdout=out.text(),
        stderr=err.text(),
        diagnostic=frame.diagnostic,
        wall_time_s=frame.wall_time_s,
        cpu_time_s=frame.cpu_time_s,
        peak_memory_bytes=frame.peak_memory_bytes,
        limit=frame.limit,
        output_truncated=out.truncated or err.truncated,
        network=RunNetwork.from_report(frame.network) if frame.network is not None else None,
    )


def script_request(
    path: str,
    args: Sequence[str],
    file_policy: FilePolicy | None = None,
    network_allow: tuple[str, ...] | None = None,
) -> RunScript:
    """The request to run ``path``, carrying the trace id in force (if any) to the helper's log,
    the file policy that narrows the run and the hosts it asks for (of its allowlist)."""
    return RunScript(
        path=path,
        args=list(args),
        trace_id=current_trace_id(),
        file_policy=file_policy,
        network_allow=network_allow,
    )


def command_request(
    argv: Sequence[str],
    file_policy: FilePolicy | None = None,
    network_allow: tuple[str, ...] | None = None,
) -> ExecCommand:
    """The request to run ``argv``, carrying the trace id in force (if any)."""
    return ExecCommand(
        argv=list(argv),
        trace_id=current_trace_id(),
        file_policy=file_policy,
        network_allow=network_allow,
    )


def _frame(answer: protocol.Response | bool | None) -> protocol.Response:
    """What the shell answered a ReadFrame with (typed: the steps share one answer type)."""
    return cast(protocol.Response, answer)


def frame_length(header: bytes) -> int:
    """The body length a frame header announces."""
    try:
        return protocol.parse_length(header)
    except FrameError as exc:
        raise ProtocolMismatch(f"undecodable frame from the helper: {exc}") from None


def decode_frame(body: bytes) -> protocol.Response:
    try:
        return protocol.decode_response(body)
    except FrameError as exc:
        raise ProtocolMismatch(f"undecodable frame from the helper: {exc}") from None


def _greeting(frame: protocol.Response, request: RunScript | ExecCommand | None = None) -> Greeting:
    """The helper's first frame: a greeting in a protocol version we speak, or why not. A run
    that narrows itself (a file policy, a subset of the network allowlist) needs a helper
    that can apply that: one that cannot would run it wider, so the run does not happen."""
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
    if request is None:
        return frame
    if request.file_policy is not None and version < protocol.FILE_POLICY_VERSION:
        raise ProtocolMismatch(
            f"helper speaks protocol {version}, which cannot narrow a run by a file policy "
            f"(needs {protocol.FILE_POLICY_VERSION}); not running it unrestricted"
        )
    if request.network_allow is not None and version < protocol.NETWORK_ALLOW_VERSION:
        raise ProtocolMismatch(
            f"helper speaks protocol {version}, which cannot narrow a run's network "
            f"(needs {protocol.NETWORK_ALLOW_VERSION}); not running it with more hosts"
        )
    return frame


def _raise_for_handshake(frame: RunCompletion) -> NoReturn:
    if frame.status == "refused":
        raise ClientRefused(frame.diagnostic or "the helper refused this client")
    if frame.status == "busy":
        raise HelperBusy(frame.diagnostic or "the helper is busy")
    raise ConnectionLost(f"the helper ended the exchange: {frame.status}: {frame.diagnostic}")


def _unexpected(frame: protocol.Response) -> NoReturn:
    if isinstance(frame, ProtocolError):
        raise HelperProtocolError(f"the helper rejected the request: {frame.message}")
    raise ProtocolMismatch(f"unexpected {type(frame).__name__} frame from the helper")


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
