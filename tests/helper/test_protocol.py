"""Framing and strict decoding of the helper protocol, without a daemon."""

from __future__ import annotations

import msgspec
import pytest
from roboz_helper import protocol
from roboz_helper.protocol import (
    ExecCommand,
    FrameError,
    Greeting,
    Limits,
    ListScripts,
    Output,
    ProtocolError,
    RunCompletion,
    RunScript,
    ScriptEntry,
)

LIMITS = Limits(
    timeout_s=5.0,
    max_output_bytes=1000,
    pids_max=16,
    memory_max_bytes=1 << 26,
    cpu_time_s=5,
    max_file_bytes=1 << 20,
    tmp_size_bytes=1 << 20,
    nofile_max=64,
    network="none",
    max_runs=2,
)


def _unframe(frame: bytes) -> bytes:
    length = protocol.parse_length(frame[:4])
    assert len(frame) == 4 + length
    return frame[4:]


@pytest.mark.parametrize(
    "request_",
    [
        ListScripts(),
        RunScript(path="a/b.sh", args=["x", ""]),
        ExecCommand(argv=["/bin/echo", "hi"]),
    ],
)
def test_every_request_round_trips(request_: protocol.Request) -> None:
    assert protocol.decode_request(_unframe(protocol.encode_frame(request_))) == request_


@pytest.mark.parametrize(
    "response",
    [
        Greeting(protocol_version=1, helper_version="t", profile="p", uid=1, limits=LIMITS),
        Output(stream="stderr", data=b"\x00\xffbytes"),
        ScriptEntry(name="x.sh", description="does x"),
        RunCompletion(status="timeout", signal=9, limit="timeout", wall_time_s=1.5),
        ProtocolError(message="bad"),
    ],
)
def test_every_response_round_trips(response: protocol.Response) -> None:
    assert protocol.decode_response(_unframe(protocol.encode_frame(response))) == response


def test_header_is_big_endian_length() -> None:
    frame = protocol.encode_frame(ListScripts())
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"type": "run_script", "path": "a", "args": [], "extra": 1}, "unknown field"),
        ({"type": "run_script", "path": 3}, "Expected `str`"),
        ({"type": "run_script"}, "missing required field `path`"),
        ({"type": "exec_command", "argv": "/bin/ls"}, "Expected `array`"),
        ({"type": "format_disk"}, "Invalid value"),
        ({"no_type": 1}, "missing required field `type`"),
        ([1, 2, 3], "Expected `object`"),
    ],
)
def test_invalid_requests_are_errors(body: object, needle: str) -> None:
    with pytest.raises(FrameError, match="invalid request") as info:
        protocol.decode_request(msgspec.msgpack.encode(body))
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "body", [b"\xc1", b"\x82\xa4type", msgspec.msgpack.encode({"type": "list_scripts"}) + b"x"]
)
def test_malformed_msgpack_is_an_error(body: bytes) -> None:
    with pytest.raises(FrameError, match="malformed request"):
        protocol.decode_request(body)


def test_responses_are_not_requests() -> None:
    body = _unframe(protocol.encode_frame(RunCompletion(status="success")))
    with pytest.raises(FrameError):
        protocol.decode_request(body)
    with pytest.raises(FrameError):
        protocol.decode_response(_unframe(protocol.encode_frame(ListScripts())))


def test_unknown_status_is_rejected_by_the_client_decoder() -> None:
    body = msgspec.msgpack.encode({"type": "completion", "status": "maybe"})
    with pytest.raises(FrameError, match="status"):
        protocol.decode_response(body)


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ((protocol.MAX_FRAME_BYTES + 1).to_bytes(4, "big"), "exceeds the limit"),
        (b"\xff\xff\xff\xff", "exceeds the limit"),
        (b"\x00\x00\x00\x00", "empty frame"),
        (b"\x00\x01", "truncated"),
    ],
)
def test_bad_length_prefixes(header: bytes, needle: str) -> None:
    with pytest.raises(FrameError, match=needle):
        protocol.parse_length(header)


def test_length_at_the_limit_is_accepted() -> None:
    assert (
        protocol.parse_length(protocol.MAX_FRAME_BYTES.to_bytes(4, "big"))
        == protocol.MAX_FRAME_BYTES
    )


def test_encoding_an_oversized_frame_fails() -> None:
    with pytest.raises(FrameError, match="exceeds"):
        protocol.encode_frame(RunScript(path="x", args=["a" * protocol.MAX_FRAME_BYTES]))


