"""The blocking and the asyncio client raise the same errors for the same broken helper.

Each peer here is a real Unix socket served by a thread of this test that misbehaves in one
way: it says nothing, sends bytes that are no frame, or hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from roboz.shed.safe_scripts import (
    AsyncSafeScriptsClient,
    ConnectionLost,
    HelperTimeout,
    HelperUnavailable,
    ProtocolMismatch,
    SafeScriptsClient,
    SafeScriptsError,
)


def _silent(conn: socket.socket) -> None:
    conn.recv(1)  # until the client gives up and closes


def _garbage(conn: socket.socket) -> None:
    conn.sendall(struct.pack(">I", 1 << 30) + b"x")
    conn.recv(1)


def _not_msgpack(conn: socket.socket) -> None:
    conn.sendall(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
    conn.recv(1)


def _hang_up(conn: socket.socket) -> None:
    pass


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Callable[[Callable[[socket.socket], None]], Path]]:
    threads: list[threading.Thread] = []
    servers: list[socket.socket] = []

    def serve(behaviour: Callable[[socket.socket], None]) -> Path:
        path = tmp_path / f"peer{len(servers)}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(4)
        server.settimeout(10)
        servers.append(server)

        def loop() -> None:
            for _ in range(2):  # one connection for each client
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn, contextlib.suppress(OSError):  # the client hanging up is expected
                    behaviour(conn)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)
        return path

    yield serve
    for server in servers:
        server.close()
    for thread in threads:
        thread.join(timeout=10)


def _both(path: Path) -> list[SafeScriptsError | None]:
    """What each client raises on check() against ``path`` (sync first, then async)."""
    found: list[SafeScriptsError | None] = []
    try:
        SafeScriptsClient(path, timeout=0.5).check()
        found.append(None)
    except SafeScriptsError as error:
        found.append(error)
    try:
        asyncio.run(AsyncSafeScriptsClient(path, timeout=0.5).check())
        found.append(None)
    except SafeScriptsError as error:
        found.append(error)
    return found


@pytest.mark.parametrize(
    ("behaviour", "kind", "words"),
    [
        (_silent, HelperTimeout, "timed out waiting for the helper"),
        (_garbage, ProtocolMismatch, "exceeds the limit"),
        (_not_msgpack, ProtocolMismatch, "undecodable frame"),
        (_hang_up, ConnectionLost, "closed the connection"),
    ],
)
def test_a_misbehaving_peer(peer, behaviour, kind, words) -> None:
    sync_error, async_error = _both(peer(behaviour))
    assert type(sync_error) is kind and type(async_error) is kind
    assert str(sync_error) == str(async_error) and words in str(sync_error)


def test_no_socket_and_a_socket_nobody_listens_on(tmp_path: Path) -> None:
    absent = tmp_path / "absent.sock"
    sync_error, async_error = _both(absent)
    assert type(sync_error) is type(async_error) is HelperUnavailable
    assert (
        str(sync_error)
        == str(async_error)
        == (f"no helper socket at {absent}; is roboz-helper running?")
    )
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(stale))  # bound, never listening: connections are refused
        sync_error, async_error = _both(stale)
    assert type(sync_error) is type(async_error) is HelperUnavailable
    assert "nothing is listening" in str(sync_error) and str(sync_error) == str(async_error)
