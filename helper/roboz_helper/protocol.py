"""Wire protocol between the SafeScripts helper and its clients.

A connection carries one exchange::

    helper -> client   Greeting            (or a refused/busy RunCompletion, then close)
    client -> helper   one Request         (ListScripts | RunScript | ExecCommand)
    helper -> client   Output* / ScriptEntry*
    helper -> client   exactly one RunCompletion, then close

unless a run request says ``keep_open``: then a completion with ``keep_open`` set means the
connection takes one more request (sent only after that completion; one at a time), under the
same peer credentials. Instead of answering such a later request the helper may send a
Closing frame and hang up (idle too long, policy reloaded, shutting down): that request was
not read, so nothing of it ran and the client may send it again on a new connection.

A request that cannot be decoded gets a ProtocolError frame instead and the connection closes.

Every frame is a 4-byte big-endian length followed by that many bytes of msgpack. Decoding is
strict: unknown fields, wrong types, unknown tags, trailing bytes and frames over
MAX_FRAME_BYTES are errors. Fields at their default are left out when encoding, so a frame
that uses nothing of a newer version is the bytes an older peer expects. This module depends
on msgspec and the standard library only, because the library client imports it and the
helper's trusted base must stay small.
"""

from __future__ import annotations

import struct
from typing import Annotated, Final, Literal, cast

import msgspec

from roboz_helper.egress.allowlist import NetworkAllow
from roboz_helper.egress.report import NetworkReport
from roboz_helper.file_policy import FilePolicy
from roboz_helper.run_states import Limit, NetworkMode, RunStatus

# 2: a run request may carry a file policy (``file_policy``) that narrows the run's view of
# the workdir. A version-1 helper decodes strictly and refuses the unknown field, and a
# client refuses to send one to a helper that greets with version 1: a restriction is
# applied or nothing runs, never silently dropped.
# 3: a profile's network may be an allowlist (the greeting's ``limits.network``); a run
# request may narrow it (``network_allow``); the completion of a run with an allowlist
# reports its traffic and every refused attempt (``network``). A client sends
# ``network_allow`` only to a helper that greets with 3 or later.
PROTOCOL_VERSION: Final = 3
# The oldest helper a client still talks to (for runs without a file policy).
MIN_PROTOCOL_VERSION: Final = 1
FILE_POLICY_VERSION: Final = 2
NETWORK_ALLOW_VERSION: Final = 3

# Large enough for a request with a long argv, small enough that a hostile peer cannot make
# either side allocate much before the length check rejects it.
MAX_FRAME_BYTES: Final = 256 * 1024

# Output chunks are split below the frame limit so that msgpack overhead never pushes a
# frame over it.
MAX_CHUNK_BYTES: Final = 64 * 1024

HEADER: Final = struct.Struct(">I")

# A sandbox run's own statuses plus the helper's answers that involve no run.
Status = Literal[RunStatus, "listed", "refused", "busy"]
StreamName = Literal["stdout", "stderr"]


class _Frame(
    msgspec.Struct,
    tag_field="type",
    forbid_unknown_fields=True,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
):
    """Common base: every frame is tagged by its `type` field and rejects unknown fields."""


# --- requests (client -> helper) -------------------------------------------------------------


class ListScripts(_Frame, tag="list_scripts", frozen=True):
    """List the scripts the caller's profile may run."""


# A W3C trace id (32 lower-case hex digits), so a run's log line can be found from the trace of
# the agent step that asked for it. Anything else is a protocol error, never logged raw.
TraceId = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]


class RunScript(_Frame, tag="run_script", frozen=True):
    """Run a script by its path relative to the profile's scripts directory."""

    path: str
    args: list[str] = []
    trace_id: TraceId | None = None
    # Ask for the connection to stay open for another request after this one's completion.
    keep_open: bool = False
    # The agent's file policy: a restriction of this run's view of the workdir (and of the
    # profile's other binds), composed with the profile's own file policy; never a widening.
    file_policy: FilePolicy | None = None
    # Allowlist entries this run needs, each within the profile's allowlist (a subset, never
    # more); None: the profile's whole allowlist.
    network_allow: tuple[str, ...] | None = None


