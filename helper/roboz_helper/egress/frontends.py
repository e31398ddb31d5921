"""What a run asks the proxy for, and how the proxy answers it, per protocol.

A connection to the proxy starts with SOCKS5 (first byte 5), SOCKS4 (refused: it cannot carry
a name reliably, and ``socks5h`` does what it would), or HTTP: ``CONNECT host:port`` or an
absolute-form request (``GET http://host/...``), which is forwarded with its head rewritten.
``read_request`` reads and parses that much and returns an ``Ask``: the destination, the
bytes that say yes, and how to say no in this protocol. Deciding is the session's (proxy.py).
Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from roboz_helper.egress import handshakes as hs
from roboz_helper.egress.allowlist import AllowlistError, Destination, destination
from roboz_helper.egress.report import Refusal, RefusalReason

_RECV: Final = 64 * 1024
_HTTP_STATUS: Final[dict[str, str]] = {
    "malformed": "400 Bad Request",
    "unsupported": "405 Method Not Allowed",
    "byte-limit": "429 Too Many Requests",
    "connection-limit": "429 Too Many Requests",
    "unresolved": "502 Bad Gateway",
    "unreachable": "502 Bad Gateway",
}
_SOCKS_CODE: Final[dict[str, int]] = {
    "malformed": hs.SOCKS_FAILURE,
    "unsupported": hs.SOCKS_BAD_COMMAND,
    "unresolved": hs.SOCKS_HOST_UNREACHABLE,
    "unreachable": hs.SOCKS_HOST_UNREACHABLE,
}


class Refused(Exception):
    """An attempt that does not get through; ``refusal`` is what the report counts."""

    def __init__(
        self, reason: RefusalReason, host: str = "", port: int = 0, rule: str = "", detail: str = ""
    ) -> None:
        super().__init__(detail)
        self.refusal = Refusal(
            host=printable(host, 253),
            port=port,
            reason=reason,
            rule=rule,
            detail=printable(detail, 200),
        )


class Closed(Exception):
    """The run closed its side before the handshake was complete."""


class Client:
    """The run's side of one connection during its handshake: a socket and what it sent."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    async def more(self) -> None:
        data = await asyncio.get_running_loop().sock_recv(self.sock, _RECV)
        if not data:
            raise Closed
        self.buffer += data

    def take(self, n: int) -> bytes:
        head = bytes(self.buffer[:n])
        del self.buffer[:n]
        return head

    async def send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)


@dataclass(frozen=True, slots=True)
class Ask:
    """A run's request: where to, the reply that opens the tunnel, and the refusal's form.
    What the tunnel must carry first (a forwarded head) is left in the client's buffer."""

    dest: Destination
    ok: bytes
    refused: Callable[[Refusal], bytes]
    # A forwarded request: where it ends in what the run sends (nothing after it is sent on).
    framing: hs.RequestFraming | None = None


async def read_request(client: Client, policy: str) -> Ask:
    """Read and parse the run's request; Refused (answered already) if it is none."""
    await client.more()
    if client.buffer[0] == hs.SOCKS_VERSION:
        return await _socks(client)
    if client.buffer[0] == 4:
        raise Refused("unsupported", detail="SOCKS4; use SOCKS5 (socks5h://)")
    return await _http(client, policy)


async def _http(client: Client, policy: str) -> Ask:
    def refused(refusal: Refusal) -> bytes:
        return _http_refusal(refusal, policy)

    try:
        while (parsed := hs.http_head(client.buffer)) is None:
            await client.more()
        request, length = parsed
        client.take(length)
        body: int | None = 0
        if request.method == "CONNECT":
            host, port = hs.split_authority(request.target, None)
        else:
            host, port, path = hs.absolute_target(request.target)
            body = hs.body_length(request)
        dest = destination(host, port)
    except (hs.HandshakeError, AllowlistError) as exc:
        error = Refused("malformed", detail=str(exc))
        with contextlib.suppress(OSError):
            await client.send(refused(error.refusal))
        raise error from None
    if request.method == "CONNECT":
        return Ask(dest, f"{request.version} 200 Connection established\r\n\r\n".encode(), refused)
    # A forwarded request: its head, rewritten, goes first; then its body, and nothing more.
    name = f"[{dest.host}]" if dest.address is not None and dest.address.version == 6 else dest.host
    head = hs.forwarded_head(request, name if dest.port == 80 else str(dest), path)
    client.buffer[:0] = head
    return Ask(dest, b"", refused, hs.RequestFraming(len(head), body))


async def _socks(client: Client) -> Ask:
    while (greeting := _socks_step(hs.socks_greeting, client)) is None:
        await client.more()
    methods, length = greeting
    client.take(length)
    if 0 not in methods:  # only "no authentication": the run is already identified
        await client.send(bytes([hs.SOCKS_VERSION, 0xFF]))
        raise Refused("unsupported", detail="SOCKS5 without the no-authentication method")
    await client.send(bytes([hs.SOCKS_VERSION, 0]))
    while (parsed := _socks_step(hs.socks_request, client)) is None:
        await client.more()
    request, length = parsed
    client.take(length)
    if request.command != hs.SOCKS_CONNECT:
        await client.send(hs.socks_reply(hs.SOCKS_BAD_COMMAND))
        what = {2: "BIND", 3: "UDP ASSOCIATE"}.get(request.command, str(request.command))
        raise Refused("unsupported", request.host, request.port, detail=f"SOCKS5 {what}")
    try:
        dest = destination(request.host, request.port)
    except AllowlistError as exc:
        await client.send(hs.socks_reply(hs.SOCKS_BAD_ADDRESS))
        raise Refused("malformed", request.host, request.port, detail=str(exc)) from None

    def refused(refusal: Refusal) -> bytes:
        return hs.socks_reply(_SOCKS_CODE.get(refusal.reason, hs.SOCKS_NOT_ALLOWED))

    return Ask(dest, hs.socks_reply(hs.SOCKS_OK), refused)


_Parsed = TypeVar("_Parsed")


def _socks_step(parse: Callable[[bytearray], _Parsed | None], client: Client) -> _Parsed | None:
    try:
        return parse(client.buffer)
    except hs.HandshakeError as exc:
        raise Refused("malformed", detail=str(exc)) from None


def printable(text: str, limit: int) -> str:
    """Text from the run, fit for a log line and the completion: printable ASCII, bounded."""
    clean = "".join(c if c.isascii() and c.isprintable() else "?" for c in text[: limit + 1])
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _http_refusal(refusal: Refusal, policy: str) -> bytes:
    status = _HTTP_STATUS.get(refusal.reason, "403 Forbidden")
    body = f"roboz-helper: {refusal.text(policy)}\n".encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        f"X-Roboz-Egress: {refusal.reason}\r\n\r\n"
    ).encode("latin-1") + body
