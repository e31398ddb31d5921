"""The bytes a run sends the proxy before its tunnel opens, parsed strictly and without I/O.

- an HTTP/1.x request head: ``CONNECT host:port`` (a tunnel) or an absolute-form request
  (``GET http://host/path``, forwarded once, with ``Connection: close``), and where that
  request's body ends (``RequestFraming``): what the run sends after it is not forwarded;
- SOCKS5 (RFC 1928): the greeting (no authentication) and a CONNECT request;
- the TLS ClientHello of a tunnel to port 443, for its server name (SNI).

Each parser takes the bytes buffered so far and returns None while it needs more; anything
malformed raises HandshakeError with a one-line reason. Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass
from typing import Final

MAX_HEAD: Final = 16 * 1024  # an HTTP request head (request line and headers)
MAX_HEADERS: Final = 100
MAX_HELLO: Final = 64 * 1024  # a ClientHello with large key shares stays far below this
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
# A header value: visible characters, spaces and tabs (no CR, LF, NUL or other controls).
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
# Hop-by-hop headers: meant for the proxy, never forwarded (Connection is set to close).
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "host",
    }
)


class HandshakeError(ValueError):
    """The client's bytes are not a request the proxy understands."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]


def http_head(buffer: bytes | bytearray) -> tuple[HttpRequest, int] | None:
    """The request head at the start of buffer and its length, or None if incomplete."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        if len(buffer) >= MAX_HEAD + 4:
            raise HandshakeError(f"request head larger than {MAX_HEAD} bytes")
        return None
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise HandshakeError("malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise HandshakeError(f"unsupported HTTP version {version[:16]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise HandshakeError(f"more than {MAX_HEADERS} header lines")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise HandshakeError("malformed header line")
        headers.append((name, value.strip(" \t")))
    return HttpRequest(method, target, version, tuple(headers)), end + 4


def split_authority(text: str, default_port: int | None) -> tuple[str, int]:
    """(host, port) of ``host:port``, ``[v6]:port`` or, with a default port, of ``host``."""
    if "@" in text:
        raise HandshakeError("user information in the authority is not allowed")
    port_text: str | None
    if text.startswith("["):
        close = text.find("]")
        host, rest = text[: close + 1], text[close + 1 :]
        if close < 0 or (rest and not rest.startswith(":")):
            raise HandshakeError("malformed authority")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise HandshakeError("an IPv6 address in an authority needs brackets")
    else:
        host, port_text = text, None
    if port_text is None:
        if default_port is None:
            raise HandshakeError("the authority needs a port")
        return host, default_port
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise HandshakeError("malformed port")
    return host, int(port_text)


def absolute_target(target: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of an ``http://`` absolute-form request target."""
    scheme, sep, rest = target.partition("://")
    if not sep:
        raise HandshakeError("not a proxy request (the target is not an absolute http:// URL)")
    if scheme.lower() != "http":
        raise HandshakeError(f"scheme {scheme[:16]!r} is not forwarded; use CONNECT for https")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "#" in path:
        raise HandshakeError("a fragment in the request target")
    host, port = split_authority(authority, 80)
    return host, port, (path if path.startswith("/") else "/" + path)


