"""Plain HTTP through the proxy: one forwarded request per connection, and nothing more.

The proxy forwards an absolute-form request (``GET http://host/...``) by rewriting its head
and then copying the connection both ways, so everything the run sent after that request,
on the same connection, reached the first host too: a second request (keep-alive, or
pipelined) meant for another host, with that host's credentials, went to the first one, and
no refusal said so. The proxy now knows where the forwarded request ends (Content-Length or
chunked framing; an ambiguous end is refused) and sends nothing after it.

The remote "origin" here is the test network's echo server, which returns whatever reaches
it: what it returns is exactly what the host received.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from collections.abc import Iterator

import pytest
from roboz_helper.egress import handshakes as hs

from .netlab import Lab, RunNet

ALLOW = ["files.remote.test:7", "other.remote.test"]
SECOND = (
    b"GET http://other.remote.test/private HTTP/1.1\r\nHost: other.remote.test\r\n"
    b"Authorization: Bearer for-other-only\r\n\r\n"
)
CASES = {
    "keep-alive": b"GET http://files.remote.test:7/a HTTP/1.1\r\nHost: x\r\n\r\n",
    "content-length": (
        b"POST http://files.remote.test:7/b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    ),
    "chunked": (
        b"POST http://files.remote.test:7/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n"
    ),
}
SEND = """
import json, socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(bytes.fromhex(sys.argv[1]))
s.shutdown(socket.SHUT_WR)
got = b""
try:
    while chunk := s.recv(65536):
        got += chunk
except OSError as exc:
    got += type(exc).__name__.encode()
print(json.dumps(got.decode("latin-1")))
"""


def _send(run: RunNet, data: bytes) -> str:
    result = run.ns.exec(
        ["/usr/bin/python3", "-c", textwrap.dedent(SEND), data.hex()], env=run.env()
    )
    assert result.returncode == 0, result
    return str(json.loads(result.stdout))


@pytest.mark.parametrize("case", list(CASES))
def test_nothing_after_the_forwarded_request_reaches_the_host(lab: Lab, case: str) -> None:
    with lab.run(ALLOW) as run:
        echoed = _send(run, CASES[case] + SECOND)
        report = run.finish()
    assert "for-other-only" not in echoed and "other.remote.test" not in echoed, echoed
    assert echoed.startswith(f"{CASES[case][:4].decode().strip()} /"), echoed
    assert echoed.endswith(CASES[case].split(b"\r\n\r\n", 1)[1].decode()), echoed
    refusal = next(r for r in report.refusals if r.reason == "malformed")
    assert (refusal.host, refusal.port) == ("files.remote.test", 7), report
    assert "one request per connection" in refusal.detail
    assert report.connections == 1


@pytest.mark.parametrize(
    "head",
    [
        b"Transfer-Encoding: chunked\r\nContent-Length: 3",
        b"Content-Length: 3\r\nContent-Length: 4",
        b"Transfer-Encoding: gzip",
        b"Content-Length: -1",
    ],
    ids=["te-and-cl", "two-lengths", "not-chunked", "negative"],
)
def test_a_request_whose_end_is_ambiguous_is_refused(lab: Lab, head: bytes) -> None:
    lab.log.take()
    request = b"POST http://files.remote.test:7/d HTTP/1.1\r\n" + head + b"\r\n\r\nabc"
    with lab.run(ALLOW) as run:
        answer = _send(run, request + SECOND)
        report = run.finish()
    assert answer.startswith("HTTP/1.1 400"), answer
    assert [r.reason for r in report.refusals] == ["malformed"]
    assert [s for s, _ in lab.log.take() if not s.startswith("dns")] == []


def test_a_broken_chunk_ends_what_is_forwarded(lab: Lab) -> None:
    request = (
        b"POST http://files.remote.test:7/e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabcXX"  # three bytes, then no CRLF: the rest is not the body any more
    )
    with lab.run(ALLOW) as run:
        echoed = _send(run, request + SECOND)
        report = run.finish()
    assert echoed.endswith("3\r\nabc") and "other" not in echoed, echoed
    assert [r.detail for r in report.refusals] == ["a chunk not followed by CRLF"]


@pytest.fixture
def ipv6_echo(lab: Lab) -> Iterator[str]:
    """An IPv6 host in the remote namespace whose port 80 echoes."""
    remote, world = "2001:db8:77::2", "2001:db8:77::1"
    lab.remote.ip("addr", "add", f"{remote}/64", "dev", "eth0", "nodad")
    lab.world.ip("addr", "add", f"{world}/64", "dev", "eth0", "nodad")
    server = lab.sockets.make(lab.remote.fd, socket.AF_INET6, address=(remote, 80), listen=True)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield remote
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        lab.remote.ip("addr", "del", f"{remote}/64", "dev", "eth0")
        lab.world.ip("addr", "del", f"{world}/64", "dev", "eth0")


def test_the_host_header_of_an_ipv6_address_has_its_brackets(lab: Lab, ipv6_echo: str) -> None:
    with lab.run([f"[{ipv6_echo}]:80"]) as run:
        echoed = _send(run, f"GET http://[{ipv6_echo}]/v6 HTTP/1.1\r\n\r\n".encode())
    assert f"\r\nHost: [{ipv6_echo}]\r\n" in echoed, echoed


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("step", [1, 2, 7, 4096])
def test_the_end_is_found_however_the_bytes_arrive(case: str, step: int) -> None:
    request = CASES[case]
    parsed = hs.http_head(request)
    assert parsed is not None
    framing = hs.RequestFraming(parsed[1], hs.body_length(parsed[0]))
    data = request + SECOND
    taken = sum(framing.take(data[i : i + step]) for i in range(0, len(data), step))
    assert taken == len(request)
    assert "one request per connection" in framing.problem
