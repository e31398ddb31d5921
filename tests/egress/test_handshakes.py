"""The proxy's parsers of what a run sends before its tunnel opens: HTTP heads, SOCKS5 and
the TLS ClientHello, fed real bytes (a real TLS client's hello) and hostile ones."""

from __future__ import annotations

import ssl
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from roboz_helper.egress import handshakes as hs


def _hello(server_hostname: str | None) -> bytes:
    """The first flight of Python's TLS client: one or more records holding its ClientHello."""
    context = ssl.create_default_context()
    context.check_hostname = server_hostname is not None
    if server_hostname is None:
        context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _refragment(records: bytes, size: int) -> bytes:
    """The same handshake message cut into records of at most ``size`` bytes."""
    payload = b""
    offset = 0
    while offset < len(records):
        length = struct.unpack_from(">H", records, offset + 3)[0]
        payload += records[offset + 5 : offset + 5 + length]
        offset += 5 + length
    out = b""
    for i in range(0, len(payload), size):
        piece = payload[i : i + size]
        out += struct.pack(">BBBH", 22, 3, 1, len(piece)) + piece
    return out


def test_the_server_name_of_a_real_client_hello() -> None:
    hello = _hello("files.example.org")
    assert hs.client_hello(hello) == hs.ClientHello("files.example.org")
    # Every prefix is "need more", never a wrong answer.
    for cut in range(len(hello)):
        assert hs.client_hello(hello[:cut]) is None


def test_a_client_hello_spread_over_many_records() -> None:
    hello = _refragment(_hello("files.example.org"), 37)
    assert hs.client_hello(hello) == hs.ClientHello("files.example.org")
    assert hs.client_hello(hello[: len(hello) - 1]) is None


def test_a_client_hello_without_a_server_name() -> None:
    assert hs.client_hello(_hello(None)) == hs.ClientHello(None)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "not a TLS handshake"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "not a TLS handshake"),
        (struct.pack(">BBBH", 23, 3, 3, 5) + b"hello", "not a TLS handshake"),  # app data
        (struct.pack(">BBBH", 22, 3, 3, 0), "not a TLS handshake"),
        (struct.pack(">BBBH", 22, 3, 1, 4) + b"\x02\x00\x00\x00", "not a ClientHello"),
        (struct.pack(">BBBH", 22, 3, 1, 4) + b"\x01\xff\xff\xff", "larger than the proxy reads"),
        (struct.pack(">BBBH", 22, 3, 1, 6) + b"\x01\x00\x00\x02\x03\x03", "truncated"),
    ],
)
def test_what_is_not_a_client_hello(data: bytes, says: str) -> None:
    with pytest.raises(hs.HandshakeError) as caught:
        hs.client_hello(data)
    assert says in str(caught.value)


def _hello_with_extensions(extensions: bytes) -> bytes:
    body = b"\x03\x03" + b"\0" * 32 + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    body += struct.pack(">H", len(extensions)) + extensions
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    return struct.pack(">BBBH", 22, 3, 1, len(message)) + message


def _sni(*names: bytes) -> bytes:
    entries = b"".join(b"\x00" + struct.pack(">H", len(n)) + n for n in names)
    data = struct.pack(">H", len(entries)) + entries
    return struct.pack(">HH", 0, len(data)) + data


def test_a_hello_naming_two_servers_or_repeating_the_extension_is_refused() -> None:
    assert hs.client_hello(_hello_with_extensions(_sni(b"a.example"))) == hs.ClientHello(
        "a.example"
    )
    for extensions in (
        _sni(b"a.example", b"b.example"),
        _sni(b"a.example") + _sni(b"b.example"),
        _sni("\u00e9.example".encode()),
    ):
        with pytest.raises(hs.HandshakeError):
            hs.client_hello(_hello_with_extensions(extensions))


