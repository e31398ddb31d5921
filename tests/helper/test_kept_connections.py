"""Several runs on one authorized connection (keep_open): opt-in, bounded, and never past a
policy reload. A client that does not ask gets one request per connection, as always."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import time
import uuid
from pathlib import Path

from roboz_helper import protocol
from roboz_helper.protocol import Closing, ExecCommand, Output, ProtocolError, RunCompletion
from roboz_helper.server import MAX_REQUESTS_PER_CONNECTION

from roboz.shed.safe_scripts import AsyncSafeScriptsClient, SafeScriptsClient

from .conftest import HANDSHAKE_TIMEOUT_S, MAX_CONNECTIONS, HelperDaemon, OwnHelper, wait_until
from .test_server import assert_still_serving
from .wire import greeted, read_frame, read_until_eof


def _send(sock: socket.socket, argv: list[str], keep_open: bool = True) -> None:
    sock.sendall(protocol.encode_frame(ExecCommand(argv=argv, keep_open=keep_open)))


def _answer(sock: socket.socket) -> tuple[bytes, protocol.Response | None]:
    """The output and the last frame answering one request (None at EOF)."""
    out = b""
    while True:
        frame = read_frame(sock)
        if not isinstance(frame, Output):
            return out, frame
        out += frame.data


def _completion(sock: socket.socket) -> tuple[bytes, RunCompletion]:
    out, frame = _answer(sock)
    assert isinstance(frame, RunCompletion), frame
    return out, frame


def test_without_keep_open_a_connection_carries_one_request(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    _send(sock, ["/bin/echo", "once"], keep_open=False)
    out, done = _completion(sock)
    assert (out, done.status, done.keep_open) == (b"once\n", "success", False)
    assert read_frame(sock) is None  # closed: a second request has nowhere to go
    sock.close()


def test_a_kept_connection_serves_runs_one_after_another(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    for i in range(3):
        _send(sock, ["/bin/echo", f"run {i}"])
        out, done = _completion(sock)
        assert (out, done.status, done.keep_open) == (f"run {i}\n".encode(), "success", True)
    # The last one says so and the connection ends after it.
    _send(sock, ["/bin/echo", "last"], keep_open=False)
    out, done = _completion(sock)
    assert (out, done.keep_open) == (b"last\n", False)
    assert read_frame(sock) is None
    sock.close()


def test_each_run_on_a_kept_connection_gets_a_fresh_sandbox(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    leftover = "echo planted > /tmp/left; ls /tmp; echo $$"
    _send(sock, ["/bin/sh", "-c", leftover])
    first, _ = _completion(sock)
    _send(sock, ["/bin/sh", "-c", "ls /tmp; echo $$"])
    second, done = _completion(sock)
    assert done.status == "success"
    assert b"left" in first and b"left" not in second, (first, second)
    sock.close()


def test_a_request_during_a_run_still_ends_the_run(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    _send(sock, ["/bin/sh", "-c", "sleep 30"])
    time.sleep(0.3)
    _send(sock, ["/bin/echo", "pipelined"])  # one at a time: this is a violation
    _, frame = _answer(sock)
    assert frame is None  # the run was killed and the connection ended without a completion
    sock.close()
    assert_still_serving(helper)


def test_malformed_frames_on_a_kept_connection_end_only_it(helper: HelperDaemon) -> None:
    for payload in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1", os.urandom(64)):
        sock = greeted(helper.socket_path)
        _send(sock, ["/bin/echo", "fine"])
        assert _completion(sock)[1].keep_open
        sock.sendall(payload)
        frames = read_until_eof(sock)
        assert len(frames) == 1 and isinstance(frames[0], ProtocolError | Closing), frames
        sock.close()
    assert_still_serving(helper)


def test_an_idle_kept_connection_is_closed_unread(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    _send(sock, ["/bin/echo", "fine"])
    assert _completion(sock)[1].keep_open
    frame = read_frame(sock)  # nothing sent: the idle limit is the handshake timeout
    assert isinstance(frame, Closing) and f"{HANDSHAKE_TIMEOUT_S:g}s" in frame.reason
    assert read_frame(sock) is None
    sock.close()


def test_a_kept_connection_takes_a_bounded_number_of_requests(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    for i in range(MAX_REQUESTS_PER_CONNECTION):
        _send(sock, ["/bin/echo", str(i)])
        done = _completion(sock)[1]
        assert done.keep_open == (i < MAX_REQUESTS_PER_CONNECTION - 1), i
    assert read_frame(sock) is None
    sock.close()


def _revoked(text: str) -> str:
    """The same policy without the rule that authorizes uid 0."""
    changed = text.replace('uid = 0\nprofile = "test"', 'uid = 4242\nprofile = "test"')
    assert changed != text
    return changed


def test_a_reload_that_revokes_stops_the_next_request_on_a_kept_connection(
    own_helper: OwnHelper,
) -> None:
    work = own_helper.base / "work"
    before, after = f"kept-{uuid.uuid4().hex}", f"kept-{uuid.uuid4().hex}"
    client = SafeScriptsClient(own_helper.socket_path)
    raw = greeted(own_helper.socket_path)
    _send(raw, ["/bin/sh", "-c", f"echo > {before}"])
    assert _completion(raw)[1].keep_open
    assert client.exec_command(["/bin/sh", "-c", "true"]).ok  # the client now holds one too
    assert (work / before).exists()

    own_helper.write_policy(_revoked(own_helper.policy_path.read_text()))
    own_helper.reload()

    _send(raw, ["/bin/sh", "-c", f"echo > {after}"])
    frame = read_frame(raw)
    assert isinstance(frame, Closing) and "reloaded" in frame.reason
    assert read_frame(raw) is None
    raw.close()
    # The client resends on a new connection, which the new policy refuses.
    result = client.exec_command(["/bin/sh", "-c", f"echo > {after}"])
    assert result.status == "refused" and "not authorized" in result.diagnostic, result
    time.sleep(0.5)
    assert not (work / after).exists()
    assert not [line for line in own_helper.log_lines("run") if after in line]


def test_the_client_reuses_its_connection_and_recovers_from_a_closed_one(
    own_helper: OwnHelper,
) -> None:
    client = SafeScriptsClient(own_helper.socket_path)
    for _ in range(3):
        assert client.exec_command(["/bin/echo", "hi"]).stdout == "hi\n"
    pids = {line.split(" pid=")[1].split()[0] for line in own_helper.log_lines("run")}
    assert len(pids) == 1
    # Closed by the helper while idle (too long), and unread after a reload: both resent once.
    time.sleep(HANDSHAKE_TIMEOUT_S + 0.5)
    assert client.exec_command(["/bin/echo", "after idle"]).stdout == "after idle\n"
    own_helper.write_policy(own_helper.policy_path.read_text())
    own_helper.reload()
    assert client.exec_command(["/bin/echo", "after reload"]).stdout == "after reload\n"
    client.close()


def test_a_forked_child_does_not_use_its_parents_connection(own_helper: OwnHelper) -> None:
    client = SafeScriptsClient(own_helper.socket_path)
    assert client.exec_command(["/bin/echo", "parent"]).ok
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if client.exec_command(["/bin/echo", "child"]).stdout == "child\n" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert client.exec_command(["/bin/echo", "parent again"]).stdout == "parent again\n"
    wait_until(lambda: len(own_helper.log_lines("run")) == 3, what="three run lines")
    child_line = next(line for line in own_helper.log_lines("run") if "child" in line)
    assert f"pid={pid} " in child_line  # its own connection: the helper saw the child connect


def test_shutdown_tells_an_idle_kept_connection_closing(own_helper: OwnHelper) -> None:
    sock = greeted(own_helper.socket_path)
    _send(sock, ["/bin/echo", "fine"])
    assert _completion(sock)[1].keep_open
    own_helper.process.terminate()
    frame = read_frame(sock)
    assert isinstance(frame, Closing) and "shutting down" in frame.reason, frame
    own_helper.process.wait(30)
    sock.close()
    assert not Path(own_helper.socket_path).exists()


def test_the_async_client_reuses_its_connection_and_recovers(own_helper: OwnHelper) -> None:
    async def main() -> None:
        client = AsyncSafeScriptsClient(own_helper.socket_path)
        for i in range(3):
            assert (await client.exec_command(["/bin/echo", str(i)])).stdout == f"{i}\n"
        kept = client.idle._conns[:]
        assert len(kept) == 1
        assert (await client.exec_command(["/bin/echo", "again"])).ok
        assert client.idle._conns == kept
        # Unread after a reload: resent once on a new connection.
        own_helper.write_policy(own_helper.policy_path.read_text())
        await asyncio.to_thread(own_helper.reload)
        assert (await client.exec_command(["/bin/echo", "after reload"])).stdout == "after reload\n"
        assert client.idle._conns != kept
        # A stream left early is not kept: its run is ended with its connection.
        client.close()
        async with client.stream_command(["/bin/sh", "-c", "echo a; sleep 30"]) as run:
            async for _chunk in run:
                break
        assert client.idle._conns == []
        client.close()

    asyncio.run(main())


def test_idle_kept_connections_never_make_a_new_client_busy(own_helper: OwnHelper) -> None:
    kept = []
    for _ in range(MAX_CONNECTIONS):
        sock = greeted(own_helper.socket_path)
        _send(sock, ["/bin/echo", "fine"])
        assert _completion(sock)[1].keep_open
        kept.append(sock)
    # Every slot is held by an idle kept connection; a new client takes one of them.
    fresh = SafeScriptsClient(own_helper.socket_path, reuse_connections=False)
    assert fresh.exec_command(["/bin/echo", "new"]).stdout == "new\n"
    # Well inside the idle limit: only the evicted one has anything to say.
    readable, _, _ = select.select(kept, [], [], 0.5)
    closed = list(readable)
    for sock in closed:
        frame = read_frame(sock)
        assert isinstance(frame, Closing) and "slot" in frame.reason, frame
    assert len(closed) == 1
    # The others still take requests.
    survivor = next(sock for sock in kept if sock not in closed)
    _send(survivor, ["/bin/echo", "still here"])
    assert _completion(survivor)[0] == b"still here\n"
    for sock in kept:
        sock.close()