class ExecCommand(_Frame, tag="exec_command", frozen=True):
    """Run an allowlisted executable; argv[0] must be one of the profile's commands."""

    argv: list[str]
    trace_id: TraceId | None = None
    keep_open: bool = False
    file_policy: FilePolicy | None = None
    network_allow: tuple[str, ...] | None = None


Request = ListScripts | RunScript | ExecCommand


# --- responses (helper -> client) ------------------------------------------------------------


class Limits(
    msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, omit_defaults=True
):
    """The limits of the caller's profile, so a client can plan before it asks."""

    timeout_s: float
    max_output_bytes: int
    pids_max: int
    memory_max_bytes: int
    cpu_time_s: int
    max_file_bytes: int
    tmp_size_bytes: int
    nofile_max: int
    network: NetworkMode | NetworkAllow
    max_runs: int


class Greeting(_Frame, tag="greeting", frozen=True):
    protocol_version: int
    helper_version: str
    profile: str
    uid: int
    limits: Limits
    max_frame_bytes: int = MAX_FRAME_BYTES


class Output(_Frame, tag="output", frozen=True):
    stream: StreamName
    data: bytes


class ScriptEntry(_Frame, tag="script", frozen=True):
    name: str
    description: str = ""


class RunCompletion(_Frame, tag="completion", frozen=True):
    status: Status
    exit_code: int | None = None
    signal: int | None = None
    diagnostic: str = ""
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    peak_memory_bytes: int = 0
    limit: Limit | None = None
    # The connection takes another request (the run asked for keep_open and the helper agreed).
    keep_open: bool = False
    # A run with an allowlist: its traffic through the helper's proxy, every refusal listed.
    network: NetworkReport | None = None


class Closing(_Frame, tag="closing", frozen=True):
    """The helper hangs up on a kept connection without reading the next request, if any."""

    reason: str


class ProtocolError(_Frame, tag="protocol_error", frozen=True):
    """Sent instead of a RunCompletion when the peer's bytes were not a valid request."""

    message: str


Response = Greeting | Output | ScriptEntry | RunCompletion | Closing | ProtocolError


# --- framing ---------------------------------------------------------------------------------


class FrameError(ValueError):
    """Bytes on the wire do not form a valid frame."""


_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(Request)
_response_decoder = msgspec.msgpack.Decoder(Response)


def encode_frame(message: Request | Response, max_frame_bytes: int = MAX_FRAME_BYTES) -> bytes:
    body = _encoder.encode(message)
    if len(body) > max_frame_bytes:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {max_frame_bytes}")
    return HEADER.pack(len(body)) + body


def parse_length(header: bytes, max_frame_bytes: int = MAX_FRAME_BYTES) -> int:
    """Validate a length prefix before reading (and allocating for) the body."""
    if len(header) != HEADER.size:
        raise FrameError("truncated length prefix")
    (length,) = HEADER.unpack(header)
    if length == 0:
        raise FrameError("empty frame")
    if length > max_frame_bytes:
        raise FrameError(f"frame length {length} exceeds the limit of {max_frame_bytes}")
    return int(length)


def _decode(decoder: msgspec.msgpack.Decoder, body: bytes, what: str) -> object:
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise FrameError(f"invalid {what}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise FrameError(f"malformed {what}: {exc}") from None


def decode_request(body: bytes) -> Request:
    # The decoder was built for exactly this union, so the result has that type.
    return cast(Request, _decode(_request_decoder, body, "request"))


def decode_response(body: bytes) -> Response:
    return cast(Response, _decode(_response_decoder, body, "response"))


def split_output(stream: StreamName, data: bytes) -> list[Output]:
    """Cut one chunk of process output into frames that each fit the frame limit."""
    return [
        Output(stream=stream, data=data[i : i + MAX_CHUNK_BYTES])
        for i in range(0, len(data), MAX_CHUNK_BYTES)
    ]