def test_output_is_split_into_frames_that_fit() -> None:
    data = bytes(range(256)) * 1000  # 256 000 bytes, not a multiple of the chunk size
    frames = protocol.split_output("stdout", data)
    assert len(frames) == -(-len(data) // protocol.MAX_CHUNK_BYTES)
    assert b"".join(f.data for f in frames) == data
    for frame in frames:
        assert len(protocol.encode_frame(frame)) <= protocol.MAX_FRAME_BYTES + 4


def test_frames_are_immutable() -> None:
    with pytest.raises(AttributeError):
        RunCompletion(status="success").status = "failed"  # type: ignore[misc]


def test_run_states_are_one_vocabulary_for_the_sandbox_and_the_wire() -> None:
    from typing import get_args

    from roboz_helper import run_states
    from roboz_helper.sandbox import spec

    statuses = set(get_args(protocol.Status))
    assert set(get_args(run_states.RunStatus)) <= statuses
    assert statuses - set(get_args(run_states.RunStatus)) == {"listed", "refused", "busy"}
    assert get_args(run_states.NetworkMode) == ("none", "loopback")
    # A sandbox also has "proxy": what a policy's allowlist (a table, not a word) becomes.
    assert (*get_args(run_states.NetworkMode), "proxy") == spec.NETWORK_MODES
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(
            msgspec.msgpack.encode({"type": "completion", "status": "exploded"}),
            type=RunCompletion,
        )
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(
            msgspec.msgpack.encode({"type": "completion", "status": "failed", "limit": "disk"}),
            type=RunCompletion,
        )


def test_an_unknown_sandbox_status_reaches_the_wire_as_failed() -> None:
    from roboz_helper import runs
    from roboz_helper.sandbox import SandboxOutcome

    odd = SandboxOutcome("exploded", None, None, "boom", 0.1, 0.0, 0, "disk")
    completion = runs.completion_of(odd)
    assert completion.status == "failed" and completion.limit is None
    assert "unknown status 'exploded'" in completion.diagnostic
    fine = SandboxOutcome("timeout", None, 9, "late", 1.0, 0.5, 10, "timeout")
    assert runs.completion_of(fine) == RunCompletion(
        status="timeout",
        signal=9,
        diagnostic="late",
        wall_time_s=1.0,
        cpu_time_s=0.5,
        peak_memory_bytes=10,
        limit="timeout",
    )


def test_network_fields_round_trip() -> None:
    from roboz_helper.egress.allowlist import NetworkAllow
    from roboz_helper.egress.report import NetworkReport, Refusal

    run = RunScript(path="a.sh", network_allow=("pypi.org:443",))
    assert protocol.decode_request(_unframe(protocol.encode_frame(run))) == run
    limits = msgspec.structs.replace(
        LIMITS, network=NetworkAllow(allow=("pypi.org:443", "*.example.org"), max_bytes=10)
    )
    greeting = Greeting(protocol_version=3, helper_version="t", profile="p", uid=1, limits=limits)
    report = NetworkReport(
        policy="p",
        bytes_out=5,
        bytes_in=7,
        connections=1,
        refused=2,
        refusals=(Refusal(host="evil.example", port=443, reason="not-allowed", count=2),),
    )
    completion = RunCompletion(status="success", exit_code=0, network=report)
    for frame in (greeting, completion):
        assert protocol.decode_response(_unframe(protocol.encode_frame(frame))) == frame


class _RunScriptV2(msgspec.Struct, tag_field="type", tag="run_script", forbid_unknown_fields=True):
    path: str
    args: list[str] = []
    trace_id: str | None = None
    keep_open: bool = False
    file_policy: object = None


class _CompletionV2(msgspec.Struct, tag_field="type", tag="completion", forbid_unknown_fields=True):
    status: str
    exit_code: int | None = None
    signal: int | None = None
    diagnostic: str = ""
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    peak_memory_bytes: int = 0
    limit: str | None = None
    keep_open: bool = False


def test_frames_without_network_fields_are_what_an_older_peer_decodes() -> None:
    # Defaults are left out: a version-2 helper (strict, without network_allow) takes a run
    # request that does not narrow the network, and a version-2 client a completion of a
    # run without an allowlist.
    request = _unframe(protocol.encode_frame(RunScript(path="a.sh", args=["x"], keep_open=True)))
    assert msgspec.msgpack.decode(request, type=_RunScriptV2) == _RunScriptV2(
        path="a.sh", args=["x"], keep_open=True
    )
    done = _unframe(protocol.encode_frame(RunCompletion(status="failed", exit_code=3)))
    assert msgspec.msgpack.decode(done, type=_CompletionV2).exit_code == 3
    narrowed = _unframe(protocol.encode_frame(RunScript(path="a.sh", network_allow=())))
    with pytest.raises(msgspec.ValidationError, match="network_allow"):
        msgspec.msgpack.decode(narrowed, type=_RunScriptV2)