def forwarded_head(request: HttpRequest, authority: str, path: str) -> bytes:
    """The head sent to the origin: origin-form target, the URL's authority as Host, no
    hop-by-hop or proxy headers (nor the headers Connection names), ``Connection: close``."""
    named = {
        token.strip().lower()
        for name, value in request.headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    lines = [f"{request.method} {path} {request.version}", f"Host: {authority}"]
    lines += [
        f"{name}: {value}"
        for name, value in request.headers
        if name.lower() not in _HOP_BY_HOP and name.lower() not in named
    ]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


MAX_CHUNK_LINE: Final = 4096  # a chunk-size line or a trailer line


def body_length(request: HttpRequest) -> int | None:
    """The length of a forwarded request's body (RFC 9112, section 6.3): its Content-Length,
    0 without one, None for chunked. HandshakeError where the end is ambiguous (both
    headers, lengths that differ, a transfer coding other than chunked): a proxy and the
    origin that disagree on where a request ends would let the run smuggle a second one."""
    lengths = {v for n, v in request.headers if n.lower() == "content-length"}
    codings = [v for n, v in request.headers if n.lower() == "transfer-encoding"]
    if codings:
        if lengths:
            raise HandshakeError("both Transfer-Encoding and Content-Length")
        if [c.strip().lower() for c in ",".join(codings).split(",")] != ["chunked"]:
            raise HandshakeError("a transfer coding other than chunked")
        return None
    if not lengths:
        return 0
    value = lengths.pop()
    if lengths or not _DIGITS.fullmatch(value) or len(value) > 18:
        raise HandshakeError("a malformed Content-Length")
    return int(value)


class RequestFraming:
    """Where a forwarded request ends in the bytes the run sends: its head, then its body
    (``body_length``: a count, or chunked framing). ``take(data)`` is how many bytes of
    ``data`` still belong to it; fewer than ``len(data)`` means the run sent something after
    the request (a second request, meant for whatever host it names) or broke the chunked
    framing, and ``problem`` says which."""

    def __init__(self, head: int, length: int | None) -> None:
        self._left = head + (length or 0)  # bytes still to pass as they are
        self._chunked = length is None
        self._phase = "fixed"  # fixed, size, data, crlf, trailer, done
        self._line = bytearray()
        self.problem = ""

    def take(self, data: bytes) -> int:
        at = 0
        while at < len(data) and self._phase != "done":
            if self._phase in ("fixed", "data", "crlf"):
                n = min(self._left, len(data) - at)
                if self._phase == "crlf" and data[at : at + n] != b"\r\n"[2 - self._left :][:n]:
                    return self._broken(at, "a chunk not followed by CRLF")
                at += n
                self._left -= n
                if self._left == 0:
                    self._next()
                continue
            end = data.find(b"\n", at)
            stop = len(data) if end < 0 else end + 1
            self._line += data[at:stop]
            at = stop
            if len(self._line) > MAX_CHUNK_LINE:
                return self._broken(at, "a chunk-size or trailer line too long")
            if end >= 0 and not self._line_done():
                return self._broken(at, "a malformed chunk-size line")
        if at < len(data) and not self.problem:
            self.problem = "more after the request (the proxy forwards one request per connection)"
        return at

    def _next(self) -> None:
        if self._phase == "data":
            self._phase, self._left = "crlf", 2
        else:  # fixed (the head, or a whole Content-Length body) or crlf
            self._phase = "size" if self._chunked else "done"

    def _line_done(self) -> bool:
        """A complete line in the size or trailer phase; False if it is malformed."""
        line = bytes(self._line)
        self._line.clear()
        if not line.endswith(b"\r\n"):
            return False
        if self._phase == "trailer":
            if line == b"\r\n":
                self._phase = "done"
            return True
        size = line[:-2].split(b";", 1)[0].strip(b" \t")
        if not _HEX.fullmatch(size) or len(size) > 15:
            return False
        self._left = int(size, 16)
        self._phase = "data" if self._left else "trailer"
        return True

    def _broken(self, at: int, why: str) -> int:
        self._phase = "done"
        self.problem = why
        return at


# --- SOCKS5 ----------------------------------------------------------------------------------

SOCKS_VERSION: Final = 5
SOCKS_CONNECT: Final = 1
# Reply codes (RFC 1928 section 6).
SOCKS_OK, SOCKS_FAILURE, SOCKS_NOT_ALLOWED = 0, 1, 2
SOCKS_NET_UNREACHABLE, SOCKS_HOST_UNREACHABLE, SOCKS_REFUSED = 3, 4, 5
SOCKS_BAD_COMMAND, SOCKS_BAD_ADDRESS = 7, 8


def socks_greeting(buffer: bytes | bytearray) -> tuple[bytes, int] | None:
    """(the authentication methods offered, the greeting's length), or None if incomplete."""
    if len(buffer) < 2:
        return None
    if buffer[0] != SOCKS_VERSION or buffer[1] == 0:
        raise HandshakeError("malformed SOCKS5 greeting")
    if len(buffer) < 2 + buffer[1]:
        return None
    return bytes(buffer[2 : 2 + buffer[1]]), 2 + buffer[1]


@dataclass(frozen=True, slots=True)
class SocksRequest:
    command: int
    host: str  # a name, or an address in text form
    port: int
    by_name: bool


def socks_request(buffer: bytes | bytearray) -> tuple[SocksRequest, int] | None:
    """A SOCKS5 request and its length, or None if incomplete."""
    if len(buffer) < 5:
        return None
    version, command, reserved, kind = buffer[:4]
    if version != SOCKS_VERSION or reserved != 0:
        raise HandshakeError("malformed SOCKS5 request")
    if kind == 1:
        size, start = 4, 4
    elif kind == 4:
        size, start = 16, 4
    elif kind == 3:
        size, start = buffer[4], 5
        if size == 0:
            raise HandshakeError("an empty SOCKS5 domain name")
    else:
        raise HandshakeError(f"unknown SOCKS5 address type {kind}")
    end = start + size + 2
    if len(buffer) < end:
        return None
    raw = bytes(buffer[start : start + size])
    (port,) = struct.unpack(">H", buffer[end - 2 : end])
    if kind == 3:
        if not raw.isascii():
            raise HandshakeError("a SOCKS5 domain name that is not ASCII")
        host = raw.decode("ascii")
    else:
        host = str(ipaddress.ip_address(raw))
    return SocksRequest(command, host, port, kind == 3), end


def socks_reply(code: int) -> bytes:
    # The bound address is not meaningful here (the tunnel's far end is the helper's).
    return bytes([SOCKS_VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])


# --- TLS ClientHello -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientHello:
    server_name: str | None  # the SNI host_name, as sent (ASCII), or None without one


def client_hello(buffer: bytes | bytearray) -> ClientHello | None:
    """The ClientHello at the start of a TLS stream, or None if incomplete. HandshakeError
    when the stream is not TLS or the hello is malformed."""
    payload = bytearray()
    offset = 0
    while True:  # reassemble the handshake message from its records
        if len(buffer) < offset + 5:
            return None
        kind, major, _, length = struct.unpack_from(">BBBH", buffer, offset)
        if kind != 22 or major != 3 or length == 0 or length > (1 << 14):
            raise HandshakeError("not a TLS handshake")
        if len(buffer) < offset + 5 + length:
            return None
        payload += buffer[offset + 5 : offset + 5 + length]
        offset += 5 + length
        if len(payload) >= 4:
            if payload[0] != 1:
                raise HandshakeError("the first TLS message is not a ClientHello")
            size = int.from_bytes(payload[1:4], "big")
            if size > MAX_HELLO:
                raise HandshakeError("a ClientHello larger than the proxy reads")
            if len(payload) >= 4 + size:
                return ClientHello(_server_name(bytes(payload[4 : 4 + size])))


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise HandshakeError("a truncated ClientHello")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def vector(self, width: int) -> bytes:
        return self.take(int.from_bytes(self.take(width), "big"))


def _server_name(hello: bytes) -> str | None:
    c = _Cursor(hello)
    c.take(2 + 32)  # legacy_version, random
    c.vector(1)  # legacy_session_id
    c.vector(2)  # cipher_suites
    c.vector(1)  # legacy_compression_methods
    if c.at == len(hello):
        return None  # no extensions at all
    extensions = _Cursor(c.vector(2))
    seen: set[int] = set()
    name: str | None = None
    while extensions.at < len(extensions.data):
        kind = int.from_bytes(extensions.take(2), "big")
        body = extensions.vector(2)
        if kind in seen:
            raise HandshakeError("a ClientHello repeats an extension")
        seen.add(kind)
        if kind == 0:
            name = _host_name(body)
    return name


def _host_name(body: bytes) -> str:
    names = _Cursor(_Cursor(body).vector(2))
    found: list[bytes] = []
    while names.at < len(names.data):
        kind = names.take(1)[0]
        value = names.vector(2)
        if kind == 0:
            found.append(value)
    if len(found) != 1 or not found[0].isascii():
        raise HandshakeError("a ClientHello whose server_name is not one ASCII host name")
    return found[0].decode("ascii")