def test_http_heads() -> None:
    raw = b"CONNECT files.example.org:443 HTTP/1.1\r\nHost: files.example.org:443\r\n\r\nTLS..."
    parsed = hs.http_head(raw)
    assert parsed is not None
    request, length = parsed
    assert (request.method, request.target, request.version) == (
        "CONNECT",
        "files.example.org:443",
        "HTTP/1.1",
    )
    assert raw[length:] == b"TLS..."
    assert hs.http_head(raw[:30]) is None
    assert hs.split_authority("files.example.org:443", None) == ("files.example.org", 443)
    assert hs.split_authority("[2001:db8::1]:443", None) == ("[2001:db8::1]", 443)
    assert hs.absolute_target("http://files.example.org/a/b?c=d") == (
        "files.example.org",
        80,
        "/a/b?c=d",
    )
    assert hs.absolute_target("HTTP://files.example.org:8080") == ("files.example.org", 8080, "/")
    assert hs.absolute_target("http://files.example.org?x") == ("files.example.org", 80, "/?x")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"GET\r\n\r\n", "malformed request line"),
        (b"GET  / HTTP/1.1\r\n\r\n", "malformed request line"),
        (b"GET / HTTP/2\r\n\r\n", "unsupported HTTP version"),
        (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", "malformed header line"),
        (b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n", "malformed header line"),
        (b"GET / HTTP/1.1\r\n folded: x\r\n\r\n", "malformed header line"),
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", "more than 100 header lines"),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * (17 * 1024), "larger than"),
    ],
)
def test_malformed_http_heads(raw: bytes, says: str) -> None:
    with pytest.raises(hs.HandshakeError) as caught:
        hs.http_head(raw)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("/just/a/path", "not a proxy request"),
        ("https://files.example.org/", "use CONNECT"),
        ("http://user:pw@files.example.org/", "user information"),
        ("http://files.example.org:x/", "malformed port"),
        ("http://files.example.org/#frag", "fragment"),
        ("http://2001:db8::1/", "needs brackets"),
    ],
)
def test_absolute_targets_that_are_refused(target: str, says: str) -> None:
    with pytest.raises(hs.HandshakeError) as caught:
        hs.absolute_target(target)
    assert says in str(caught.value)


def test_the_forwarded_head_drops_proxy_and_hop_by_hop_headers() -> None:
    parsed = hs.http_head(
        b"POST http://files.example.org/up HTTP/1.1\r\nHost: evil.example\r\n"
        b"Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"
        b"Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\n"
        b"Content-Length: 3\r\nUser-Agent: t\r\n\r\n"
    )
    assert parsed is not None
    head = hs.forwarded_head(parsed[0], "files.example.org", "/up")
    assert head == (
        b"POST /up HTTP/1.1\r\nHost: files.example.org\r\nContent-Length: 3\r\n"
        b"User-Agent: t\r\nConnection: close\r\n\r\n"
    )


def test_socks5_messages() -> None:
    assert hs.socks_greeting(b"\x05") is None
    assert hs.socks_greeting(b"\x05\x02\x00") is None
    assert hs.socks_greeting(b"\x05\x02\x00\x02rest") == (b"\x00\x02", 4)
    by_name = b"\x05\x01\x00\x03\x11files.example.org\x01\xbb"
    assert hs.socks_request(by_name[:-1]) is None
    assert hs.socks_request(by_name + b"x") == (
        hs.SocksRequest(1, "files.example.org", 443, True),
        len(by_name),
    )
    v4 = b"\x05\x01\x00\x01\x0b\x00\x07\x02\x00\x50"
    assert hs.socks_request(v4) == (hs.SocksRequest(1, "11.0.7.2", 80, False), 10)
    v6 = b"\x05\x03\x00\x04" + b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x01" + b"\x00\x16"
    assert hs.socks_request(v6) == (hs.SocksRequest(3, "2001:db8::1", 22, False), 22)
    for bad in (
        b"\x04\x01\x00\x01" + b"\0" * 6,
        b"\x05\x01\x01\x01" + b"\0" * 6,
        b"\x05\x01\x00\x09" + b"\0" * 6,
        b"\x05\x01\x00\x03\x00\x00\x50",
        b"\x05\x01\x00\x03\x02\xc3\xa9\x00\x50",
    ):
        with pytest.raises(hs.HandshakeError):
            hs.socks_request(bad)


@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_crash_a_parser(data: bytes) -> None:
    for parse in (hs.http_head, hs.socks_greeting, hs.socks_request, hs.client_hello):
        try:
            parse(data)
        except hs.HandshakeError as exc:
            assert "\n" not in str(exc)
