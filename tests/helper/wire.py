"""Speaking the helper's wire protocol by hand, to send what the real client never would."""

from __future__ import annotations

import socket

from roboz_helper import protocol
from roboz_helper.protocol import Greeting


def raw_connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(path)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            # Linux reports a Unix peer that closed with our bytes still unread as a reset
            # instead of EOF; for these tests both mean "the helper hung up".
            chunk = b""
        if not chunk:
            assert not buf, f"connection ended inside a frame after {len(buf)} bytes"
            return None
        buf += chunk
    return buf


def read_frame(sock: socket.socket) -> protocol.Response | None:
    """The next frame, or None at a clean EOF."""
    header = recv_exactly(sock, 4)
    if header is None:
        return None
    body = recv_exactly(sock, protocol.parse_length(header))
    assert body is not None
    return protocol.decode_response(body)


def read_until_eof(sock: socket.socket) -> list[protocol.Response]:
    frames = []
    while (frame := read_frame(sock)) is not None:
        frames.append(frame)
    return frames


def greeted(path: str) -> socket.socket:
    sock = raw_connect(path)
    assert isinstance(read_frame(sock), Greeting)
    return sock
