"""Network isolation (issue 5, item 6), both modes, against real listeners on the host.

Nothing here sends traffic off the machine: "no route out" is proven with a UDP connect(),
which only asks the kernel for a route to a documentation address (RFC 5737 / 3849).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Sandbox

PROBE = """
import json, socket, errno
res = {}
def attempt(name, fn):
    try:
        fn(); res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
def tcp():
    s = socket.create_connection(("127.0.0.1", TCP_PORT), timeout=2); s.sendall(b"x")
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", UDP_PORT))
def tcp6():
    socket.create_connection(("::1", TCP_PORT), timeout=2)
def abstract():
    s = socket.socket(socket.AF_UNIX); s.connect("\\0" + ABSTRACT)
def path_unix():
    s = socket.socket(socket.AF_UNIX); s.connect(UNIX_PATH)
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
def vsock():
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
def outside():
    # connect() on a UDP socket only looks up a route; nothing is sent anywhere.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("192.0.2.1", 9))
def outside6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.connect(("2001:db8::1", 9))
def self_loop():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname(), timeout=2); c.sendall(b"hi")
    conn, _ = srv.accept(); assert conn.recv(2) == b"hi"
for name, fn in list(globals().items()):
    if name in ("tcp", "udp", "tcp6", "abstract", "path_unix", "raw", "packet", "vsock",
                "outside", "outside6", "self_loop"):
        attempt(name, fn)
res["interfaces"] = [name for _, name in socket.if_nameindex()]
print(json.dumps(res))
"""


# With no IPv6 address on any interface the lookup fails before it gets to the routes.
NO_IPV6_ROUTE = ("ENETUNREACH", "EADDRNOTAVAIL")


@pytest.fixture
def host_listeners(tmp_path: Path) -> Iterator[dict[str, object]]:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    # The abstract namespace is the whole host's: tmp_path.name repeats across xdist workers.
    abstract = f"roboz-test-{os.getpid()}-{tmp_path.name}"
    ab = socket.socket(socket.AF_UNIX)
    ab.bind("\0" + abstract)
    ab.listen()
    unix_path = str(tmp_path / "host.sock")
    pu = socket.socket(socket.AF_UNIX)
    pu.bind(unix_path)
    pu.listen()
    tcp.setblocking(False)
    yield {
        "TCP_PORT": tcp.getsockname()[1],
        "UDP_PORT": udp.getsockname()[1],
        "ABSTRACT": repr(abstract),
        "UNIX_PATH": repr(unix_path),
        "_tcp": tcp,
        "_udp": udp,
    }
    for s in (tcp, udp, ab, pu):
        s.close()


def _probe(sandbox: Sandbox, listeners: dict[str, object], network: str) -> dict[str, object]:
    script = PROBE
    for key, value in listeners.items():
        if not key.startswith("_"):
            script = script.replace(key, str(value))
    r = sandbox.py(script, network=network)
    assert r.outcome.status == "success", r
    return json.loads(r.out)


def _host_saw_nothing(listeners: dict[str, object]) -> None:
    tcp = listeners["_tcp"]
    udp = listeners["_udp"]
    assert isinstance(tcp, socket.socket) and isinstance(udp, socket.socket)
    with pytest.raises(BlockingIOError):
        tcp.accept()
    with pytest.raises(BlockingIOError):
        udp.recvfrom(16)


def test_network_none_reaches_nothing(sandbox: Sandbox, host_listeners: dict[str, object]) -> None:
    res = _probe(sandbox, host_listeners, "none")
    for name in ("tcp", "udp", "tcp6", "abstract", "path_unix", "raw", "packet", "vsock",
                 "outside", "outside6", "self_loop"):  # fmt: skip
        assert res[name] != "ok", (name, res)
    assert res["raw"] == "EPERM" and res["packet"] in ("EPERM", "EAFNOSUPPORT")
    assert res["vsock"] == "EAFNOSUPPORT"
    # No route out: the kernel's route lookup itself fails, no packet is ever built.
    assert res["outside"] == "ENETUNREACH", res
    assert res["outside6"] in NO_IPV6_ROUTE, res
    assert res["interfaces"] == ["lo"]
    _host_saw_nothing(host_listeners)


def test_network_loopback_reaches_only_itself(
    sandbox: Sandbox, host_listeners: dict[str, object]
) -> None:
    res = _probe(sandbox, host_listeners, "loopback")
    assert res["self_loop"] == "ok", res
    for name in ("tcp", "abstract", "path_unix", "raw", "packet", "vsock", "outside", "outside6"):
        assert res[name] != "ok", (name, res)
    assert res["outside"] == "ENETUNREACH", res
    assert res["outside6"] in NO_IPV6_ROUTE, res
    assert res["tcp"] == "ECONNREFUSED"  # its own 127.0.0.1, where nobody listens
    # A UDP datagram to 127.0.0.1 is "sent" -- into the run's own namespace: the host's UDP
    # listener must not receive it (checked below).
    assert res["interfaces"] == ["lo"]
    _host_saw_nothing(host_listeners)
